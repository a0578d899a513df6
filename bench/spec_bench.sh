#!/usr/bin/env bash
# Speculative decoding under a memory budget (experts streaming), for docs/BENCHMARKS.md.
# usage: bench/spec_bench.sh BUILD_DIR MODEL_DIR   (run from the repository root)
# Makes two 2.6 GB qwen3-moe-mini models (192 experts: uniform routing, and Zipf(1)
# expert popularity) and runs, with --mem 650M (a quarter of the model):
#  1. bench_spec: teacher-forced n-gram speculation on bench/spec_texts/*.txt against
#     plain decoding of the same text (see bench/bench_spec.cpp for what that means);
#  2. deltafin run --stats, free-running greedy generation, --spec off/auto/ngram/self.
set -eu
build=${1:-build}; dir=${2:-/tmp/deltafin-spec-models}
mkdir -p "$dir"
n="nice -n 10"
for m in uniform skew1; do
  f=$dir/qwen3-moe-mini-e192-$m.gguf
  skew=0; [ $m = skew1 ] && skew=1.0
  [ -f "$f" ] || $n "$build/deltafin" synth --preset qwen3-moe-mini --experts 192 --skew $skew -o "$f" -t 2
done
for m in uniform skew1; do
  f=$dir/qwen3-moe-mini-e192-$m.gguf
  for t in quote code list ordinary; do
    echo "## $m $t"
    $n "$build/bench/bench_spec" "$f" bench/spec_texts/$t.txt --mem 650M --threads 2
  done
done
f=$dir/qwen3-moe-mini-e192-skew1.gguf
for p in "$(sed -n '1,/<<<EMIT>>>/p' bench/spec_texts/quote.txt | grep -v '<<<EMIT>>>')" \
         "Write a short paragraph about autumn in a mountain village."; do
  for s in off auto ngram self; do
    echo "## run skew1 --spec $s: ${p:0:40}..."
    $n "$build/deltafin" run -m "$f" -p "$p" -n 128 --temp 0 --mem 650M --profile none -t 2 --spec $s --stats \
      2>&1 >/tmp/spec-run-$s.out | grep -E "^decode|^speculation|^  |^decode read"
    md5sum </tmp/spec-run-$s.out
  done
done
