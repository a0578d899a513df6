#!/usr/bin/env bash
# The command line on a tiny synthetic model: run/eval/inspect/perplexity work, and
# bad input gets an error that says what to do.
# usage: cli_basics.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; build=$3
dir=$build/e2e-cli; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
m=$dir/tiny.gguf
"$bin" synth --preset tiny --arch qwen3moe --force -o "$m" 2>/dev/null || { echo "synth failed"; exit 1; }

out=$("$bin" run -m "$m" -p "hello world" -n 16 --temp 0 2>"$dir/err")
check "run prints generated text to stdout" test -n "$out"
out2=$("$bin" run -m "$m" -p "hello world" -n 16 --temp 0 2>/dev/null)
check "greedy run is deterministic" test "$out" = "$out2"
"$bin" run -m "$m" -p "hello world" -n 8 --temp 0 --stats >/dev/null 2>"$dir/stats"
check "--stats reports decode speed on stderr" grep -q "decode: .* tok/s" "$dir/stats"
s1=$("$bin" run -m "$m" -p "hello" -n 16 --temp 1 --seed 7 2>/dev/null)
s2=$("$bin" run -m "$m" -p "hello" -n 16 --temp 1 --seed 7 2>/dev/null)
check "a fixed seed reproduces sampled text" test "$s1" = "$s2"

# Structured output on the trained model (the random one rarely closes a string).
kjv=$2/assets/models/kjv-moe-Q8_0.gguf
schema='{"type":"object","properties":{"book":{"enum":["Genesis","Exodus"]},"holy":{"type":"boolean"}},"required":["book","holy"]}'
conforms="import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if set(v)=={'book','holy'} and v['book'] in ('Genesis','Exodus') and isinstance(v['holy'],bool) else 1)"
"$bin" run -m "$kjv" -p "And God said" -n 400 --temp 0 --json-schema "$schema" >"$dir/json" 2>"$dir/json.err"
check "run --json-schema: the output conforms" python3 -c "$conforms" "$dir/json"
check "  and ended at its end (no warning)" test ! -s "$dir/json.err"
"$bin" run -m "$kjv" -p "And God said" -n 400 --temp 0 --spec off --json-schema "$schema" >"$dir/json-nospec" 2>/dev/null
check "  the same without speculation" cmp -s "$dir/json" "$dir/json-nospec"
"$bin" run -m "$kjv" -p "And God said" -n 60 --temp 0 >"$dir/nojson" 2>/dev/null
check "  (without it the same run is no such JSON)" sh -c "! python3 -c \"\$1\" '$dir/nojson' 2>/dev/null" _ "$conforms"
"$bin" run -m "$kjv" -p x --json-schema '{"type":"string","format":"date"}' >/dev/null 2>"$dir/json.bad"; rc=$?
check "run --json-schema: an unsupported keyword is refused, named" sh -c "test $rc -eq 2 && grep -q \"'format'\" '$dir/json.bad'"

"$bin" eval -m "$m" --ids 1,2,3,4 --top 3 --all-positions >"$dir/eval" 2>/dev/null
check "eval prints one JSON line per position" test "$(wc -l <"$dir/eval")" = 4
"$bin" eval -m "$m" --ids 1,2,3,4 --top 3 --all-positions -b 1 >"$dir/eval1" 2>/dev/null
check "eval token by token gives the same top ids" \
  python3 -c "import json,sys; a=[json.loads(l) for l in open('$dir/eval')]; b=[json.loads(l) for l in open('$dir/eval1')]; sys.exit(0 if [[t[0] for t in x['top']] for x in a]==[[t[0] for t in x['top']] for x in b] else 1)"

"$bin" inspect "$m" --mem 100M >"$dir/inspect" 2>&1
check "inspect names the architecture" grep -q "architecture:   qwen3moe" "$dir/inspect"
check "inspect evaluates a RAM budget" grep -q "expected read" "$dir/inspect"
check "inspect keeps the engine's reserve (64M + 3%) out of the expert cache" grep -q "reserve: *67.00 MiB" "$dir/inspect"
"$bin" inspect "$m" --mem 8M >"$dir/inspect-small" 2>&1
check "inspect: a budget the reserve takes" grep -q "does not fit: .* is too small" "$dir/inspect-small"

"$bin" run -m "$m" -p hi -n 2 --mem 70M -c 200000 >/dev/null 2>"$dir/e-ctx"; rc=$?
check "run: a context whose state does not fit --mem is refused, saying what to lower" \
  sh -c "test $rc -eq 1 && grep -q 'sequence state of 200000 positions' '$dir/e-ctx' && grep -q 'lower -c' '$dir/e-ctx'"
"$bin" run -m "$dir/does-not-exist.gguf" -p hi >/dev/null 2>"$dir/e1"; rc=$?
check "missing model: non-zero exit" test $rc -ne 0
check "missing model: says it does not exist" grep -q "does not exist" "$dir/e1"

printf 'GGUF\x03\x00\x00\x00' >"$dir/trunc.gguf"
"$bin" run -m "$dir/trunc.gguf" -p hi >/dev/null 2>"$dir/e2"; rc=$?
check "truncated GGUF: clear error" sh -c "test $rc -ne 0 && grep -q 'truncated' '$dir/e2'"

python3 - "$m" "$dir/alien.gguf" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
# Rename the architecture value 'qwen3moe' -> 'qwen9moe' (same length keeps offsets valid).
data = data.replace(b'qwen3moe', b'qwen9moe', 1)
open(sys.argv[2], 'wb').write(data)
PY
"$bin" run -m "$dir/alien.gguf" -p hi >/dev/null 2>"$dir/e3"; rc=$?
check "unknown architecture: lists the supported ones" sh -c "test $rc -ne 0 && grep -q \"architecture 'qwen9moe' is not supported\" '$dir/e3' && grep -q qwen3moe '$dir/e3'"

long=$(python3 -c "print('word ' * 3000)")
"$bin" run -m "$m" -p "$long" -c 256 -n 4 >/dev/null 2>"$dir/e4"; rc=$?
check "prompt longer than the context: says how to fix it" sh -c "test $rc -ne 0 && grep -q 'ctx-size' '$dir/e4'"

"$bin" eval -m "$m" --ids 1,999999 >/dev/null 2>"$dir/e5"; rc=$?
check "token id out of range: clear error" sh -c "test $rc -ne 0 && grep -q 'out of range' '$dir/e5'"

python3 -c "print(' '.join(['the cat sat on the mat and then it ran off'] * 120))" >"$dir/text.txt"
"$bin" perplexity -m "$m" -f "$dir/text.txt" -c 128 >"$dir/ppl" 2>/dev/null
check "perplexity prints a final estimate" grep -q "Final estimate: PPL = " "$dir/ppl"

# DELTAFIN_ISA picks a lesser kernel set (scalar always exists); a bad value is named.
DELTAFIN_ISA=scalar "$bin" eval -m "$m" --ids 1,2,3 --top 3 >"$dir/eval-scalar" 2>"$dir/isa.err"
check "DELTAFIN_ISA=scalar evaluates" test "$(wc -l <"$dir/eval-scalar")" = 1
DELTAFIN_ISA=sse9 "$bin" eval -m "$m" --ids 1,2,3 --top 3 >/dev/null 2>"$dir/isa-bad.err"
check "a DELTAFIN_ISA this CPU cannot run is named" grep -q "DELTAFIN_ISA=sse9" "$dir/isa-bad.err"
DELTAFIN_ISA=scalar "$bin" --version >"$dir/version-scalar"
check "--version names the kernel set DELTAFIN_ISA picked" grep -q "CPU kernels: scalar" "$dir/version-scalar"

# synth --list-archs: the registry, one a line, without needing -o.
"$bin" synth --list-archs >"$dir/archs" 2>&1
check "synth --list-archs lists every architecture" sh -c "grep -qx qwen3moe '$dir/archs' && grep -qx llama '$dir/archs' && test \$(wc -l <'$dir/archs') -ge 4"

# eval --dump: one layer's named tensor at one position, the same logits as without.
"$bin" eval -m "$m" --ids 1,2,3 --top 3 --dump l_out --dump ffn_moe_logits@1 --dump-pos 1 >"$dir/dump" 2>"$dir/dump.err"
check "--dump l_out prints it for both layers at --dump-pos" \
  test "$(grep -c '"tensor":"l_out","layer":[01],"pos":1,"n":256,' "$dir/dump")" = 2
check "--dump NAME@LAYER prints that layer only" \
  test "$(grep -c '"tensor":"ffn_moe_logits","layer":1,"pos":1,"n":8,' "$dir/dump")" = 1
"$bin" eval -m "$m" --ids 1,2,3 --top 3 >"$dir/nodump" 2>/dev/null
check "--dump leaves the logits as they were" test "$(grep -v '"tensor"' "$dir/dump")" = "$(cat "$dir/nodump")"
"$bin" eval -m "$m" --ids 1,2,3 --dump nosuch >/dev/null 2>"$dir/dump-bad.err"; rc=$?
check "--dump of an unknown name fails naming the names there are" \
  sh -c "test $rc -ne 0 && grep -q \"'nosuch'\" '$dir/dump-bad.err' && grep -q attn_norm '$dir/dump-bad.err'"
exit $fail
