#!/usr/bin/env bash
# run --spec from the command line: every mode prints what --spec off prints (greedy),
# resident and under a --mem that streams experts, with --stats showing the drafts;
# bad --spec values are refused with a message naming them; --spec mtp on deepseek2
# with an MTP block; a JSON schema's output unchanged by speculation. qwen3moe+IQ1_S_DYN
# is a qwen3moe in a dynamic-quant mix (IQ1_S/IQ2_XXS experts, Q4_K core).
# usage: spec_cli.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; build=$3
dir=$build/e2e-spec; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
p="one two three, one two three, one two"
for arch in qwen3moe kimi-k3 qwen3moe+IQ1_S_DYN; do
  m=$dir/tiny-$arch.gguf
  mix=(); [ "${arch%+*}" != "$arch" ] && mix=(--mix "${arch#*+}")
  "$bin" synth --preset tiny --arch "${arch%+*}" "${mix[@]}" --force -o "$m" >/dev/null 2>&1 ||
    { echo "FAIL synth $arch"; fail=1; continue; }
  "$bin" run -m "$m" -p x -n 1 --mem 1K --profile none >/dev/null 2>"$dir/small.err"
  least=$(grep -o 'give --mem of at least [0-9.]* MiB' "$dir/small.err" | grep -o '[0-9.]*')
  slot=$(grep -o 'one expert takes [0-9.]* MiB' "$dir/small.err" | grep -o '[0-9.]*')
  mem=$(python3 -c "print(f'{$least + 3.2 * $slot:.3f}M')")
  ref=$("$bin" run -m "$m" -p "$p" -n 40 --temp 0 --spec off 2>/dev/null)
  for spec in auto ngram self "draft:$m"; do
    for cap in "" "--mem $mem --profile none"; do
      out=$("$bin" run -m "$m" -p "$p" -n 40 --temp 0 --spec "$spec" --spec-max 4 --spec-fixed $cap --stats \
            2>"$dir/err")
      check "$arch --spec $spec ${cap:+(streaming)}: same text as --spec off" test "$out" = "$ref"
      # (n-gram guesses need the random model to repeat itself: not checked)
      case $spec in auto|ngram) ;; *) check "$arch --spec $spec: --stats shows drafts" \
        grep -Eq "^speculation: .* [1-9][0-9]* guessed tokens checked" "$dir/err";; esac
    done
  done
done
# A JSON schema: the constrained output is the same with speculation.
m=$dir/tiny-qwen3moe.gguf
schema='{"type":"object","properties":{"city":{"enum":["Paris","Oslo"]},"is_sunny":{"type":"boolean"}},"required":["city","is_sunny"]}'
ref=$("$bin" run -m "$m" -p "$p" -n 60 --temp 0 --spec off --json-schema "$schema" 2>/dev/null)
out=$("$bin" run -m "$m" -p "$p" -n 60 --temp 0 --spec ngram --spec-max 4 --spec-fixed --json-schema "$schema" 2>/dev/null)
check "--json-schema: same text with speculation as --spec off" test "$out" = "$ref"
# deepseek2 with an MTP (nextn) block: --spec mtp drafts with it, same text.
m=$dir/tiny-deepseek2-nextn.gguf
if "$bin" synth --preset tiny --arch deepseek2 --mla absorbed --nextn 1 --force -o "$m" >/dev/null 2>&1; then
  ref=$("$bin" run -m "$m" -p "$p" -n 40 --temp 0 --spec off 2>/dev/null)
  out=$("$bin" run -m "$m" -p "$p" -n 40 --temp 0 --spec mtp --spec-max 3 --spec-fixed --stats 2>"$dir/err")
  check "deepseek2 --spec mtp: same text as --spec off" test "$out" = "$ref"
  check "deepseek2 --spec mtp: --stats shows MTP drafts" grep -Eq "^  mtp: guessed [1-9][0-9]* tokens" "$dir/err"
  check "inspect names the MTP block" bash -c "'$bin' inspect '$m' | grep -q 'multi-token-prediction block'"
else
  echo "FAIL synth deepseek2 --nextn 1"; fail=1
fi
m=$dir/tiny-qwen3moe.gguf
"$bin" run -m "$m" -p hi -n 2 --spec mtp >/dev/null 2>"$dir/nomtp.err"
check "--spec mtp on a model without an MTP block says so" grep -q "no multi-token-prediction" "$dir/nomtp.err"
"$bin" run -m "$m" -p hi -n 2 --spec sometimes >/dev/null 2>"$dir/bad.err"
check "a bad --spec is named" grep -q "bad --spec 'sometimes'" "$dir/bad.err"
"$bin" run -m "$m" -p hi -n 2 --spec draft:"$dir/none.gguf" >/dev/null 2>"$dir/bad2.err"
check "a missing draft model is named" grep -q "none.gguf" "$dir/bad2.err"
exit $fail
