#!/usr/bin/env bash
# What people bring from llama.cpp: --version, bare `deltafin` and `deltafin help`,
# -ngl accepted with a note, a mistyped option or command answered with the closest
# one, the model as the first argument or -m in every command, llama-quantize's type
# names (and the valid ones listed on a bad one), synth's presets listed on a bad one;
# and a model with tensor types deltafin cannot compute: inspect says so, run fails
# with one line per type.
# usage: cli_habits.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1; build=$3
dir=$build/e2e-cli-habits; rm -rf "$dir"; mkdir -p "$dir"
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
m=$dir/tiny.gguf
"$bin" synth --preset tiny --arch qwen3moe -o "$m" 2>/dev/null || { echo "synth failed"; exit 1; }

# --version, help.
"$bin" --version >"$dir/version" 2>&1; rc=$?
check "--version: exit 0, names deltafin and its version" sh -c "test $rc -eq 0 && grep -Eq '^deltafin [0-9]+\.[0-9]+' '$dir/version'"
"$bin" >"$dir/bare" 2>&1; rc=$?
check "bare deltafin: prints the help (the commands), exit 0" sh -c "test $rc -eq 0 && grep -q 'quantize' '$dir/bare' && grep -q 'Usage' '$dir/bare'"
"$bin" help >"$dir/help" 2>&1; rc=$?
check "deltafin help: the same help, exit 0" sh -c "test $rc -eq 0 && cmp -s '$dir/help' '$dir/bare'"
"$bin" help run >"$dir/help-run" 2>&1; rc=$?
check "deltafin help run: run's options" sh -c "test $rc -eq 0 && grep -q -- '--n-predict' '$dir/help-run'"

# -ngl: accepted, one note, the same output as without it.
a=$("$bin" run -m "$m" -p "hello" -n 8 --temp 0 2>/dev/null)
b=$("$bin" run -m "$m" -p "hello" -n 8 --temp 0 -ngl 99 2>"$dir/ngl.err"); rc=$?
check "-ngl 99: runs (exit 0) and generates the same text" sh -c "test $rc -eq 0 && test '$a' = '$b'"
check "-ngl 99: one line says deltafin runs on the CPU" sh -c "test \$(grep -c 'runs on the CPU' '$dir/ngl.err') = 1"
"$bin" eval "$m" --ids 1,2 --n-gpu-layers 12 >/dev/null 2>"$dir/ngl2.err"; rc=$?
check "--n-gpu-layers 12 on eval: accepted" sh -c "test $rc -eq 0 && grep -q 'runs on the CPU' '$dir/ngl2.err'"
"$bin" run -m "$m" -p hi -ngl lots >/dev/null 2>"$dir/ngl3.err"; rc=$?
check "-ngl lots: refused, naming the option" sh -c "test $rc -ne 0 && grep -q 'n-gpu-layers' '$dir/ngl3.err'"

# Mistyped options and commands.
"$bin" run -m "$m" -p hi --tmep 0.5 >/dev/null 2>"$dir/typo.err"; rc=$?
check "--tmep: refused with 'did you mean --temp'" sh -c "test $rc -ne 0 && grep -q \"no option '--tmep' (did you mean '--temp'?)\" '$dir/typo.err'"
"$bin" run -m "$m" -p hi -temp 0.5 >/dev/null 2>"$dir/typo2.err"; rc=$?
check "-temp (one dash): suggests --temp" sh -c "test $rc -ne 0 && grep -q \"did you mean '--temp'\" '$dir/typo2.err'"
"$bin" run -m "$m" -p hi --ctx 64 >/dev/null 2>"$dir/typo3.err"; rc=$?
check "--ctx: suggests --ctx-size" sh -c "test $rc -ne 0 && grep -q \"did you mean '--ctx-size'\" '$dir/typo3.err'"
"$bin" rnu -m "$m" >/dev/null 2>"$dir/typo4.err"; rc=$?
check "command 'rnu': suggests run" sh -c "test $rc -ne 0 && grep -q \"did you mean 'run'\" '$dir/typo4.err'"
"$bin" serve -m "$m" --prot 8080 >/dev/null 2>"$dir/typo5.err"; rc=$?
check "serve --prot: suggests --port" sh -c "test $rc -ne 0 && grep -q \"did you mean '--port'\" '$dir/typo5.err'"

# The model as the first argument or with -m, in every command that reads one.
ref=$("$bin" eval -m "$m" --ids 1,2,3 --top 3 2>/dev/null)
check "eval MODEL = eval -m MODEL" test "$("$bin" eval "$m" --ids 1,2,3 --top 3 2>/dev/null)" = "$ref"
check "run MODEL = run -m MODEL" test "$("$bin" run "$m" -p hello -n 8 --temp 0 2>/dev/null)" = "$a"
# (with --mem: without it the plan follows the RAM available at that moment)
check "inspect -m MODEL = inspect MODEL" test "$("$bin" inspect -m "$m" --mem 1G 2>&1)" = "$("$bin" inspect "$m" --mem 1G 2>&1)"
check "tokenize MODEL" test "$("$bin" tokenize "$m" -p "hello world" 2>/dev/null)" = "$("$bin" tokenize -m "$m" -p "hello world" 2>/dev/null)"
check "bench MODEL" sh -c "'$bin' bench '$m' -p 8 -n 4 -r 1 --json 2>/dev/null | grep -q tokens_per_second"
python3 -c "print(' '.join(['the cat sat on the mat'] * 60))" >"$dir/text.txt"
check "perplexity MODEL" sh -c "'$bin' perplexity '$m' -f '$dir/text.txt' -c 64 2>/dev/null | grep -q 'Final estimate'"
check "chat MODEL (as before)" sh -c "'$bin' chat --help | grep -q -- '-m,--model'"
check "serve MODEL: in the usage" sh -c "'$bin' serve --help | grep -q -- 'model'"

# quantize: llama-quantize's names, its positional form, the list on a bad name.
f32=$dir/f32.gguf
"$bin" synth --preset tiny --arch qwen3moe --type F32 --layers 8 -o "$f32" >/dev/null 2>&1 || { echo "synth f32 failed"; exit 1; }
"$bin" quantize "$f32" "$dir/q4km.gguf" Q4_K_M >/dev/null 2>"$dir/q4km.err"; rc=$?
check "quantize IN OUT Q4_K_M (llama-quantize's form): done" test $rc -eq 0
"$bin" inspect "$dir/q4km.gguf" >"$dir/q4km.inspect" 2>&1
check "  the file holds Q4_K and, for the layers llama.cpp favours, Q6_K" \
  sh -c "grep -q 'Q4_K ' '$dir/q4km.inspect' && grep -q 'Q6_K ' '$dir/q4km.inspect'"
"$bin" quantize -m "$f32" "$dir/q4ks.gguf" --type q4_k_s >/dev/null 2>&1; rc=$?
"$bin" inspect "$dir/q4ks.gguf" >"$dir/q4ks.inspect" 2>&1
check "quantize -m IN OUT --type q4_k_s: Q4_K, with Q5_K in the first layers" \
  sh -c "test $rc -eq 0 && grep -q 'Q5_K ' '$dir/q4ks.inspect'"
check "  a Q4_K_M model runs" sh -c "'$bin' run '$dir/q4km.gguf' -p hi -n 4 --temp 0 >/dev/null 2>&1"
"$bin" quantize "$f32" "$dir/bad.gguf" Q4_K_XYZ >/dev/null 2>"$dir/qbad.err"; rc=$?
check "quantize to an unknown type: refused, listing the valid ones" \
  sh -c "test $rc -eq 2 && grep -q \"unknown type 'Q4_K_XYZ'\" '$dir/qbad.err' && grep -q 'Q4_K_M' '$dir/qbad.err' && grep -q 'Q8_0' '$dir/qbad.err'"
"$bin" quantize "$f32" "$dir/bad.gguf" F64 >/dev/null 2>"$dir/qbad2.err"; rc=$?
check "quantize to F64: deltafin cannot compute it, says so" \
  sh -c "test $rc -eq 2 && grep -q 'cannot compute with F64' '$dir/qbad2.err'"
check "  nothing was written" test ! -e "$dir/bad.gguf"

# synth --preset: the presets listed on a bad one.
"$bin" synth --preset huge -o "$dir/x.gguf" >/dev/null 2>"$dir/preset.err"; rc=$?
check "synth --preset huge: refused, listing the presets" \
  sh -c "test $rc -ne 0 && grep -q \"unknown preset 'huge'\" '$dir/preset.err' && grep -q 'tiny' '$dir/preset.err' && grep -q 'mixtral-mini' '$dir/preset.err'"

# Types deltafin cannot compute: relabel F32 experts as I32 and F16 attention as I16
# (the same element sizes, so the file stays well-formed). Every quantized type of
# GGUF is computed now; only the integer and F64 types are not.
un=$dir/uncomputed.gguf
"$bin" synth --preset tiny --arch qwen3moe --type Q4_0 --expert-type F32 --tensor-type 'attn_.*=F16' -o "$un" >/dev/null 2>&1 ||
  { echo "synth Q4_0 failed"; exit 1; }
counts=$(python3 - "$un" <<'PY'
import struct, sys
path = sys.argv[1]
d = bytearray(open(path, 'rb').read())
p = 8
nt, nkv = struct.unpack_from('<QQ', d, p); p += 16
fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t, p):
    if t == 8: return p + 8 + struct.unpack_from('<Q', d, p)[0]
    if t == 9:
        et, n = struct.unpack_from('<IQ', d, p); p += 12
        if et in fixed: return p + n * fixed[et]
        for _ in range(n): p = skip(et, p)
        return p
    return p + fixed[t]
for _ in range(nkv):
    p = skip(8, p); t, = struct.unpack_from('<I', d, p); p = skip(t, p + 4)
n_iq4 = n_iq3 = 0
for _ in range(nt):
    n, = struct.unpack_from('<Q', d, p); name = d[p + 8:p + 8 + n].decode(); p += 8 + n
    nd, = struct.unpack_from('<I', d, p); p += 4 + 8 * nd
    t, = struct.unpack_from('<I', d, p)
    if t == 0 and '_exps' in name: struct.pack_into('<I', d, p, 26); n_iq4 += 1   # F32 -> I32
    elif t == 1: struct.pack_into('<I', d, p, 25); n_iq3 += 1                    # F16 -> I16
    p += 12
open(path, 'wb').write(d)
print(n_iq4, n_iq3)
PY
)
read -r n_iq4 n_iq3 <<<"$counts"
check "the relabelled model has I32 ($n_iq4) and I16 ($n_iq3) tensors" sh -c "test '${n_iq4:-0}' -gt 0 && test '${n_iq3:-0}' -gt 0"
"$bin" inspect "$un" >"$dir/un.inspect" 2>&1; rc=$?
# inspect describes the file, marks the types, and exits 1: the file does not load.
check "inspect: describes the file, marks the types deltafin cannot compute, exits 1" \
  sh -c "test $rc -eq 1 && grep -q 'I32 .* (not computed by deltafin)' '$dir/un.inspect' && grep -q 'cannot run: .*I16 ($n_iq3 tensors)' '$dir/un.inspect'"
"$bin" run "$un" -p hi -n 2 >/dev/null 2>"$dir/un.err"; rc=$?
check "run: fails" test $rc -ne 0
check "run: one line per type with its tensor count" \
  sh -c "grep -q '^  I32: $n_iq4 tensors' '$dir/un.err' && grep -q '^  I16: $n_iq3 tensors' '$dir/un.err'"
check "run: says which types deltafin computes" grep -q "deltafin computes: F32, F16, .*Q8_0" "$dir/un.err"
check "run: does not blame the architecture, nor list each tensor" \
  sh -c "! grep -q 'do not match its architecture' '$dir/un.err' && test \$(wc -l <'$dir/un.err') -le 5"
exit $fail
