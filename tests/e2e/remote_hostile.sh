#!/usr/bin/env bash
# A hostile origin and a tampered cache (issue 22), against a real nginx on loopback
# behind the project's fault proxy:
#   - the file changes at the same size while the origin stops sending its ETag:
#     a clear error, never a mix of two versions; the cache is not poisoned (the
#     fixed origin gives the local output again);
#   - range responses that lose the ETag the file was opened with: a clear error;
#   - an origin with neither ETag nor Last-Modified: a warning at open, the part
#     pinned by size and a hash of its first and last 64 KiB, a change at the same
#     size is caught;
#   - an origin that drips one byte every 0.2 s: the request's overall deadline
#     (--net-min-rate) ends the run with a clear error, in seconds;
#   - a Content-Length larger than the body, the connection held open: the run
#     completes as soon as the bytes asked for are in, never asking for an empty or
#     inverted range;
#   - a FIFO in place of a cached expert: `cache verify` and `eval` do not block;
#     the entry is dropped and fetched again;
#   - garbage lines in core-1.ok: dropped like any corrupt entry, the core fetched
#     again, the output identical.
# usage: remote_hostile.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-hostile; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_proxy "$dir/px"; stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

# Two revisions of one model at the same size (another seed), with distinct mtimes
# (nginx's ETag is mtime-size).
"$bin" synth --preset tiny --arch qwen3moe --experts 8 --seed 1 -o "$dir/v1.gguf" >/dev/null 2>&1 || exit 1
"$bin" synth --preset tiny --arch qwen3moe --experts 8 --seed 2 -o "$dir/v2.gguf" >/dev/null 2>&1 || exit 1
[ "$(stat -c %s "$dir/v1.gguf")" = "$(stat -c %s "$dir/v2.gguf")" ] || { echo "FAIL the revisions differ in size"; exit 1; }
serve() { cp "$dir/$1.gguf" "$dir/www/tiny.gguf"; touch -d "@$2" "$dir/www/tiny.gguf"; }
serve v1 1700000000
start_nginx "$dir/ng" "$dir/www"
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { timeout 90 "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/v1.gguf" >"$dir/ref1" 2>/dev/null || { echo "FAIL local eval"; exit 1; }
ev -m "$dir/v2.gguf" >"$dir/ref2" 2>/dev/null || { echo "FAIL local eval"; exit 1; }
cmp -s "$dir/ref1" "$dir/ref2" && { echo "FAIL the two revisions compute the same"; exit 1; }
PROXY_PORT_WANT=$(free_port)  # the same URL (the cache key) whatever the fault
via() { start_proxy "$dir/px" "$NGINX_PORT" "$@"; url=http://127.0.0.1:$PROXY_PORT/tiny.gguf; }

# 1. The cache is filled from v1; then the origin serves v2 at the same size and
# stops sending the ETag.
C=$dir/cache
via --fault none
ev -m "$url" --cache-dir "$C" >"$dir/fill" 2>"$dir/fill.err"
check "filled from v1: output = local v1" cmp -s "$dir/ref1" "$dir/fill"
stop_proxy "$dir/px"
serve v2 1700000100
via --fault drop-etag --probes
ev -m "$url" --cache-dir "$C" >"$dir/noetag" 2>"$dir/noetag.err"; rc=$?
stop_proxy "$dir/px"
check "v2 without an ETag: fails (rc $rc)" bash -c "[ $rc != 0 ] && [ $rc != 124 ]"
check "v2 without an ETag: the error says the ETag went missing" \
  grep -q "changed at the origin since it was cached .*its ETag was .* and the origin now sends none" "$dir/noetag.err"
check "v2 without an ETag: no output" test ! -s "$dir/noetag"
serve v1 1700000000
via --fault none
ev -m "$url" --cache-dir "$C" >"$dir/fixed" 2>"$dir/fixed.err"
stop_proxy "$dir/px"
check "origin fixed: output = local v1 (the cache was not poisoned)" cmp -s "$dir/ref1" "$dir/fixed"

# 2. Range responses without the ETag the file was opened with (the probe has it).
via --fault drop-etag
ev -m "$url" --cache-dir "$dir/cache-r" >/dev/null 2>"$dir/range-noetag.err"; rc=$?
stop_proxy "$dir/px"
check "ranges without the ETag: fails (rc $rc), naming the URL, the range and the missing ETag" \
  bash -c "[ $rc != 0 ] && [ $rc != 124 ] && grep -Eq 'GET $url bytes [0-9]+-[0-9]+: the file changed at the origin: the response carries no ETag' '$dir/range-noetag.err'"
timeout 30 "$bin" cache verify --cache-dir "$dir/cache-r" >"$dir/verify-r" 2>&1
check "ranges without the ETag: cache verify clean" grep -q " 0 corrupt (removed);" "$dir/verify-r"

# 3. An origin with no validator at all.
C3=$dir/cache-nv
via --fault drop-validators --probes
ev -m "$url" --cache-dir "$C3" >"$dir/nv" 2>"$dir/nv.err"; rc=$?
check "no validator: runs (rc $rc), output = local v1" bash -c "[ $rc = 0 ] && cmp -s '$dir/ref1' '$dir/nv'"
check "no validator: a warning at open says so and what is pinned" \
  grep -q "sends neither ETag nor Last-Modified .* pins it by its size .* first and last 64 KiB" "$dir/nv.err"
check "no validator: meta.json holds the fingerprint" grep -q '"fingerprint": "[0-9a-f]\{16\}"' "$C3"/models/*/meta.json
serve v2 1700000100
ev -m "$url" --cache-dir "$C3" >"$dir/nv2" 2>"$dir/nv2.err"; rc=$?
check "no validator, v2 at the same size: fails (rc $rc) with the hash named" \
  bash -c "[ $rc != 0 ] && [ $rc != 124 ] && grep -q 'changed at the origin since it was cached .*first and last 64 KiB hash to' '$dir/nv2.err'"
serve v1 1700000000
ev -m "$url" --cache-dir "$C3" >"$dir/nv3" 2>/dev/null
check "no validator, v1 again: output = local v1" cmp -s "$dir/ref1" "$dir/nv3"
stop_proxy "$dir/px"

# 4. An origin that drips a byte every 0.2 s: --net-timeout never fires, the
# overall deadline does (1 MiB at 1M/s + 2 s).
via --fault drip
start=$(date +%s)
ev -m "$url" --cache-dir "$dir/cache-drip" --net-timeout 2 --net-min-rate 1M >/dev/null 2>"$dir/drip.err"; rc=$?
took=$(($(date +%s) - start))
stop_proxy "$dir/px"
check "dripping origin: fails in ${took} s (rc $rc), under 30 s" bash -c "[ $rc != 0 ] && [ $rc != 124 ] && [ $took -lt 30 ]"
check "dripping origin: the error names the range and --net-min-rate" \
  grep -Eq "GET $url bytes [0-9]+-[0-9]+: .* slower than the minimum rate of 1048576 bytes/s \(--net-min-rate\)" "$dir/drip.err"

# 5. Content-Length larger than the body, the connection held open for 60 s.
via --fault oversize
start=$(date +%s)
ev -m "$url" --cache-dir "$dir/cache-over" --net-timeout 5 --stats >"$dir/over" 2>"$dir/over.err"; rc=$?
took=$(($(date +%s) - start))
stop_proxy "$dir/px"
check "oversized Content-Length: output = local v1 in ${took} s (rc $rc)" \
  bash -c "[ $rc = 0 ] && cmp -s '$dir/ref1' '$dir/over' && [ $took -lt 20 ]"
[ $rc = 0 ] || tail -5 "$dir/over.err"  # why, for a failure seen once under ctest -j2
check "oversized Content-Length: faults injected, no retry, no empty or inverted range asked for" python3 -c "
import re, sys
rs = [l for l in open('$dir/px/proxy.log') if ' bytes=' in l]
bad = [l for l in rs if (lambda m: not m or int(m.group(1)) > int(m.group(2)))(re.search(r'bytes=(\d+)-(\d+)', l))]
faults = sum('fault=oversize' in l for l in rs)
sys.exit(0 if faults >= 2 and not bad else 1)" && grep -q " 0 retries" "$dir/over.err"

# 6. A FIFO in place of a cached expert (and of another one for the run).
entries=("$C"/models/*/experts/*)
check "the cache holds expert entries" test -f "${entries[0]}"
rm -f "${entries[0]}"; mkfifo "${entries[0]}"
timeout 30 "$bin" cache verify --cache-dir "$C" >"$dir/verify-fifo" 2>&1; rc=$?
check "FIFO entry: cache verify ends (rc $rc), names it and removes it" \
  bash -c "[ $rc = 1 ] && grep -q '${entries[0]}: not a regular file (removed' '$dir/verify-fifo' && [ ! -e '${entries[0]}' ]"
rm -f "${entries[1]}"; mkfifo "${entries[1]}"
via --fault none
ev -m "$url" --cache-dir "$C" >"$dir/fifo" 2>"$dir/fifo.err"; rc=$?
check "FIFO entry: eval ends (rc $rc), output = local v1, the entry refetched as a file" \
  bash -c "[ $rc = 0 ] && cmp -s '$dir/ref1' '$dir/fifo' && { [ ! -e '${entries[1]}' ] || [ -f '${entries[1]}' ]; }"

# 7. Garbage in core-1.ok: a chunk of 2^64-1 bytes, one past the end, a bad line.
ok=$(ls "$C"/models/*/core-1.ok)
printf '0 18446744073709551615 0\n999999999999 4096 1f\nnot a chunk\n' >>"$ok"
timeout 30 "$bin" cache verify --cache-dir "$C" >"$dir/verify-ok" 2>&1; rc=$?
check "garbage core-1.ok: cache verify reports it (rc $rc), no crash" \
  bash -c "[ $rc = 1 ] && grep -q 'core-1.ok: damaged manifest (removed' '$dir/verify-ok'"
printf 'deltafin-core 1 %s\n0 18446744073709551615 0\n' "$(stat -c %s "$dir/v1.gguf")" >"$ok"
ev -m "$url" --cache-dir "$C" >"$dir/badok" 2>"$dir/badok.err"; rc=$?
check "garbage core-1.ok: eval (rc $rc) drops it with a warning, output = local v1" \
  bash -c "[ $rc = 0 ] && cmp -s '$dir/ref1' '$dir/badok' && grep -q 'core-1.ok: line 2 .* dropping the manifest' '$dir/badok.err'"
stop_proxy "$dir/px"
timeout 30 "$bin" cache verify --cache-dir "$C" >"$dir/verify-end" 2>&1
check "cache verify clean at the end" grep -q " 0 corrupt (removed); 1 core part(s) ok, 0 bad" "$dir/verify-end"
exit $fail
