#!/usr/bin/env bash
# serve_load.sh on every other architecture than its own qwen3moe (`synth --list-archs`):
# deepseek2 (MLA latent caches per sequence), kimi-k3 (KDA recurrent states and MLA
# caches per sequence), llama (GQA). Every
# streamed response must equal `deltafin run --temp 0` on its prompt alone.
# usage: serve_load_archs.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
rc=0
for a in $("$bin" synth --list-archs); do
  [ "$a" = qwen3moe ] && continue  # serve_load.sh runs it itself
  echo "## $a"
  SERVE_ARCH=$a bash "$src/tests/e2e/serve_load.sh" "$bin" "$src" "$build"
  r=$?
  [ $r -eq 77 ] && exit 77
  [ $r -eq 0 ] || rc=1
done
exit $rc
