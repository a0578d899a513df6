#!/usr/bin/env bash
# The committed trained model (assets/models/kjv-moe-*.gguf, docs/TRAINED_MODEL.md)
# against llama.cpp: for each file and a few prompts, llama.cpp tokenizes the prompt
# as deltafin does, and `deltafin run --temp 0` prints the same greedy text that
# llama.cpp generates (argmax, until end-of-text or N_GEN tokens). Also: perplexity
# on the held-out chapters is finite and the Q4_K file is within 10% of Q8_0.
#
# usage: trained_model.sh DELTAFIN SOURCE_DIR BUILD_DIR
# Skips (77) without the model files or without the oracle (node-llama-cpp, found
# in $DELTAFIN_ORACLE_DIR, else BUILD_DIR/oracle, else SOURCE_DIR/build/oracle).
set -u
bin=$1; src=$2; build=$3
dir=$build/trained_model; mkdir -p "$dir"
N_GEN=${N_GEN:-48}
models=()
for t in Q8_0 Q4_K; do
  f=$src/assets/models/kjv-moe-$t.gguf
  [ -f "$f" ] && models+=("$f")
done
[ ${#models[@]} -gt 0 ] || { echo "SKIP: no assets/models/kjv-moe-*.gguf"; exit 77; }
oracle=""
for d in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$d" ] && [ -d "$d/node_modules/node-llama-cpp" ]; then oracle=$d; break; fi
done
if [ -z "$oracle" ] || ! command -v node >/dev/null || ! command -v python3 >/dev/null; then
  echo "SKIP: needs node-llama-cpp (scripts/install-oracle $build/oracle), node and python3"
  exit 77
fi
oref() { node "$src/tests/oracle/llama_ref.mjs" --oracle-dir "$oracle" --threads 1 --kv f32 "$@" 2>>"$dir/log"; }
ids_of() { python3 -c "import json,sys; print(','.join(map(str, json.load(sys.stdin)['ids'])))"; }

prompts=("In the beginning" "And the LORD spake unto Moses, saying," "Blessed are the" "The LORD is my shepherd;")
fail=0
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  for p in "${prompts[@]}"; do
    ours_ids=$("$bin" tokenize -m "$m" -p "$p" 2>>"$dir/log" | tr ' ' ',')
    ref_ids=$(oref --model "$m" --tokenize "$p" | ids_of)
    if [ -z "$ref_ids" ] || [ "$ours_ids" != "$ref_ids" ]; then
      echo "FAIL $name tokenize '$p': deltafin [$ours_ids] llama.cpp [$ref_ids]"; fail=1; continue
    fi
    gen=$(oref --model "$m" --ids "$ref_ids" --greedy "$N_GEN" --stop-eog --ctx 256 | ids_of)
    ref_text=$(python3 "$src/tools/train/detok.py" "$m" "$gen")
    ours_text=$("$bin" run -m "$m" -p "$p" -n "$N_GEN" --temp 0 -c 256 -t 1 2>>"$dir/log")
    if [ -n "$ref_text" ] && [ "$ours_text" = "$ref_text" ]; then
      echo "ok   $name '$p' -> $(printf %s "$ref_text" | head -c 70 | tr '\n' ' ')..."
    else
      echo "FAIL $name '$p'"; echo "  llama.cpp: $ref_text"; echo "  deltafin:  $ours_text"; fail=1
    fi
  done
done

# Perplexity on the held-out chapters (assets/models/kjv-heldout.txt).
declare -A ppl
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  "$bin" perplexity -m "$m" -f "$src/assets/models/kjv-heldout.txt" -c 256 -t 2 >"$dir/$name.ppl" 2>&1
  ppl[$name]=$(grep -oE 'PPL = [0-9.]+' "$dir/$name.ppl" | tail -1 | cut -d' ' -f3)
  echo "     $name perplexity ${ppl[$name]:-?}"
  [ -n "${ppl[$name]}" ] || { echo "FAIL $name perplexity: $(tail -2 "$dir/$name.ppl")"; fail=1; }
done
if [ -n "${ppl[kjv-moe-Q8_0]:-}" ] && [ -n "${ppl[kjv-moe-Q4_K]:-}" ]; then
  if python3 -c "import sys; sys.exit(0 if ${ppl[kjv-moe-Q4_K]} <= 1.1 * ${ppl[kjv-moe-Q8_0]} else 1)"; then
    echo "ok   Q4_K perplexity within 10% of Q8_0"
  else
    echo "FAIL Q4_K perplexity ${ppl[kjv-moe-Q4_K]} vs Q8_0 ${ppl[kjv-moe-Q8_0]}"; fail=1
  fi
fi
exit $fail
