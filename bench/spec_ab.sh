#!/usr/bin/env bash
# Free-running greedy generation with and without speculation, side by side:
# `deltafin run --spec off` and `--spec MODE` alternate REPS times on one prompt
# (a fresh process each, so each starts with a cold expert cache); prints every
# run's decode tok/s, the best and the median of each side and their ratio, and
# checks that every run printed the same text (greedy output must be identical).
# With 4+ reps it also prints the median and quartiles of the per-pair ratios, of
# decode tok/s and, steadier on a shared machine, of decode CPU seconds (user + sys,
# all threads) per token and expert bytes read per token (MODE / off: below 1 is
# cheaper).
#
# usage: bench/spec_ab.sh DELTAFIN MODEL PROMPT N_TOKENS REPS [MODE] -- [deltafin run options...]
#   e.g. bench/spec_ab.sh build/deltafin assets/models/kjv-moe-Q8_0.gguf "In the beginning" 200 5 auto \
#          -- --mem 70M -t 2
set -u
bin=$1; model=$2; prompt=$3; n=$4; reps=$5; mode=${6:-auto}
shift 6 2>/dev/null || shift $#
[ "${1:-}" = "--" ] && shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Side 0 is always --spec off, side 1 --spec MODE; MODE=off runs off against itself
# (an A/A test: its spread is the machine's noise). Odd pairs run side 1 first: the
# second run of a pair is often slower (an A/A test on the synthetic model gave 0.93x
# with a fixed order), so a fixed order would bias every ratio.
declare -A rates cpus bytes
for ((r = 0; r < reps; ++r)); do
  sides="0 1"; ((r % 2)) && sides="1 0"
  for side in $sides; do
    s=off; ((side)) && s=$mode
    "$bin" run -m "$model" -p "$prompt" -n "$n" --temp 0 --profile none --spec "$s" --stats "$@" \
      >"$tmp/out.$side.$r" 2>"$tmp/err.$side.$r" || { echo "run failed:"; cat "$tmp/err.$side.$r"; exit 1; }
    rate=$(sed -n 's/^decode: .*(\([0-9.]*\) tok\/s).*/\1/p' "$tmp/err.$side.$r")
    cpu=$(sed -n 's/^decode cpu: .*(\([0-9.]*\) ms per token).*/\1/p' "$tmp/err.$side.$r")
    mb=$(sed -n 's/^decode read .*: \([0-9.]*\) MiB per emitted token.*/\1/p' "$tmp/err.$side.$r")
    extra=$(grep -E '^speculation' "$tmp/err.$side.$r" | sed 's/^speculation: //')
    printf '%-5s %8s tok/s %7s cpu-ms/tok %6s MB/tok  %s\n' "$s" "$rate" "${cpu:-?}" "${mb:-?}" "$extra"
    rates[$side]+="$rate "; cpus[$side]+="${cpu:-0} "; bytes[$side]+="${mb:-0} "
  done
done
same=yes
for f in "$tmp"/out.*; do cmp -s "$f" "$tmp/out.0.0" || same=no; done
python3 - "$mode" "${rates[0]}" "${rates[1]}" "$same" "${cpus[0]}" "${cpus[1]}" \
  "${bytes[0]}" "${bytes[1]}" <<'PY'
import statistics, sys
f = lambda s: [float(x) for x in s.split()]
mode, off, on, same = sys.argv[1], f(sys.argv[2]), f(sys.argv[3]), sys.argv[4]
cpu_off, cpu_on, mb_off, mb_on = map(f, sys.argv[5:9])
print(f"best: off {max(off):.1f}, {mode} {max(on):.1f} tok/s: {max(on)/max(off):.2f}x; "
      f"median: off {statistics.median(off):.1f}, {mode} {statistics.median(on):.1f}: "
      f"{statistics.median(on)/statistics.median(off):.2f}x; identical text in every run: {same}")
# Each pair ran back to back, so its ratio cancels most of the machine's slow drift.
def pairwise(what, a_side, b_side):
    pairs = sorted(b / a for a, b in zip(a_side, b_side) if a > 0)
    if len(pairs) >= 4:
        q1, q2, q3 = statistics.quantiles(pairs, n=4)
        print(f"pairwise {what} {mode}/off over {len(pairs)} pairs: median {q2:.3f}x, quartiles {q1:.3f}x-{q3:.3f}x, "
              f"range {pairs[0]:.3f}x-{pairs[-1]:.3f}x")
pairwise("tok/s", off, on)
pairwise("cpu-s/token", cpu_off, cpu_on)
pairwise("bytes/token", mb_off, mb_on)
if cpu_off and min(cpu_off) > 0:
    print(f"cpu ms/token median: off {statistics.median(cpu_off):.3f}, {mode} {statistics.median(cpu_on):.3f}: "
          f"{statistics.median(cpu_on)/statistics.median(cpu_off):.3f}x; MB/token median: off "
          f"{statistics.median(mb_off):.3f}, {mode} {statistics.median(mb_on):.3f}")
PY
