#!/usr/bin/env bash
# Free-running greedy generation with and without speculation, side by side:
# `deltafin run --spec off` and `--spec MODE` alternate REPS times on one prompt
# (a fresh process each, so each starts with a cold expert cache); prints every
# run's decode tok/s, the best and the median of each side and their ratio, and
# checks that every run printed the same text (greedy output must be identical).
# With 4+ reps it also prints the median and quartiles of the per-pair ratios.
#
# usage: bench/spec_ab.sh DELTAFIN MODEL PROMPT N_TOKENS REPS [MODE] -- [deltafin run options...]
#   e.g. bench/spec_ab.sh build/deltafin assets/models/kjv-moe-Q8_0.gguf "In the beginning" 200 5 auto \
#          -- --mem 70M -t 2
set -u
bin=$1; model=$2; prompt=$3; n=$4; reps=$5; mode=${6:-auto}
shift 6 2>/dev/null || shift $#
[ "${1:-}" = "--" ] && shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
declare -A rates
for ((r = 0; r < reps; ++r)); do
  for s in off "$mode"; do
    "$bin" run -m "$model" -p "$prompt" -n "$n" --temp 0 --profile none --spec "$s" --stats "$@" \
      >"$tmp/out.$s.$r" 2>"$tmp/err.$s.$r" || { echo "run failed:"; cat "$tmp/err.$s.$r"; exit 1; }
    rate=$(sed -n 's/^decode: .*(\([0-9.]*\) tok\/s).*/\1/p' "$tmp/err.$s.$r")
    extra=$(grep -E '^speculation' "$tmp/err.$s.$r" | sed 's/^speculation: //')
    printf '%-5s %8s tok/s  %s\n' "$s" "$rate" "$extra"
    rates[$s]+="$rate "
  done
done
md5=$(cat "$tmp"/out.* | md5sum)
same=yes
for f in "$tmp"/out.*; do cmp -s "$f" "$tmp/out.off.0" || same=no; done
python3 - "$mode" "${rates[off]}" "${rates[$mode]}" "$same" <<'PY'
import statistics, sys
mode, off, on, same = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()], sys.argv[4]
print(f"best: off {max(off):.1f}, {mode} {max(on):.1f} tok/s: {max(on)/max(off):.2f}x; "
      f"median: off {statistics.median(off):.1f}, {mode} {statistics.median(on):.1f}: "
      f"{statistics.median(on)/statistics.median(off):.2f}x; identical text in every run: {same}")
# Each pair ran back to back, so its ratio cancels most of the machine's slow drift.
pairs = sorted(b / a for a, b in zip(off, on))
if len(pairs) >= 4:
    q1, q2, q3 = statistics.quantiles(pairs, n=4)
    print(f"pairwise {mode}/off over {len(pairs)} pairs: median {q2:.2f}x, quartiles {q1:.2f}x-{q3:.2f}x, "
          f"range {pairs[0]:.2f}x-{pairs[-1]:.2f}x")
PY
