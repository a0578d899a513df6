#!/usr/bin/env bash
# Checks `deltafin plan`'s decode prediction against measured runs: for each memory
# budget, `plan --mem X --json` (the disk measured once, then given with --disk-read so
# that every row uses the same rate, and the CPU's likewise with --compute) next to `bench -p 0 -n N --mem X --json`, and a
# table of predicted vs measured tokens/s and hit rates (target: within +-25%).
#
# usage: bench/plan_check.sh [--bin build/deltafin] [--model M.gguf] [--mem "1G 1500M 2G"] [-n 16] [-r 3]
#   Without --model, synthesizes kimi-k2-mini Q8_0 with 256 experts per MoE layer
#   (2.9 GiB) into build/plan-check/.
set -eu
bin=build/deltafin model="" mems="900M 1400M 2000M" n=16 reps=3
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --mem) mems=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
out=build/plan-check; mkdir -p "$out"
export XDG_CACHE_HOME=$out/xdg  # no profile but the one recorded below
if [ -z "$model" ]; then
  model=$out/k2m-256.gguf
  [ -f "$model" ] || "$bin" synth --preset kimi-k2-mini --type Q8_0 --experts 256 -o "$model" >&2
fi
# The routing of this model's random tokens is far from uniform: record a usage
# profile once (one bench run of 96 tokens at the smallest budget), and let plan read it.
profile=$out/usage.profile
[ -f "$profile" ] || "$bin" bench -m "$model" -p 0 -n 32 -r 2 --mem "${mems%% *}" --profile "$profile" --seed 99 >/dev/null 2>&1
# The disk and the CPU measured once (plan's probes), then given to every row.
"$bin" plan -m "$model" --mem "${mems%% *}" --json >"$out/probe.json"
disk=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["disk_read_bytes_per_second"] / 1e9)' "$out/probe.json")
cpu=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["compute_weight_bytes_per_second"]["experts"] / 1e9)' "$out/probe.json")
echo "disk (measured by plan): $disk GB/s; CPU: $cpu GB/s of expert weights; bench -p 0 -n $n -r $reps (the profile warms its cache), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| --mem | experts cached | hit % predicted / measured | MB read per token predicted / measured | predicted t/s (reads+compute) | best case t/s | measured t/s | measured / predicted |"
echo "|---|---|---|---|---|---|---|---|"
for mem in $mems; do
  "$bin" plan -m "$model" --mem "$mem" --disk-read "$disk" --compute "$cpu" --profile "$profile" --json >"$out/plan-$mem.json"
  "$bin" bench -m "$model" -p 0 -n "$n" -r "$reps" --mem "$mem" --profile "$profile" --json >"$out/bench-$mem.json" 2>"$out/bench-$mem.err"
  python3 - "$mem" "$out/plan-$mem.json" "$out/bench-$mem.json" <<'PY'
import json, sys
mem, p, b = sys.argv[1], json.load(open(sys.argv[2])), json.loads(open(sys.argv[3]).read().splitlines()[-1])
pred, best, meas = p["decode_tokens_per_second"], 1 / p["decode_seconds_per_token_overlapped"], b["tokens_per_second"]
print(f"| {mem} | {p['experts_cached']} / {p['experts_total']} | {p['hit_rate']*100:.1f} / {b['hit_rate']*100:.1f} | "
      f"{p['read_bytes_per_token']/1e6:.1f} / {b['bytes_per_token']/1e6:.1f} | {pred:.2f} | {best:.2f} | {meas:.2f} | "
      f"{meas/pred:.2f} |")
PY
done
