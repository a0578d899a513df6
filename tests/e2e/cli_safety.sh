#!/usr/bin/env bash
# Defaults that could cost a user data or an afternoon fail safe, saying why:
#   - `serve` on a port another server listens on exits at once (non-zero, the port
#     named) and the first server keeps answering;
#   - `cache clear` without a model removes nothing and asks for a model or --all;
#     with one it removes that model only; --all removes every one, listing sizes;
#   - `synth -o` and `quantize` create missing directories and refuse to overwrite a
#     file without --force (which then overwrites it).
# usage: cli_safety.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); src=$(cd "$2" && pwd); build=$(cd "$3" && pwd)
dir=$build/e2e-cli-safety; rm -rf "$dir"; mkdir -p "$dir/www"
source "$src/tests/remote/nginx.sh"
pids=()
trap 'stop_nginx "$dir/ng" 2>/dev/null; for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done' EXIT
fail=0
source "$src/tests/e2e/serve/server.sh"   # check, start_server
model=$src/assets/models/kjv-moe-Q8_0.gguf

# --- serve on a busy port ---
start_server -c 256 --parallel 1
a=$pid; pids+=($a)
timeout 60 "$bin" serve -m "$model" --port "$port" -c 256 --parallel 1 >"$dir/b.out" 2>"$dir/b.err"; rc=$?
check "serve on a busy port exits non-zero at once (rc $rc)" sh -c "test $rc -ne 0 && test $rc -ne 124"
check "  naming the address and port, and --port" sh -c \
  "grep -q '127.0.0.1:$port' '$dir/b.err' && grep -q 'in use' '$dir/b.err' && grep -q -- '--port' '$dir/b.err'"
check "  without claiming to listen" sh -c "! grep -q 'listening' '$dir/b.out'"
for i in 1 2 3 4; do  # were the port shared, the kernel would hand some connections to a second server
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")
  [ "$code" = 200 ] || break
done
check "  the first server keeps answering" test "$code" = 200
kill -TERM $a; wait $a 2>/dev/null

# --- cache clear ---
"$bin" synth --preset tiny --arch qwen3moe --experts 8 -o "$dir/www/one.gguf" >/dev/null 2>&1 || exit 1
"$bin" synth --preset tiny --arch qwen3moe --experts 8 --seed 2 -o "$dir/www/two.gguf" >/dev/null 2>&1 || exit 1
start_nginx "$dir/ng" "$dir/www"
C=$dir/cache
for m in one two; do
  "$bin" pull "http://127.0.0.1:$NGINX_PORT/$m.gguf" --cache-dir "$C" --no-progress >/dev/null 2>&1 ||
    { echo "FAIL pull $m"; exit 1; }
done
n_models() { ls "$C/models" 2>/dev/null | wc -l; }
check "two models in the cache" test "$(n_models)" = 2
"$bin" cache clear --cache-dir "$C" >"$dir/c0.out" 2>"$dir/c0.err"; rc=$?
check "cache clear without a model: exit 2, nothing removed" sh -c "test $rc = 2 && test $(n_models) = 2"
check "  says to name the model or give --all, and what the cache holds" sh -c \
  "grep -q -- '--all' '$dir/c0.err' && grep -Eq 'holds [0-9.]+ (KiB|MiB|GiB) in 2 model' '$dir/c0.err'"
"$bin" cache clear "http://127.0.0.1:$NGINX_PORT/one.gguf" --all --cache-dir "$C" >/dev/null 2>&1; rc=$?
check "cache clear MODEL --all: refused" sh -c "test $rc = 2 && test $(n_models) = 2"
"$bin" cache clear "http://127.0.0.1:$NGINX_PORT/one.gguf" --cache-dir "$C" >"$dir/c1.out" 2>&1; rc=$?
check "cache clear MODEL removes that model only" sh -c "test $rc = 0 && test $(n_models) = 1"
check "  and says what it removed, with its size" grep -Eq "^removed http://.*/one.gguf \([0-9.]+ (KiB|MiB)" "$dir/c1.out"
"$bin" cache clear --all --cache-dir "$C" >"$dir/c2.out" 2>&1; rc=$?
check "cache clear --all removes the rest" sh -c "test $rc = 0 && test $(n_models) = 0"
check "  listing each model and the total" sh -c \
  "grep -q '^removed http://.*/two.gguf' '$dir/c2.out' && grep -Eq '^removed 1 model\(s\), [0-9.]+ (KiB|MiB)' '$dir/c2.out'"

# --- files that commands write ---
out=$dir/fresh/sub/tiny.gguf
"$bin" synth --preset tiny --arch qwen3moe -o "$out" >/dev/null 2>"$dir/s1.err"; rc=$?
check "synth -o into missing directories creates them" sh -c "test $rc = 0 && test -s '$out'"
cp "$out" "$dir/before.gguf"
"$bin" synth --preset tiny --arch qwen3moe --seed 9 -o "$out" >/dev/null 2>"$dir/s2.err"; rc=$?
check "synth -o over an existing file: refused, the file unchanged" sh -c \
  "test $rc -ne 0 && cmp -s '$out' '$dir/before.gguf'"
check "  the error names the file and --force" sh -c "grep -q 'tiny.gguf' '$dir/s2.err' && grep -q -- '--force' '$dir/s2.err'"
"$bin" synth --preset tiny --arch qwen3moe --seed 9 -o "$out" --force >/dev/null 2>&1; rc=$?
check "synth --force overwrites it" sh -c "test $rc = 0 && ! cmp -s '$out' '$dir/before.gguf'"
"$bin" synth --preset tiny --arch qwen3moe -o "$dir/fresh" >/dev/null 2>"$dir/s3.err"; rc=$?
check "synth -o DIRECTORY: refused, named" sh -c "test $rc -ne 0 && grep -q 'is a directory' '$dir/s3.err'"
"$bin" synth --preset tiny --arch qwen3moe --type F16 -o "$dir/f16.gguf" >/dev/null 2>&1
q=$dir/q/deeper/q8.gguf
"$bin" quantize "$dir/f16.gguf" "$q" --type Q8_0 >/dev/null 2>&1; rc=$?
check "quantize into missing directories creates them" sh -c "test $rc = 0 && test -s '$q'"
"$bin" quantize "$dir/f16.gguf" "$q" --type Q4_0 >/dev/null 2>"$dir/q2.err"; rc=$?
check "quantize over an existing file: refused without --force" sh -c "test $rc -ne 0 && grep -q -- '--force' '$dir/q2.err'"
"$bin" quantize "$dir/f16.gguf" "$q" --type Q4_0 --force >/dev/null 2>&1; rc=$?
check "quantize --force overwrites it" test $rc = 0
exit $fail
