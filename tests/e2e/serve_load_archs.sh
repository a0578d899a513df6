#!/usr/bin/env bash
# serve_load.sh on the other batched architectures: deepseek2 (MLA latent caches per
# sequence) and kimi-k3 (KDA recurrent states and MLA caches per sequence). Every
# streamed response must equal `deltafin run --temp 0` on its prompt alone.
# usage: serve_load_archs.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; src=$2; build=$3
rc=0
for a in deepseek2 kimi-k3; do
  echo "## $a"
  SERVE_ARCH=$a bash "$src/tests/e2e/serve_load.sh" "$bin" "$src" "$build"
  r=$?
  [ $r -eq 77 ] && exit 77
  [ $r -eq 0 ] || rc=1
done
exit $rc
