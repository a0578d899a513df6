#!/usr/bin/env bash
# A disk that fills up: the cache directory on a small tmpfs (24 MiB), filled up
# behind deltafin's back. pull --all fails with a clear "No space left on
# device" error naming the file; no partial entry or temp file is left; a run then
# still computes exactly (the experts that cannot be stored are served from
# memory, with one warning). With a --disk-cache budget on a full disk (issue 22),
# eviction makes room before writing (the budget holds, every expert is stored),
# and a write that finds the disk full before the budget is reached evicts and is
# tried again. Skipped where tmpfs cannot be mounted (not root).
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

# A budget on a full disk: a cache of the core and the experts of layer 0 (about
# 9 MB), the disk then filled to 300 KB free, less than one expert (786 KB).
used_by_models() { python3 -c "
import os, sys
n = 0
for r, _, fs in os.walk(sys.argv[1] + '/models'):
    for f in fs: n += os.lstat(os.path.join(r, f)).st_blocks * 512
print(n)" "$1"; }
budget_case() { # name --disk-cache
  local B=$dir/full/cache-$1
  rm -f "$dir/full/filler"; rm -rf "$C" "$B"
  "$bin" pull "$url" --all --cache-dir "$B" --no-progress >/dev/null 2>&1
  rm -f "$B"/models/*/experts/1-*
  avail=$(df --output=avail -B1 "$dir/full" | tail -1)
  head -c $((avail - 300000)) /dev/zero >"$dir/full/filler" 2>/dev/null
  before=$(used_by_models "$B")
  "$bin" eval -m "$url" --cache-dir "$B" --disk-cache "$2" --ids $ids --top 20 --all-positions --stats \
    >"$dir/out-$1" 2>"$dir/out-$1.err"; rc=$?
  after=$(used_by_models "$B")
  check "$1: eval with --disk-cache $2 on a full disk: exit 0, logits identical to the local run" \
    bash -c "[ $rc = 0 ] && cmp -s '$dir/ref' '$dir/out-$1'"
  # (Entries are written after their experts are handed out: count them on disk,
  # not in the stats printed at the end of the run.)
  local fetched kept1 kept0
  fetched=$(grep -o '[0-9]* fetched from the origin' "$dir/out-$1.err" | grep -o '^[0-9]*')
  kept1=$(ls "$B"/models/*/experts/ | grep -c '^1-'); kept0=$(ls "$B"/models/*/experts/ | grep -c '^0-')
  # Within 6M the last ones fetched evict the first; with 20M every one is kept.
  local want=$fetched; [ "$1" = over-budget ] && want=$((kept1 > 0 ? kept1 : -1))
  check "$1: no write failed, experts fetched $fetched, on disk $kept1, layer-0 entries evicted ($kept0 of 8 left)" \
    bash -c "! grep -q 'No space left' '$dir/out-$1.err' && [ '$fetched' -ge 1 ] && [ $kept1 = '$want' ] && [ $kept0 -lt 8 ]"
  echo "   ($1: cache $before bytes before, $after after)"
}
budget_case over-budget 6M
check "over-budget: the cache ends within the 6M budget" bash -c "[ $after -le $((6 << 20)) ]"
rm -rf "$dir/full/cache-over-budget"
budget_case enospc 20M
exit $fail
