#!/usr/bin/env bash
# Expert streaming from the command line: eval and run under a --mem that leaves
# room for only a couple of experts print exactly what the fully resident run
# prints, on every architecture synth can make (others are skipped); --stats shows
# the cache at work; bench prints its table and JSON lines, and --parallel batches
# sequences so that they share expert lookups. One more qwen3moe file is written in
# a dynamic-quant mix (IQ1_S/IQ2_XXS experts, Q4_K core: synth --mix IQ1_S_DYN), and
# one with Q4_0 experts whose hot ones the cache converts to row panels.
# usage: stream_identical.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; build=$3
dir=$build/e2e-stream; mkdir -p "$dir"
fail=0; tested=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
declare -A MEMS  # each file's --mem
for arch in $("$bin" synth --list-archs) qwen3moe+IQ1_S_DYN; do
  mix=(); [ "${arch%+*}" != "$arch" ] && mix=(--mix "${arch#*+}")
  m=$dir/tiny-$arch.gguf
  if ! "$bin" synth --preset tiny --arch "${arch%+*}" "${mix[@]}" --experts 8 --force -o "$m" >/dev/null \
      2>"$dir/synth-$arch.err"; then
    [ ${#mix[@]} -gt 0 ] && { echo "FAIL $arch: synth: $(head -c 200 "$dir/synth-$arch.err")"; fail=1; continue; }
    echo "skip $arch: synth: $(head -c 200 "$dir/synth-$arch.err")"; continue
  fi
  if ! "$bin" eval -m "$m" --ids $ids --top 20 --all-positions -b 6 >"$dir/ref-$arch" 2>"$dir/ref-$arch.err"; then
    echo "skip $arch: cannot load: $(head -c 200 "$dir/ref-$arch.err")"; continue
  fi
  # The smallest budget that works, from the error a too-small one gets; then room
  # for about two experts.
  "$bin" eval -m "$m" --ids 1 --mem 1K --profile none >/dev/null 2>"$dir/small-$arch.err"
  least=$(grep -o 'give --mem of at least [0-9.]* MiB' "$dir/small-$arch.err" | grep -o '[0-9.]*')
  slot=$(grep -o 'one expert takes [0-9.]* MiB' "$dir/small-$arch.err" | grep -o '[0-9.]*')
  if [ -z "$least" ]; then
    grep -q "experts" "$dir/small-$arch.err" || { echo "skip $arch: no routed experts"; continue; }
    echo "FAIL $arch: no minimum budget in: $(cat "$dir/small-$arch.err")"; fail=1; continue
  fi
  mem=$(python3 -c "print(f'{$least + 1.2 * $slot:.3f}M')")
  MEMS[$arch]=$mem
  tested=$((tested + 1))
  for pol in lfu lru; do
    "$bin" eval -m "$m" --ids $ids --top 20 --all-positions -b 6 --mem "$mem" --cache-policy $pol \
      --profile none --stats >"$dir/str-$arch-$pol" 2>"$dir/str-$arch-$pol.err"
    check "$arch $pol: eval under --mem $mem matches the resident run" cmp -s "$dir/ref-$arch" "$dir/str-$arch-$pol"
    check "$arch $pol: the cache evicted" grep -Eq "evictions [1-9]" "$dir/str-$arch-$pol.err"
  done
  # Next-layer prefetch reads ahead and changes nothing in the output.
  "$bin" eval -m "$m" --ids $ids --top 20 --all-positions -b 6 --mem "$mem" --prefetch on \
    --profile none --stats >"$dir/pf-$arch" 2>"$dir/pf-$arch.err"
  check "$arch: eval with --prefetch on matches the resident run" cmp -s "$dir/ref-$arch" "$dir/pf-$arch"
  check "$arch: --stats shows the prefetch per layer" grep -Eq "^ +all +predictions +[1-9].*prefetched +[1-9]" "$dir/pf-$arch.err"
  a=$("$bin" run -m "$m" -p "hello world" -n 12 --temp 0 2>/dev/null)
  b=$("$bin" run -m "$m" -p "hello world" -n 12 --temp 0 --mem "$mem" --profile none 2>/dev/null)
  "$bin" run -m "$m" -p "hello world, hello again world" -n 2 --temp 0 --mem "$mem" --profile none -b 2 --stats \
    >/dev/null 2>"$dir/pb-$arch.err"
  check "$arch: --stats names the prefill's expert reads per -b batch" \
    grep -Eq "^prefill read [0-9.]+ MiB of experts in [1-9][0-9]* batches of up to 2 tokens" "$dir/pb-$arch.err"
  check "$arch: run under --mem generates the same text" test "$a" = "$b"
done
check "at least one architecture streamed" test $tested -ge 1

# Experts in a type with row panels (Q4_0), a cache of about half of them: the popular
# ones stay, prove hot and are converted to panels in their slots (store/ram_cache.h),
# and the output stays that of the resident run, where every expert is in panels.
m=$dir/tiny-q4.gguf
"$bin" synth --preset tiny --arch qwen3moe --expert-type Q4_0 --experts 8 --force -o "$m" >/dev/null 2>&1
"$bin" eval -m "$m" --ids 1 --mem 1K --profile none >/dev/null 2>"$dir/small-q4.err"
least=$(grep -o 'give --mem of at least [0-9.]* MiB' "$dir/small-q4.err" | grep -o '[0-9.]*')
slot=$(grep -o 'one expert takes [0-9.]* MiB' "$dir/small-q4.err" | grep -o '[0-9.]*')
mem=$(python3 -c "print(f'{${least:-0} + 8 * ${slot:-0}:.3f}M')")
ids_long=$ids,$ids,$ids,$ids
"$bin" eval -m "$m" --ids $ids_long --top 20 --all-positions -b 1 >"$dir/ref-q4-long" 2>/dev/null
"$bin" eval -m "$m" --ids $ids_long --top 20 --all-positions -b 1 --mem "$mem" --profile none --stats \
  >"$dir/str-q4" 2>"$dir/str-q4.err"
check "Q4_0 experts under --mem $mem: eval matches the resident run" cmp -s "$dir/ref-q4-long" "$dir/str-q4"
if "$bin" --version 2>&1 | grep -Eq "CPU kernels: (avx2|avx512|neon)"; then
  check "Q4_0 experts: hot experts were converted to panels in the cache" \
    grep -Eq "[1-9][0-9]* hot experts converted" "$dir/str-q4.err"
fi
check "Q4_0 experts: the cache evicted" grep -Eq "evictions [1-9]" "$dir/str-q4.err"

# The usage profile is written and read back.
m=$dir/tiny-qwen3moe.gguf
if [ -f "$m" ]; then
  mem=${MEMS[qwen3moe]}
  rm -f "$dir/p.profile"
  "$bin" eval -m "$m" --ids $ids --mem "$mem" --profile "$dir/p.profile" >/dev/null 2>&1
  check "the usage profile is written" test -s "$dir/p.profile"
  "$bin" eval -m "$m" --ids $ids --mem "$mem" --profile "$dir/p.profile" --stats >/dev/null 2>"$dir/p.err"
  check "a profile warms the next run's cache" grep -Eq "[1-9][0-9]* prefetch" "$dir/p.err"

  "$bin" bench -m "$m" -p 8 -n 4 -r 2 --mem "$mem" >"$dir/bench" 2>&1
  check "bench prints a table row per test" test "$(grep -c '^| *\(pp8\|tg4\) ' "$dir/bench")" = 2
  "$bin" bench -m "$m" -p 8 -n 4 -r 2 --mem "$mem" --json >"$dir/bench.json" 2>/dev/null
  check "bench --json: one object per test with the store's figures" python3 -c "
import json,sys
rows=[json.loads(l) for l in open('$dir/bench.json')]
assert [(r['test'],r['n']) for r in rows]==[('pp',8),('tg',4)], rows
for r in rows:
  for k in ('tokens_per_second','bytes_read','hit_rate','read_gbps','io_wait_fraction','bytes_per_token'): assert k in r, k
  assert r['streaming'] and r['bytes_read']>0 and 0<=r['hit_rate']<=1
  p=r['prefetch']; assert p['mode']=='auto' and 0<=p['recall']<=1 and p['layers'], p
"
  "$bin" bench -m "$m" -p 0 -n 6 -r 1 --parallel 1,4 --mem "$mem" --json >"$dir/bench-par.json" 2>/dev/null
  check "bench --parallel: 4 sequences in one pass look up fewer experts per token than 1" python3 -c "
import json
rows=[json.loads(l) for l in open('$dir/bench-par.json')]
assert [(r['test'],r['parallel']) for r in rows]==[('tg',1),('tg',4)], rows
one,four=rows
assert one['expert_lookups_per_token']>0 and four['expert_lookups_per_token']<one['expert_lookups_per_token'], rows
assert four['tokens_per_second']>0 and four['x_vs_one_sequence']>0 and 'x_vs_one_sequence' not in one
"
fi
exit $fail
