#!/usr/bin/env bash
# Crash safety: deltafin killed with SIGKILL at random moments while it downloads
# the core and experts (pull --all, and eval fetching on demand) from a
# rate-limited nginx, 20 times (between rounds the experts are evicted, so
# that every process has something to fetch). After each kill `cache verify` finds nothing
# corrupt and no stray file among the entries; at the end the download completes
# (resuming) and the model computes exactly what the local file computes.
# usage: remote_crash.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-crash; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
# 2 MB/s per request: a run of adjacent experts (one request per part) takes about
# a second, so kills land before, during and after the entries are written.
start_nginx "$dir/ng" "$dir/www" "" "limit_rate 2m;"
url=http://127.0.0.1:$NGINX_PORT/tiny.gguf
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
"$bin" eval -m "$dir/www/tiny.gguf" --ids $ids --top 20 --all-positions >"$dir/ref" 2>/dev/null || exit 1
C=$dir/cache
"$bin" pull "$url" --cache-dir "$C" --no-progress >/dev/null 2>&1  # the core: most kills hit expert fetches
kills=0; bad=0
# The moments of the kills, drawn once: a python3 per round would start slower than
# the process it is to kill on a loaded machine.
read -r -a waits <<<"$(python3 -c "import random; print(' '.join(str(round(random.uniform(0.05, 1.0), 3)) for _ in range(20)))")"
for i in $(seq 1 20); do
  if [ $((i % 2)) = 0 ]; then
    "$bin" pull "$url" --all --cache-dir "$C" --no-progress >/dev/null 2>&1 &
  else
    "$bin" eval -m "$url" --cache-dir "$C" --ids $ids --top 20 --all-positions >/dev/null 2>&1 &
  fi
  pid=$!
  sleep "${waits[$((i - 1))]}"
  if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
  wait $pid 2>/dev/null
  if ! "$bin" cache verify --cache-dir "$C" >"$dir/verify-$i" 2>&1; then
    bad=$((bad + 1)); echo "after kill $i: $(cat "$dir/verify-$i")"
  fi
  grep -q " 0 corrupt (removed); [0-9]* core part(s) ok, 0 bad" "$dir/verify-$i" || bad=$((bad + 1))
  # Keep work for the next process: evict the experts, and every seventh round the
  # core as well.
  rm -f "$C"/models/*/experts/*
  [ $((i % 7)) = 0 ] && rm -f "$C"/models/*/core-*
done
check "$kills of 20 processes killed mid-download; cache verify clean after every one" \
  bash -c "[ $kills -ge 10 ] && [ $bad = 0 ]"
"$bin" pull "$url" --all --cache-dir "$C" --no-progress >"$dir/pull.out" 2>"$dir/pull.err"
check "pull --all completes after the kills" grep -q "16 experts on disk" "$dir/pull.err"
"$bin" cache verify --cache-dir "$C" >"$dir/verify-final" 2>&1
check "final cache verify: 16 entries ok, core ok" grep -q "verified: 16 expert entries ok, 0 corrupt (removed); 1 core part(s) ok, 0 bad" "$dir/verify-final"
check "no temp files left behind" test -z "$(ls "$C/tmp")"
"$bin" eval -m "$url" --cache-dir "$C" --ids $ids --top 20 --all-positions --stats >"$dir/out" 2>"$dir/out.err"
check "eval after the kills = local eval, served from the cache" \
  bash -c "cmp -s '$dir/ref' '$dir/out' && grep -q ' 0 fetched from the origin' '$dir/out.err'"
exit $fail
