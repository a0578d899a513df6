#!/usr/bin/env bash
# The network misbehaving: the project's fault proxy (tests/remote/fault_proxy.py)
# between deltafin and a real nginx resets connections mid-body, truncates bodies,
# answers 500/503/429 (Retry-After), sends a wrong Content-Range, trickles, stalls,
# or reports a changed file. Each case gives the local model's exact logits (the
# retries resume partial ranges) or, for the changed file, a clear error; the disk
# cache verifies clean afterwards in every case.
# usage: remote_faults.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-faults; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
trap 'stop_proxy "$dir/px"; stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
start_nginx "$dir/ng" "$dir/www"
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/www/tiny.gguf" >"$dir/ref" 2>/dev/null || { echo "FAIL local eval"; exit 1; }

for fault in reset truncate 500 503 429 badrange trickle stall etag; do
  start_proxy "$dir/px" "$NGINX_PORT" --fault "$fault" --every 3
  C=$dir/cache-$fault
  ev -m "http://127.0.0.1:$PROXY_PORT/tiny.gguf" --cache-dir "$C" --net-timeout 1 --stats \
    >"$dir/out-$fault" 2>"$dir/err-$fault"; rc=$?
  stop_proxy "$dir/px"
  injected=$(grep -c "fault=$fault" "$dir/px/proxy.log")
  if [ "$fault" = etag ]; then
    check "$fault: fails" test $rc != 0
    check "$fault: the error names the URL, the range and the change" \
      grep -Eq "error: GET http://127.0.0.1:$PROXY_PORT/tiny.gguf bytes [0-9]+-[0-9]+: the file changed at the origin" "$dir/err-$fault"
  else
    check "$fault: $injected faults injected, logits identical to the local run" \
      bash -c "[ $rc = 0 ] && [ $injected -ge 2 ] && cmp -s '$dir/ref' '$dir/out-$fault'"
    grep -Eq "network: .* [1-9][0-9]* retries" "$dir/err-$fault" || [ "$fault" = trickle ] ||
      { echo "FAIL $fault: no retries counted"; fail=1; }
  fi
  "$bin" cache verify --cache-dir "$C" >"$dir/verify-$fault" 2>&1
  check "$fault: cache verify clean" grep -q " 0 corrupt (removed); [0-9]* core part(s) ok, 0 bad" "$dir/verify-$fault"
done
check "truncate: a retry resumed mid-range" python3 -c "
import re
lines=[l.split() for l in open('$dir/ng/ranges.log') if l.startswith('GET /tiny.gguf')]
rs=[tuple(map(int,re.match(r'bytes=(\d+)-(\d+)',l[3]).groups())) for l in lines if l[3].startswith('bytes=')]
# some request ends where another does but starts later: a resumed tail
ends={}
for a,b in rs: ends.setdefault(b,set()).add(a)
import sys; sys.exit(0 if any(len(s)>1 for s in ends.values()) else 1)"

# A fault that persists: the request fails with a clear error naming URL and range,
# after the configured attempts, and nothing corrupt is stored.
start_proxy "$dir/px" "$NGINX_PORT" --fault 503
ev -m "http://127.0.0.1:$PROXY_PORT/tiny.gguf" --cache-dir "$dir/cache-down" --net-retries 3 \
  >/dev/null 2>"$dir/err-down"; rc=$?
stop_proxy "$dir/px"
check "persistent 503: fails" test $rc != 0
check "persistent 503: clear error (URL, range, status, attempts)" \
  grep -Eq "GET http://127.0.0.1:[0-9]+/tiny.gguf bytes [0-9]+-[0-9]+: HTTP 503 \(gave up after 3 failed attempts\)" "$dir/err-down"
check "persistent 503: cache verify clean" "$bin" cache verify --cache-dir "$dir/cache-down"
exit $fail
