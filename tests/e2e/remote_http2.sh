#!/usr/bin/env bash
# Remote models over HTTPS with HTTP/2: a real nginx on loopback serving TLS with a
# certificate this test makes with openssl (its own CA). Without that CA deltafin
# refuses the server (verification is never off by default); with --ca-cert or
# CURL_CA_BUNDLE it computes exactly what the local file computes, every request
# went over HTTP/2 (nginx's log and the --stats network line agree), and the
# concurrent range requests of a process shared one multiplexed connection.
# usage: remote_http2.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-remote-http2; rm -rf "$dir"; mkdir -p "$dir/www" "$dir/tls"
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }
command -v openssl >/dev/null || { echo "skip: openssl is not installed (scripts/setup --test)"; exit 77; }
nginx -V 2>&1 | grep -q http_v2_module || { echo "skip: this nginx has no http_v2 module"; exit 77; }

# A CA, and a server certificate for 127.0.0.1 signed by it.
t=$dir/tls
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=deltafin test CA" \
  -keyout "$t/ca.key" -out "$t/ca.pem" 2>/dev/null || { echo "FAIL openssl CA"; exit 1; }
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$t/server.key" -out "$t/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$t/ext"
openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 2 \
  -extfile "$t/ext" -out "$t/server.pem" 2>/dev/null || { echo "FAIL openssl server certificate"; exit 1; }

"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/tiny.gguf" >/dev/null 2>&1 || exit 1
start_nginx "$dir/ng" "$dir/www" \
  "log_format conns '\$connection \$server_protocol \$status \$http_range';" "
    access_log $dir/ng/conns.log conns;
    ssl_certificate $t/server.pem;
    ssl_certificate_key $t/server.key;" "ssl http2"
url=https://127.0.0.1:$NGINX_PORT/tiny.gguf
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
ev() { "$bin" eval --ids $ids --top 20 --all-positions -b 6 "$@"; }
ev -m "$dir/www/tiny.gguf" >"$dir/ref" 2>/dev/null || { echo "FAIL local eval"; exit 1; }

# 1. The system's CAs do not know this server: a clear error, at once.
start=$(date +%s)
CURL_CA_BUNDLE= SSL_CERT_FILE= ev -m "$url" --cache-dir "$dir/c0" >/dev/null 2>"$dir/untrusted.err"; rc=$?
check "untrusted certificate: fails" test $rc != 0
check "untrusted certificate: the error names the URL and the certificate, suggests --ca-cert" \
  bash -c "grep -q '$url' '$dir/untrusted.err' && grep -qi 'certificate' '$dir/untrusted.err' && grep -q -- '--ca-cert' '$dir/untrusted.err'"
check "untrusted certificate: not retried ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -lt 5

# 2. --ca-cert: cold, a RAM cache of about two experts so that many ranges are in flight.
mem=$("$bin" eval -m "$dir/www/tiny.gguf" --ids 1 --mem 1K --profile none 2>&1 | grep -o 'give --mem of at least [0-9.]*' | grep -o '[0-9.]*')
mem=$(python3 -c "print(f'{$mem + 1.6:.2f}M')")
: >"$dir/ng/conns.log"
ev -m "$url" --ca-cert "$t/ca.pem" --cache-dir "$dir/c1" --mem "$mem" --stats >"$dir/h2" 2>"$dir/h2.err"
check "https + HTTP/2 eval (--ca-cert) = local eval" cmp -s "$dir/ref" "$dir/h2"
check "--stats: the network line says every request used HTTP/2" grep -Eq "^network: [1-9][0-9]* requests \(HTTP/2\)" "$dir/h2.err"
n=$(grep -c . "$dir/ng/conns.log"); n2=$(grep -c ' HTTP/2.0 206 ' "$dir/ng/conns.log")
check "nginx: all $n requests were HTTP/2 range requests ($n2)" test "$n" -gt 4 -a "$n" = "$n2"
conns=$(awk '{print $1}' "$dir/ng/conns.log" | sort -u | wc -l)
check "one process: $n requests multiplexed over $conns connection(s)" test "$conns" -le 2

# 3. CURL_CA_BUNDLE instead of the option; greedy text through a fresh cache.
a=$("$bin" run -m "$dir/www/tiny.gguf" -p "hello world" -n 16 --temp 0 2>/dev/null)
b=$(CURL_CA_BUNDLE=$t/ca.pem "$bin" run -m "$url" --cache-dir "$dir/c2" -p "hello world" -n 16 --temp 0 2>"$dir/env.err")
check "CURL_CA_BUNDLE: remote run over HTTP/2 generates the local text" test -n "$a" -a "$a" = "$b"
CURL_CA_BUNDLE=$dir/nope.pem "$bin" run -m "$url" --cache-dir "$dir/c2" -p hi -n 1 >/dev/null 2>"$dir/nope.err"
check "a CA file that cannot be read: clear error naming it" grep -q "cannot read the CA certificates '$dir/nope.pem'" "$dir/nope.err"
CURL_CA_BUNDLE=$dir/nope.pem "$bin" run -m "$dir/www/tiny.gguf" -p "hello world" -n 16 --temp 0 >"$dir/local-nope" 2>/dev/null
check "... but a local model does not care" test "$a" = "$(cat "$dir/local-nope")"
check "cache verify: clean" "$bin" cache verify --cache-dir "$dir/c1"
exit $fail
