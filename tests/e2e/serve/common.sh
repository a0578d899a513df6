# Shared by the serve_*.sh tests: a tiny qwen3moe (or $SERVE_ARCH) model with the Qwen2 vocabulary,
# a server on a free loopback port, and check().
# Set before sourcing: bin, src, build, name (a directory name for this test).
shared=${DELTAFIN_SHARED_DIR:-$src/../shared}
dir=$build/e2e-$name; mkdir -p "$dir"
fail=0
vocab=$shared/vocab/ggml-vocab-qwen2.gguf
tmpl=$shared/templates/Qwen-Qwen3-0.6B.jinja
[ -f "$vocab" ] && [ -f "$tmpl" ] || { echo "skip: $vocab or $tmpl missing"; exit 77; }
# SERVE_ARCH: the tiny model's architecture (default qwen3moe).
arch=${SERVE_ARCH:-qwen3moe}
[ "$arch" = qwen3moe ] || dir=$build/e2e-$name-$arch
mkdir -p "$dir"
model=$build/e2e-serve-model/tiny-$arch-qwen2.gguf
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$bin" synth --preset tiny --arch "$arch" --type Q8_0 --experts 16 --vocab "$vocab" --force -o "$model.tmp" >/dev/null &&
    mv "$model.tmp" "$model" || { echo "FAIL synth"; exit 1; }
fi

source "$src/tests/e2e/serve/server.sh"
