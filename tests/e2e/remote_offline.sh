#!/usr/bin/env bash
# Offline use of a remote model: once the core and the experts a prompt needs are in
# the disk cache, `eval`/`run` compute exactly what the local file computes with the
# origin gone (nginx stopped: deltafin notices and works from the cache on its own)
# or with --offline (nothing is sent even though the origin is up); an hf:// branch
# is found offline through the revision it was pinned from; an expert that is not
# cached is a clear error naming it; --offline with nothing cached says to pull.
# Also: a clean core verification is remembered (core-N.verified), and a changed
# core file is still rehashed.
# usage: remote_offline.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-offline; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
commit=89abcdef0123456789abcdef0123456789abcdef
hf_conf="
    location ~ ^/acme/tiny/resolve/(main|$commit)/(.+)\$ {
      add_header X-Repo-Commit $commit always;
      return 302 /cdn/\$2;
    }
    location /cdn/ { alias $dir/www/; }"
start_nginx "$dir/ng" "$dir/www" "" "$hf_conf"
port=$NGINX_PORT
url=http://127.0.0.1:$port/tiny.gguf
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/www/tiny.gguf" >"$dir/ref" 2>/dev/null || { echo "FAIL local eval"; exit 1; }
C=$dir/cache

# Online once: the core and the experts these ids need land in the cache.
ev -m "$url" --cache-dir "$C" >"$dir/online" 2>"$dir/online.err"
check "online eval = local eval" cmp -s "$dir/ref" "$dir/online"
HF_ENDPOINT=http://127.0.0.1:$port ev -m "hf://acme/tiny/tiny.gguf" --cache-dir "$C" >/dev/null 2>&1
a=$("$bin" run -m "$dir/www/tiny.gguf" -p "hello world" -n 12 --temp 0 2>/dev/null)
"$bin" run -m "$url" --cache-dir "$C" -p "hello world" -n 12 --temp 0 >/dev/null 2>&1
check "a clean core verification is remembered" \
  test -f "$(dirname "$(grep -l "\"key\": \"$url\"" "$C"/models/*/meta.json)")/core-1.verified"

# --offline while the origin is up: nothing is sent.
n0=$(grep -c . "$dir/ng/ranges.log")
ev -m "$url" --cache-dir "$C" --offline --stats >"$dir/off" 2>"$dir/off.err"
check "--offline eval = local eval" cmp -s "$dir/ref" "$dir/off"
check "--offline: no request reached nginx" test "$(grep -c . "$dir/ng/ranges.log")" = "$n0"
check "--offline: served from disk, 0 fetched" grep -Eq "[1-9][0-9]* experts from disk, 0 fetched" "$dir/off.err"

# The origin goes away: deltafin notices and uses the cache.
stop_nginx "$dir/ng"
start=$(date +%s)
ev -m "$url" --cache-dir "$C" >"$dir/down" 2>"$dir/down.err"
check "origin down: eval = local eval" cmp -s "$dir/ref" "$dir/down"
check "origin down: says it works offline and why" grep -q "unreachable.*working offline" "$dir/down.err"
check "origin down: noticed quickly ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -lt 5
b=$("$bin" run -m "$url" --cache-dir "$C" -p "hello world" -n 12 --temp 0 2>/dev/null)
check "origin down: run generates the local text" test -n "$a" -a "$a" = "$b"
HF_ENDPOINT=http://127.0.0.1:$port ev -m "hf://acme/tiny/tiny.gguf" --cache-dir "$C" >"$dir/hf-down" 2>"$dir/hf-down.err"
check "origin down: hf://acme/tiny (branch main) found offline at its pinned commit = local eval" \
  bash -c "cmp -s '$dir/ref' '$dir/hf-down' && grep -q 'working offline' '$dir/hf-down.err'"

# An expert that is not cached: a clear error naming it, at once.
m=$(dirname "$(grep -l "\"key\": \"$url\"" "$C"/models/*/meta.json)")
for e in "$m"/experts/*; do
  mv "$e" "$dir/moved-entry"; victim=$(basename "$e"); break
done
layer=${victim%-*}; expert=${victim#*-}
start=$(date +%s)
ev -m "$url" --cache-dir "$C" >/dev/null 2>"$dir/missing.err"; rc=$?
check "missing expert offline: fails" test $rc != 0
check "missing expert offline: the error names expert $expert of layer $layer and the unreachable origin" \
  grep -q "expert $expert of layer $layer is not in the disk cache .* and the origin is unreachable" "$dir/missing.err"
check "missing expert offline: fails at once ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -lt 5
mv "$dir/moved-entry" "$m/experts/$victim"

# --offline with nothing cached.
ev -m "$url" --cache-dir "$dir/empty" --offline >/dev/null 2>"$dir/empty.err"; rc=$?
check "--offline, nothing cached: fails with a clear error (not in the disk cache, pull)" \
  bash -c "[ $rc != 0 ] && grep -q 'not in the disk cache' '$dir/empty.err' && grep -q 'deltafin pull' '$dir/empty.err'"

# A changed core file is rehashed despite the remembered verification (repairing it
# needs the origin: remote_identical.sh).
core=$m/core-1.bin
python3 -c "
import sys; f=open(sys.argv[1],'r+b'); f.seek(100); b=f.read(1); f.seek(100); f.write(bytes([b[0]^0x01]))" "$core"
ev -m "$url" --cache-dir "$C" --offline >/dev/null 2>"$dir/corrupt-off.err"; rc=$?
check "a corrupted core, offline: caught by its checksum, and cannot be repaired offline" \
  bash -c "[ $rc != 0 ] && grep -q 'failed their checksum' '$dir/corrupt-off.err' && grep -q 'core of part 1 is not complete' '$dir/corrupt-off.err'"
exit $fail
