#!/usr/bin/env bash
# A team's shared expert cache: nginx as a caching reverse proxy (slice module:
# 1 MiB slices cached by range) in front of an origin nginx, as documented in the
# README. Two machines (two fresh deltafin disk caches) read the model through the
# proxy: both compute exactly the local logits, and the second is served entirely
# from the proxy's cache (the origin sees no new request).
# usage: remote_proxy_cache.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-proxy-cache; rm -rf "$dir"; mkdir -p "$dir/www" "$dir/pcache"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/proxy"; stop_nginx "$dir/origin"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
start_nginx "$dir/origin" "$dir/www"
origin=$NGINX_PORT
start_nginx "$dir/proxy" "$dir/www" \
  "proxy_cache_path $dir/pcache levels=1:2 keys_zone=experts:10m max_size=1g inactive=7d use_temp_path=off;" "
    location / {
      slice 1m;
      proxy_cache experts;
      proxy_cache_key \$uri\$is_args\$args\$slice_range;
      proxy_set_header Range \$slice_range;
      proxy_cache_valid 200 206 7d;
      proxy_http_version 1.1;
      proxy_set_header Connection '';
      proxy_pass http://127.0.0.1:$origin;
      add_header X-Cache-Status \$upstream_cache_status always;
    }"
url=http://127.0.0.1:$NGINX_PORT/tiny.gguf
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/www/tiny.gguf" >"$dir/ref" 2>/dev/null || exit 1

ev -m "$url" --cache-dir "$dir/machine-a" >"$dir/a" 2>"$dir/a.err"
check "machine A through the caching proxy = local eval" cmp -s "$dir/ref" "$dir/a"
n_a=$(grep -c '^GET' "$dir/origin/ranges.log")
check "machine A: the proxy filled its cache from the origin ($n_a slice requests)" test "$n_a" -gt 0
ev -m "$url" --cache-dir "$dir/machine-b" >"$dir/b" 2>"$dir/b.err"
check "machine B through the caching proxy = local eval" cmp -s "$dir/ref" "$dir/b"
n_b=$(grep -c '^GET' "$dir/origin/ranges.log")
check "machine B: served by the proxy's cache, no new origin request ($n_a -> $n_b)" test "$n_b" = "$n_a"
"$bin" cache verify --cache-dir "$dir/machine-b" >/dev/null
check "machine B: cache verify clean" test $? = 0
exit $fail
