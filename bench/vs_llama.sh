#!/usr/bin/env bash
# Decode and prefill tokens/s of deltafin against llama.cpp (node-llama-cpp, its
# prebuilt CPU library) on the same synthetic GGUFs, fully in RAM, same threads.
# Runs alternate (deltafin, llama.cpp, deltafin, ...) so that a noisy shared machine
# slows both alike; each engine reports the best of its runs, llama-bench style.
#
# usage: bench/vs_llama.sh [-t THREADS] [-p N] [-n N] [-r ROUNDS] [--models DIR] [--avx2] [CASE...]
#   CASE: preset:type, e.g. qwen3-moe-mini:Q8_0 (default: qwen3-moe-mini and
#   kimi-k2-mini at Q4_K and Q8_0; a type named *_DYN is a whole-model dynamic-quant
#   mix, synth --mix). Models are written once under --models
#   (default build/bench-models). Prints a table and writes JSON lines to stdout with
#   --json. --avx2: both engines on AVX2 alone, as on a CPU without AVX-512 (deltafin
#   with DELTAFIN_ISA=avx2; llama.cpp from a hard-linked copy of the oracle whose only CPU
#   library is its haswell one, AVX2 + FMA + F16C, in build/oracle-avx2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DELTAFIN:-$here/build/deltafin}
threads=2 np=64 ng=32 rounds=3 mdir=$here/build/bench-models json=0 avx2=0
cases=()
while [ $# -gt 0 ]; do
  case $1 in
    -t) threads=$2; shift 2 ;;
    -p) np=$2; shift 2 ;;
    -n) ng=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    --models) mdir=$2; shift 2 ;;
    --json) json=1; shift ;;
    --avx2) avx2=1; shift ;;
    *) cases+=("$1"); shift ;;
  esac
done
[ ${#cases[@]} -gt 0 ] || cases=(qwen3-moe-mini:Q4_K qwen3-moe-mini:Q8_0 kimi-k2-mini:Q4_K kimi-k2-mini:Q8_0)
mkdir -p "$mdir"
if [ "$avx2" = 1 ]; then
  src=${DELTAFIN_ORACLE_DIR:-$here/build/oracle} dst=$here/build/oracle-avx2
  bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  [ -f "$src/$bins/libggml-cpu-haswell.so" ] || { echo "vs_llama: no haswell library in $src/$bins" >&2; exit 77; }
  rm -rf "$dst" && cp -al "$src" "$dst"
  find "$dst/$bins" -name 'libggml-cpu-*.so' ! -name libggml-cpu-haswell.so -delete
  export DELTAFIN_ORACLE_DIR=$dst DELTAFIN_ISA=avx2
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT

for c in "${cases[@]}"; do
  preset=${c%%:*} type=${c##*:}
  m=$mdir/$preset-$type.gguf
  extra=()
  # kimi-k2-mini is written in the joined attn_kv_b MLA form: on CPUs with AMX the
  # prebuilt llama.cpp cannot run 3-D quantized attn_k_b/attn_v_b (see
  # tests/oracle/arch_matrix.sh); deltafin runs both forms alike.
  [ "$preset" = kimi-k2-mini ] && extra=(--mla joined)
  # A dynamic-quant mix (IQ1_S_DYN ...) is written with synth --mix.
  type_args=(--type "$type"); case $type in *_DYN) type_args=(--mix "$type") ;; esac
  [ -f "$m" ] || "$bin" synth --preset "$preset" "${type_args[@]}" "${extra[@]}" -o "$m" >&2
  for ((r = 0; r < rounds; r++)); do
    "$bin" bench -m "$m" -p "$np" -n "$ng" -r 1 -t "$threads" --json 2>/dev/null |
      python3 -c "import json,sys
for l in sys.stdin:
  o=json.loads(l); print(json.dumps({'case':'$c','engine':'deltafin','test':o['test'],'n':o['n'],'tps':o['tokens_per_second']}))" >>"$results"
    node "$here/bench/llama_bench.mjs" --model "$m" -p "$np" -n "$ng" -r 1 -t "$threads" 2>/dev/null |
      python3 -c "import json,sys
for l in sys.stdin:
  o=json.loads(l); print(json.dumps({'case':'$c','engine':'llama.cpp','test':o['test'],'n':o['n'],'tps':o['tokens_per_second']}))" >>"$results"
  done
done

python3 - "$results" "$json" "$threads" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in rows:
    k = (r["case"], r["test"], r["engine"])
    best[k] = max(best.get(k, 0.0), r["tps"])
cases = list(dict.fromkeys(r["case"] for r in rows))
if sys.argv[2] == "1":
    for c in cases:
        for t in ("pp", "tg"):
            d, l = best.get((c, t, "deltafin")), best.get((c, t, "llama.cpp"))
            print(json.dumps({"case": c, "test": t, "deltafin_tps": d, "llama_tps": l, "ratio": d / l if d and l else None}))
    sys.exit(0)
print(f"threads {sys.argv[3]}; best of the alternating runs, tokens/s")
print(f"{'model':<22} {'test':<5} {'deltafin':>9} {'llama.cpp':>10} {'ratio':>6}")
for c in cases:
    for t in ("pp", "tg"):
        d, l = best.get((c, t, "deltafin")), best.get((c, t, "llama.cpp"))
        if d is None or l is None:
            continue
        print(f"{c:<22} {t:<5} {d:9.2f} {l:10.2f} {d / l:6.2f}x")
PY
