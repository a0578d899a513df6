#!/usr/bin/env bash
# Core layers stream when the core does not fit --mem (issue 4): below the budget
# a resident core needs, deltafin reads the core layers it cannot keep into a few
# layer buffers per layer instead of refusing; eval prints exactly what the
# resident run prints on every architecture, from a GGUF, a Hugging Face folder and
# a remote GGUF; a budget too small even for that is a clear error naming both
# minimums.
# usage: core_stream.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$(realpath "$1"); build=$(cd "$3" && pwd)
dir=$build/e2e-core-stream; rm -rf "$dir"; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
ids=1,17,33,250,9,9,120,77,5,64,3,200,41,42,43,8
for arch in $("$bin" synth --list-archs); do
  m=$dir/$arch.gguf
  "$bin" synth --preset tiny --arch $arch --type F32 --expert-type Q8_0 --layers 12 --expert-width 32 -o "$m" \
    >/dev/null 2>"$dir/synth-$arch.err" || { echo "FAIL $arch: synth: $(cat "$dir/synth-$arch.err")"; fail=1; continue; }
  "$bin" eval -m "$m" --ids $ids --top 20 --all-positions -b 5 >"$dir/ref-$arch" 2>"$dir/ref-$arch.err" ||
    { echo "FAIL $arch: resident eval: $(cat "$dir/ref-$arch.err")"; fail=1; continue; }
  "$bin" eval -m "$m" --ids 1 --mem 1K --profile none >/dev/null 2>"$dir/small-$arch.err"
  resident=$(grep -o 'give --mem of at least [0-9.]* MiB' "$dir/small-$arch.err" | grep -o '[0-9.]*')
  paged=$(grep -o 'or at least [0-9.]* MiB to stream the core' "$dir/small-$arch.err" | grep -o '[0-9.]*')
  check "$arch: a tiny budget names both minimums" test -n "$resident" -a -n "$paged"
  [ -n "$resident" ] && [ -n "$paged" ] || { cat "$dir/small-$arch.err"; continue; }
  check "$arch: streaming the core needs less than keeping it ($paged < $resident MiB)" \
    python3 -c "import sys; sys.exit(0 if $paged < $resident else 1)"
  # At the streaming minimum every layer streams; halfway, the first layers stay.
  for mem in $(python3 -c "print(f'{$paged + 0.05:.2f}M {($paged + $resident) / 2:.2f}M')"); do
    "$bin" eval -m "$m" --ids $ids --top 20 --all-positions -b 5 --mem "$mem" --profile none \
      >"$dir/out-$arch-$mem" 2>"$dir/out-$arch-$mem.err"
    check "$arch --mem $mem: eval succeeds" test $? = 0
    check "$arch --mem $mem: it says core layers stream" grep -q "stream from the file per layer" "$dir/out-$arch-$mem.err"
    check "$arch --mem $mem: logits equal the resident run's" cmp -s "$dir/ref-$arch" "$dir/out-$arch-$mem"
    grep -o "layers [0-9]*-[0-9]* of [0-9]*" "$dir/out-$arch-$mem.err" | sed "s/^/     $arch $mem: /"
  done
  below=$(python3 -c "print(f'{$paged - 0.3:.2f}M')")
  "$bin" eval -m "$m" --ids 1 --mem "$below" --profile none >/dev/null 2>"$dir/below-$arch.err"
  check "$arch --mem $below (under both minimums): a clear error" grep -q "is too small" "$dir/below-$arch.err"
done
# Generation through run, where the stats line reports the paging.
m=$dir/qwen3moe.gguf
"$bin" run -m "$m" -p "hello world" -n 12 --temp 0 --ignore-eos >"$dir/run-ref" 2>/dev/null
paged=$(grep -o 'or at least [0-9.]* MiB to stream the core' "$dir/small-qwen3moe.err" | grep -o '[0-9.]*')
"$bin" run -m "$m" -p "hello world" -n 12 --temp 0 --ignore-eos --mem "$(python3 -c "print(f'{$paged + 0.05:.2f}M')")" \
  --profile none --stats >"$dir/run-paged" 2>"$dir/run-paged.err"
check "run: text under the streaming minimum equals the resident run's" cmp -s "$dir/run-ref" "$dir/run-paged"
check "run --stats: layers were read" grep -Eq "[1-9][0-9]* layer reads" "$dir/run-paged.err"

# Sources that are not one plain GGUF file: a Hugging Face folder (read through its
# GGUF view, tensor by tensor) and a remote GGUF over HTTP (nginx on loopback; the
# core pages from the disk cache's core file). At the streaming minimum every
# layer streams, and the logits equal the resident run's.
src=$(cd "$2" && pwd)
least_paged() { # model args... -> the "or at least N MiB to stream the core" figure
  "$bin" eval "$@" --ids 1 --mem 1K --profile none 2>&1 >/dev/null | grep -o 'or at least [0-9.]* MiB to stream the core' |
    grep -o '[0-9.]*'
}
hf=$dir/hf-kimi-k3
"$bin" synth --preset tiny --arch kimi-k3 --type BF16 --expert-type MXFP4 --layers 6 --format hf -o "$hf" >/dev/null 2>&1 ||
  { echo "FAIL synth --format hf"; fail=1; }
"$bin" eval -m "$hf" --ids $ids --top 20 --all-positions -b 5 >"$dir/ref-hf" 2>/dev/null
mem=$(python3 -c "print(f'{$(least_paged -m "$hf") + 0.05:.2f}M')")
"$bin" eval -m "$hf" --ids $ids --top 20 --all-positions -b 5 --mem "$mem" --profile none >"$dir/out-hf" 2>"$dir/out-hf.err"
check "Hugging Face folder --mem $mem: every layer streams" grep -q "layers 0-5 of 6 .* stream from the file per layer" \
  "$dir/out-hf.err"
check "Hugging Face folder --mem $mem: logits equal the resident run's" cmp -s "$dir/ref-hf" "$dir/out-hf"

[ "$fail" = 0 ] || exit 1  # a skip below (no nginx) must not hide a failure above
source "$src/tests/remote/nginx.sh"
trap 'stop_nginx "$dir/ng"' EXIT
mkdir -p "$dir/www"; cp "$dir/deepseek2.gguf" "$dir/www/"
start_nginx "$dir/ng" "$dir/www"
url=http://127.0.0.1:$NGINX_PORT/deepseek2.gguf
mem=$(python3 -c "print(f'{$(least_paged -m "$url" --cache-dir "$dir/cache") + 0.05:.2f}M')")
"$bin" eval -m "$url" --cache-dir "$dir/cache" --ids $ids --top 20 --all-positions -b 5 --mem "$mem" --profile none \
  >"$dir/out-remote" 2>"$dir/out-remote.err"
check "remote GGUF --mem $mem: core layers stream" grep -q "stream from the file per layer" "$dir/out-remote.err"
check "remote GGUF --mem $mem: logits equal the local resident run's" cmp -s "$dir/ref-deepseek2" "$dir/out-remote"
exit $fail
