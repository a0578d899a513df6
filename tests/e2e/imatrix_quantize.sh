#!/usr/bin/env bash
# quantize --imatrix: a tiny F32 qwen3moe, an importance matrix in llama.cpp's legacy
# .dat format written here (python3: per matrix, the mean square of random
# activations whose columns have skewed scales, the experts' vectors one after
# another, as llama-imatrix stores them), and the model quantized to IQ2_XXS with
# and without it:
#   - without: the "without an importance matrix" warning; with: none, the count of
#     tensors that used it, and one warning counting the matrices it lacks;
#   - the two files differ and deltafin runs the imatrix one (that its weighted error
#     is lower is measured by the unit test Quantize.ImatrixWeighsTheMatricesItCovers);
#   - llama.cpp (the oracle, when installed) loads the imatrix-quantized model and
#     deltafin's teacher-forced logits match its own as arch_matrix's IQ2_XXS cells do;
#   - Q8_0 (no weighted quantizer) says the imatrix is not used, same file;
#   - a truncated imatrix and a text file are refused with an error naming the file,
#     and no output is written.
# usage: imatrix_quantize.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1 src=$2 build=$3
dir=$build/e2e-imatrix; rm -rf "$dir"; mkdir -p "$dir"
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to write the imatrix"; exit 77; }
fail=0
check() { # name, condition command...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
m=$dir/f32.gguf im=$dir/imatrix.dat
"$bin" synth --preset tiny --arch qwen3moe --type F32 -o "$m" >/dev/null 2>"$dir/synth.err" ||
  { echo "FAIL synth: $(cat "$dir/synth.err")"; exit 1; }

# The imatrix: entries for every matrix but token_embd and output (llama-imatrix
# records neither by default) and the routers; for a 3-D expert tensor nval =
# n_per_row x n_expert.
python3 - "$src/tests/e2e" "$m" "$im" <<'PY' || { echo "FAIL writing the imatrix"; exit 1; }
import random, struct, sys
sys.path.insert(0, sys.argv[1])
from gguf_patch import Gguf
g = Gguf(open(sys.argv[2], 'rb').read())
rng = random.Random(5)
entries = []
for name, (at, nd, ty, off) in sorted(g.tensors.items()):
    if nd < 2 or not name.endswith('.weight') or 'ffn_gate_inp' in name or name in ('token_embd.weight', 'output.weight'):
        continue
    ne = struct.unpack_from(f'<{nd}Q', g.d, at + 4)
    n_mat = ne[2] if nd == 3 else 1
    vals = []
    for _ in range(n_mat):
        scale = [rng.lognormvariate(0, 1.2) for _ in range(ne[0])]  # a few loud columns
        tokens, ncall = 32, 4
        sq = [0.0] * ne[0]
        for _ in range(tokens):
            for j in range(ne[0]):
                x = rng.gauss(0, scale[j])
                sq[j] += x * x
        vals += [s / tokens * ncall for s in sq]  # stored as mean x^2 times ncall
    entries.append((name, ncall, vals))
with open(sys.argv[3], 'wb') as f:
    f.write(struct.pack('<i', len(entries)))
    for name, ncall, vals in entries:
        b = name.encode()
        f.write(struct.pack('<i', len(b)) + b + struct.pack('<ii', ncall, len(vals)))
        f.write(struct.pack(f'<{len(vals)}f', *vals))
    ds = b'random-activations'
    f.write(struct.pack('<ii', 4, len(ds)) + ds)  # chunks, dataset name
print(f'{len(entries)} entries')
PY

"$bin" quantize "$m" "$dir/plain.gguf" IQ2_XXS >/dev/null 2>"$dir/plain.err"
check "quantize IQ2_XXS without an imatrix succeeds" test $? = 0
check "and warns that it has no importance matrix" grep -q "IQ2_XXS without an importance matrix" "$dir/plain.err"
"$bin" quantize "$m" "$dir/imatrix.gguf" IQ2_XXS --imatrix "$im" >/dev/null 2>"$dir/imatrix.err"
check "quantize IQ2_XXS --imatrix succeeds" test $? = 0
check "with no 'without an importance matrix' warning" bash -c "! grep -q 'without an importance matrix' '$dir/imatrix.err'"
check "it reports the imatrix it read" grep -q "imatrix $im: .* entries (legacy .dat format, computed on 4 chunks)" "$dir/imatrix.err"
check "and how many tensors used it" grep -Eq "imatrix: [1-9][0-9]* tensors quantized with their importance vectors" "$dir/imatrix.err"
check "and counts the two it lacks (token_embd, output) in one warning" \
  grep -q "warning: 2 tensors have no entry in the imatrix" "$dir/imatrix.err"
check "the imatrix changes the file" bash -c "! cmp -s '$dir/plain.gguf' '$dir/imatrix.gguf'"
sed 's/^/     /' "$dir/imatrix.err"

"$bin" eval -m "$dir/imatrix.gguf" --ids 1,2,3,4 --top 5 >/dev/null 2>"$dir/eval.err"
check "deltafin runs the imatrix-quantized model" test $? = 0

# llama.cpp loads it and agrees with deltafin (IQ2_XXS bounds of arch_matrix.sh).
oracle=""
for d in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$d" ] && [ -d "$d/node_modules/node-llama-cpp" ]; then oracle=$d; break; fi
done
if [ -z "$oracle" ] || ! command -v node >/dev/null; then
  echo "skip oracle checks (llama.cpp oracle not installed: scripts/install-oracle)"
else
  ids=$(python3 -c "import random; r=random.Random(11); print(','.join(str(r.randrange(256)) for _ in range(128)))")
  node "$src/tests/oracle/llama_ref.mjs" --oracle-dir "$oracle" --threads 1 --model "$dir/imatrix.gguf" --ids "$ids" \
    --top 0 --mode batch --ctx 192 >"$dir/ref" 2>"$dir/ref.err"
  check "llama.cpp loads and runs the imatrix-quantized model" test $? = 0
  v=$(python3 -c "import json,sys; print(len(json.loads(open(sys.argv[1]).readline())['top']))" "$dir/ref" 2>/dev/null)
  "$bin" eval -m "$dir/imatrix.gguf" --ids "$ids" --top "${v:-0}" --all-positions >"$dir/ours" 2>>"$dir/eval.err"
  check "deltafin's logits agree with llama.cpp's (tol 3e-2, top-1 >= 0.97)" \
    python3 "$src/tests/oracle/compare.py" "$dir/ours" "$dir/ref" --label "qwen3moe IQ2_XXS --imatrix" \
    --tol 3e-2 --min-top1 0.97 --max-flipped 0.05
fi

# A target whose quantizer does not weigh (Q8_0): said so, the file as without it.
"$bin" quantize "$m" "$dir/q8.gguf" Q8_0 --imatrix "$im" >/dev/null 2>"$dir/q8.err"
check "Q8_0 --imatrix says the imatrix is not used" grep -q "imatrix: not used" "$dir/q8.err"
"$bin" quantize "$m" "$dir/q8_plain.gguf" Q8_0 >/dev/null 2>&1
check "and writes the same file as without it" cmp -s "$dir/q8.gguf" "$dir/q8_plain.gguf"

# Corrupt imatrices: refused, naming the file, nothing written.
head -c $(($(stat -c %s "$im") / 2)) "$im" >"$dir/cut.dat"
"$bin" quantize "$m" "$dir/cut.gguf" IQ2_XXS --imatrix "$dir/cut.dat" >/dev/null 2>"$dir/cut.err"
rc=$?
check "a truncated imatrix is an error (exit 1)" test $rc = 1
check "that names the file and says truncated" grep -q "error: imatrix $dir/cut.dat: truncated" "$dir/cut.err"
check "and writes no output" test ! -e "$dir/cut.gguf"
sed 's/^/     /' "$dir/cut.err"
echo "This is not an importance matrix." >"$dir/text.dat"
"$bin" quantize "$m" "$dir/text.gguf" IQ2_XXS --imatrix "$dir/text.dat" >/dev/null 2>"$dir/text.err"
check "a text file is refused as neither format" grep -q "error: imatrix $dir/text.dat: not an importance matrix" \
  "$dir/text.err"
sed 's/^/     /' "$dir/text.err"
exit $fail
