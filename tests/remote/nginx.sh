# Helpers for the remote-model tests (sourced, not a test): a real nginx on a
# random loopback port serving generated models, from a config written into a temp
# directory, and the project's fault-injecting proxy.
#
#   free_port                       prints a free loopback TCP port
#   start_nginx DIR ROOT [HTTP] [SERVER] [LISTEN]   serves ROOT; extra directives for
#                                   the http and server blocks, extra parameters of
#                                   `listen` (e.g. "ssl http2"); sets NGINX_PORT
#   stop_nginx DIR
#   start_proxy DIR UPSTREAM_PORT ARGS...  the fault proxy; sets PROXY_PORT (to
#                                   $PROXY_PORT_WANT if set: one URL, one cache key
#                                   across restarts with other faults)
#   stop_proxy DIR

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_port() { # port
  for _ in $(seq 1 100); do
    python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$1)))" && return 0
    sleep 0.05
  done
  return 1
}

start_nginx() { # dir root [http-extra] [server-extra] [listen-params]
  local dir=$1 root=$2 http_extra=${3:-} server_extra=${4:-} listen_params=${5:-}
  command -v nginx >/dev/null || { echo "skip: nginx is not installed (scripts/setup --test)"; exit 77; }
  mkdir -p "$dir/tmp"
  NGINX_PORT=$(free_port)
  local user=""
  [ "$(id -u)" = 0 ] && user="user root;"
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
$user
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 512; }
http {
  access_log $dir/access.log;
  log_format ranges '\$request \$http_range \$status \$body_bytes_sent';
  access_log $dir/ranges.log ranges;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  sendfile on;
  keepalive_requests 100000;
  types { application/octet-stream gguf; }
  $http_extra
  server {
    listen 127.0.0.1:$NGINX_PORT $listen_params;
    root $root;
    $server_extra
  }
}
CONF
  nginx -c "$dir/nginx.conf" -p "$dir" 2>"$dir/start.err" || { echo "FAIL nginx did not start: $(cat "$dir/start.err")"; exit 1; }
  wait_port "$NGINX_PORT" || { echo "FAIL nginx is not listening on $NGINX_PORT"; exit 1; }
}

stop_nginx() { # dir
  [ -f "$1/nginx.pid" ] && kill "$(cat "$1/nginx.pid")" 2>/dev/null
  for _ in $(seq 1 50); do [ -f "$1/nginx.pid" ] || break; sleep 0.05; done
}

start_proxy() { # dir upstream-port args...
  local dir=$1 up=$2; shift 2
  mkdir -p "$dir"
  PROXY_PORT=${PROXY_PORT_WANT:-$(free_port)}
  rm -f "$dir/proxy.log"  # an earlier proxy's "listening" line must not count
  python3 "$(dirname "${BASH_SOURCE[0]}")/fault_proxy.py" --port "$PROXY_PORT" --upstream "$up" "$@" \
    >"$dir/proxy.log" 2>&1 &
  local pid=$!
  echo $pid >"$dir/proxy.pid"
  # Its own line, not an open port: the port may still answer for an earlier proxy
  # (or another test's server) while this one failed to bind it.
  for _ in $(seq 1 200); do
    grep -q "^listening on" "$dir/proxy.log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "FAIL the fault proxy did not start on port $PROXY_PORT: $(cat "$dir/proxy.log")"; exit 1
}

stop_proxy() { # dir (waits until it is gone, so that its port is free again)
  if [ -f "$1/proxy.pid" ]; then
    local pid; pid=$(cat "$1/proxy.pid")
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    if kill -0 "$pid" 2>/dev/null; then  # still there after 2 s (a loaded machine)
      kill -9 "$pid" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    fi
  fi
  rm -f "$1/proxy.pid"
}
