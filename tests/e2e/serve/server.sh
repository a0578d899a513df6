# The server side of the serve_*.sh tests: start_server / stop_server for `deltafin
# serve -m $model` (with --chat-template $tmpl when tmpl is set) on a free loopback
# port, and check(). Set before sourcing: bin, dir, model; fail=0.
check() { # description, command...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
# start_server ARGS...: starts `deltafin serve` on a free port; sets pid, port, base.
start_server() {
  "$bin" serve -m "$model" --host 127.0.0.1 --port 0 ${tmpl:+--chat-template "$tmpl"} "$@" \
    >"$dir/serve.out" 2>"$dir/serve.err" &
  pid=$!
  port=
  for _ in $(seq 1 300); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/serve.out" 2>/dev/null | grep -o '[0-9]*$')
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then echo "FAIL the server did not start:"; cat "$dir/serve.err"; exit 1; fi
  base=http://127.0.0.1:$port
}
# alive PID: running (a zombie child that has exited does not count).
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null); [ -n "$s" ] && [ "${s:0:1}" != Z ]; }
stop_server() {
  kill -TERM $pid 2>/dev/null
  for _ in $(seq 1 100); do alive $pid || { wait $pid; return 0; }; sleep 0.1; done
  echo "FAIL the server did not stop within 10 s of SIGTERM"; kill -9 $pid; fail=1
}
# cancelled_at_least N: waits up to 10 s until /metrics counts N cancelled generations;
# prints the count.
cancelled_at_least() {
  local n=0
  for _ in $(seq 1 50); do
    n=$(curl -s "$base/metrics" | grep 'deltafin_generations_total{result="cancelled"}' | grep -o '[0-9]*$')
    [ "${n:-0}" -ge "$1" ] && break
    sleep 0.2
  done
  echo "${n:-0}"
}
trap 'kill -9 $pid 2>/dev/null' EXIT
