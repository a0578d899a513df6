#!/usr/bin/env bash
# A disk that fills up: the cache directory on a small tmpfs (24 MiB), filled up
# behind deltafin's back. pull --all fails with a clear "No space left on
# device" error naming the file; no partial entry or temp file is left; a run then
# still computes exactly (the experts that cannot be stored are served from
# memory, with one warning). Skipped where tmpfs cannot be mounted (not root).
# usage: remote_diskfull.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-diskfull; mkdir -p "$dir"
umount "$dir/full" 2>/dev/null; rm -rf "$dir"; mkdir -p "$dir/www" "$dir/full"
source "$src/tests/remote/nginx.sh"
mount -t tmpfs -o size=24m tmpfs "$dir/full" 2>/dev/null || { echo "skip: cannot mount a tmpfs (needs root)"; exit 77; }
trap 'stop_nginx "$dir/ng"; umount "$dir/full"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
start_nginx "$dir/ng" "$dir/www" "" "location /slow/ { alias $dir/www/; limit_rate 2m; }"
url=http://127.0.0.1:$NGINX_PORT/tiny.gguf
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
"$bin" eval -m "$dir/www/tiny.gguf" --ids $ids --top 20 --all-positions >"$dir/ref" 2>/dev/null || exit 1
C=$dir/full/cache

# The core fits; then the disk fills up (1.5 MB left).
"$bin" pull "$url" --cache-dir "$C" --no-progress >/dev/null 2>&1
check "the core fits" test -f "$(ls -d "$C"/models/*)/core-1.ok"
avail=$(df --output=avail -B1 "$dir/full" | tail -1)
head -c $((avail - 1500000)) /dev/zero >"$dir/full/filler" 2>/dev/null
# pull checks free space first and refuses.
"$bin" pull "$url" --all --cache-dir "$C" --no-progress >/dev/null 2>"$dir/pull-check.err"; rc=$?
check "pull --all refuses up front: needs more than is free" \
  bash -c "[ $rc != 0 ] && grep -q 'but only .* is free' '$dir/pull-check.err'"
"$bin" eval -m "$url" --cache-dir "$C" --ids $ids --top 20 --all-positions --stats >"$dir/out" 2>"$dir/out.err"; rc=$?
check "eval on a full disk: exit 0 and logits identical to the local run" bash -c "[ $rc = 0 ] && cmp -s '$dir/ref' '$dir/out'"
check "eval on a full disk: one clear warning naming the file and ENOSPC" \
  bash -c "[ \$(grep -c 'No space left on device' '$dir/out.err') = 1 ] && grep -q 'cannot write .*/experts/' '$dir/out.err'"
check "eval on a full disk: write errors counted" grep -Eq "[1-9][0-9]* write errors" "$dir/out.err"
check "no temp file left" test -z "$(ls "$C/tmp")"
"$bin" cache verify --cache-dir "$C" >"$dir/verify" 2>&1
check "cache verify clean: every visible entry whole" grep -q " 0 corrupt (removed); 1 core part(s) ok, 0 bad" "$dir/verify"
# A pull that runs out of space mid-way (the disk fills while experts are in flight
# from a slow origin) fails with a clear error.
rm -f "$C"/models/*/experts/* "$dir/full/filler"
slow=http://127.0.0.1:$NGINX_PORT/slow/tiny.gguf
"$bin" pull "$slow" --layers 0-1 --cache-dir "$C" --no-progress >/dev/null 2>"$dir/pull.err" &
pid=$!
sleep 0.5
avail=$(df --output=avail -B1 "$dir/full" | tail -1)
head -c $((avail - 1500000)) /dev/zero >"$dir/full/filler" 2>/dev/null
wait $pid; rc=$?
check "pull on a full disk fails with a clear error" bash -c "[ $rc != 0 ] && grep -q 'No space left on device' '$dir/pull.err'"
"$bin" cache verify --cache-dir "$C" >"$dir/verify2" 2>&1
check "after the failed pull: cache verify clean, no temp file" \
  bash -c "grep -Eq ' 0 corrupt \(removed\); [12] core part\(s\) ok, 0 bad' '$dir/verify2' && [ -z \"\$(ls '$C/tmp')\" ]"
exit $fail
