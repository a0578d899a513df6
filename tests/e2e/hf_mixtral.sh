#!/usr/bin/env bash
# Mixtral folders (config.json model_type mixtral, MixtralForCausalLM, BF16) run as
# the GGUF they convert to, exactly. `synth --format hf` writes a tiny Mixtral (GQA:
# 4 query heads, 2 key-value heads; 8 experts, top-2) with Mixtral's own SentencePiece
# vocabulary (tokenizer.model, from ../shared/vocab/ggml-vocab-llama-spm.gguf when
# there; else synth's built-in BPE), q_proj/k_proj in Hugging Face's rotate-half row
# order; then:
#   - the folder is laid out as published (names, dtypes, tokenizer.model, shards);
#   - `convert` writes the folder's GGUF view; its tensors equal synth's GGUF (the
#     norms and router BF16-rounded, as the folder holds them), so q/k came back
#     through llama.cpp's permutation;
#   - teacher-forced logits (`eval`, every vocabulary entry) from the folder equal
#     those from the converted GGUF bit for bit, experts resident and streamed
#     (--mem), and those from synth's own GGUF with its norms and router rounded to
#     BF16 as the folder holds them (against the unrounded one the largest
#     difference is printed);
#   - greedy text and tokenization from the folder equal the converted GGUF's;
#   - the same folder with q_proj left in GGUF row order (an exporter that forgot
#     the inverse permutation) gives other logits: the permutation is load-bearing;
#   - a config.json without its nesting (as Mixtral publishes it) runs the same;
#     sliding_window narrower than the context is refused naming the field;
#   - `inspect` names the folder's model_type and the llama architecture;
#   - the converted GGUF matches llama.cpp through the oracle harness (tests/oracle),
#     when the oracle is installed.
# usage: hf_mixtral.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1 src=$2 build=$3
d=$build/hf_mixtral
rm -rf "$d" && mkdir -p "$d"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
IDS=$(python3 -c "import random; r=random.Random(5); print(','.join(str(r.randrange(1, 256)) for _ in range(16)))")
SYNTH=(--preset tiny --arch llama --no-rope-freqs --type BF16 --expert-type BF16 --seed 3)
vocab=$src/../shared/vocab/ggml-vocab-llama-spm.gguf
if [ -f "$vocab" ]; then SYNTH+=(--vocab "$vocab"); spm=1
else echo "note: $vocab is missing; the built-in BPE vocabulary stands in (no tokenizer.model)"; spm=0; fi
hf=$d/hf conv=$d/conv.gguf ref=$d/synth.gguf

"$bin" synth "${SYNTH[@]}" --format hf -o "$hf" 2>"$d/log" || { bad "synth --format hf: $(cat "$d/log")"; exit 1; }
"$bin" synth "${SYNTH[@]}" -o "$ref" 2>"$d/log" || { bad "synth: $(cat "$d/log")"; exit 1; }
if "$bin" synth --preset tiny --arch llama --format hf -o "$d/with-freqs" 2>"$d/log"; then
  bad "synth --format hf wrote a llama with rope_freqs"
else grep -q -- "--no-rope-freqs" "$d/log" && ok "synth --format hf without --no-rope-freqs: $(cat "$d/log")" ||
  bad "rope_freqs refusal: $(cat "$d/log")"; fi

python3 - "$hf" "$spm" <<'PY' && ok "folder layout" || bad "folder layout"
import json, struct, sys, os
d, spm = sys.argv[1], sys.argv[2] == "1"
ix = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
assert len(set(ix.values())) >= 2, ix
cfg = json.load(open(os.path.join(d, "config.json")))
text = cfg.get("text_config", cfg)
assert text["model_type"] == "mixtral" and text["architectures"] == ["MixtralForCausalLM"], text
for k in ("num_local_experts", "num_experts_per_tok", "num_key_value_heads", "rope_theta", "rms_norm_eps", "head_dim"):
    assert k in text, k
assert text["num_attention_heads"] == 4 and text["num_key_value_heads"] == 2 and text["num_local_experts"] == 8
dtypes = {}
for s in sorted(set(ix.values())):
    raw = open(os.path.join(d, s), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__": dtypes[k] = v["dtype"]
for k in ("model.layers.1.self_attn.q_proj.weight", "model.layers.1.block_sparse_moe.gate.weight",
          "model.layers.1.block_sparse_moe.experts.7.w1.weight", "model.layers.1.block_sparse_moe.experts.7.w2.weight",
          "model.layers.1.block_sparse_moe.experts.7.w3.weight", "model.layers.0.input_layernorm.weight",
          "model.layers.0.post_attention_layernorm.weight", "model.embed_tokens.weight", "model.norm.weight"):
    assert dtypes.get(k) == "BF16", (k, dtypes.get(k))
assert not any("rope_freqs" in k or ".mlp." in k for k in dtypes), sorted(dtypes)[:5]
assert os.path.exists(os.path.join(d, "generation_config.json"))
assert os.path.exists(os.path.join(d, "tokenizer_config.json"))
if spm:
    assert os.path.exists(os.path.join(d, "tokenizer.model")) and not os.path.exists(os.path.join(d, "tokenizer.json"))
PY

"$bin" convert "$hf" "$conv" 2>"$d/log" || bad "convert: $(cat "$d/log")"
python3 "$src/tests/e2e/gguf_tensors_equal.py" "$conv" "$ref" && ok "converted tensors equal synth's" ||
  bad "converted tensors differ from synth's"

# Logits: folder == converted GGUF bit for bit; synth's GGUF within the BF16 rounding.
ev() { "$bin" eval -m "$1" --ids "$IDS" --top 100000 --all-positions "${@:3}" >"$d/eval-$2" 2>"$d/log" ||
  bad "eval $2: $(cat "$d/log")"; }
ev "$hf" hf
ev "$conv" conv
ev "$ref" ref
if [ -s "$d/eval-hf" ] && cmp -s "$d/eval-hf" "$d/eval-conv"; then ok "eval logits identical, folder and converted GGUF"
else bad "eval logits differ, folder and converted GGUF"; fi
# Room for the core (32 MiB: the 32000-entry embedding and output) and 2 of the 16
# experts (0.39 MiB each) beside the default reserve (67 MiB).
ev "$hf" hf-mem --mem "${HF_MIXTRAL_MEM:-100M}" --stats
if cmp -s "$d/eval-hf-mem" "$d/eval-conv" && grep -q "evictions [1-9]" "$d/log"; then
  ok "eval logits identical with streamed experts ($(grep -m1 -o '[0-9]* slots.*' "$d/log"))"
else bad "streamed eval logits differ, or nothing was evicted: $(grep -m1 'expert cache' "$d/log")"; fi
# Max |logit difference| over every position and vocabulary entry.
maxdiff() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
b = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
assert len(a) == len(b) and a, (len(a), len(b))
m = 0.0
for x, y in zip(a, b):
    ya = dict((i, v) for i, v in y["top"])
    assert len(ya) == len(x["top"])
    m = max(m, max(abs(v - ya[i]) for i, v in x["top"]))
print(f"{m:.3g}")
PY
}
# Synth's GGUF with its F32 tensors (norms, router) rounded to BF16 as the folder holds
# them is the same model: the same logits, bit for bit.
python3 - "$src/tests/e2e" "$ref" "$d/synth-bf16.gguf" <<'PY' || bad "could not round synth's GGUF"
import struct, sys
sys.path.insert(0, sys.argv[1])
from gguf_patch import Gguf
g = Gguf(open(sys.argv[2], "rb").read())
for name, (at, nd, ty, off) in g.tensors.items():
    if ty != 0: continue  # F32
    n = 1
    for x in struct.unpack_from("<%dQ" % nd, g.d, at + 4): n *= x
    a = g.data_start + off
    xs = struct.unpack_from("<%dI" % n, g.d, a)
    struct.pack_into("<%dI" % n, g.d, a, *(((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16 for x in xs))
open(sys.argv[3], "wb").write(g.d)
PY
ev "$d/synth-bf16.gguf" ref-bf16
if [ -s "$d/eval-ref-bf16" ] && cmp -s "$d/eval-hf" "$d/eval-ref-bf16"; then
  ok "eval logits identical, folder and synth's GGUF with its norms and router BF16-rounded"
else bad "eval logits differ, folder and synth's BF16-rounded GGUF"; fi
echo "note: folder vs synth's unrounded GGUF: max |logit difference| $(maxdiff "$d/eval-hf" "$d/eval-ref") (logits up to $(python3 -c "
import json; print(max(abs(v) for l in open('$d/eval-ref') if l.startswith('{') for i, v in json.loads(l)['top']))"))"

# Greedy text and tokenization.
for m in "$hf" "$conv"; do
  "$bin" run -m "$m" -p "the cat sat on" -n 12 --temp 0 --seed 1 2>/dev/null >"$d/run-$(basename "$m")"
  "$bin" tokenize -m "$m" -p "Hello world, the cat sat" >"$d/tok-$(basename "$m")" 2>&1
done
if [ -s "$d/run-hf" ] && cmp -s "$d/run-hf" "$d/run-conv.gguf"; then ok "run text identical"
else bad "run text differs: $(cat "$d/run-hf") / $(cat "$d/run-conv.gguf")"; fi
if [ -s "$d/tok-hf" ] && cmp -s "$d/tok-hf" "$d/tok-conv.gguf"; then ok "tokenization identical: $(head -c 120 "$d/tok-hf" | tr '\n' ' ')"
else bad "tokenization differs: $(cat "$d/tok-hf") / $(cat "$d/tok-conv.gguf")"; fi

# q_proj in GGUF row order (no inverse permutation): other logits.
cp -r "$hf" "$d/unpermuted"
python3 - "$d/unpermuted" <<'PY' || bad "could not write the unpermuted folder"
import json, os, struct, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "config.json")))
heads = cfg.get("text_config", cfg)["num_attention_heads"]
for s in sorted(set(json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"].values())):
    p = os.path.join(d, s)
    raw = bytearray(open(p, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if not k.endswith("self_attn.q_proj.weight"): continue
        rows, cols = v["shape"]
        a, b = (8 + n + x for x in v["data_offsets"])
        rb, hd = (b - a) // rows, rows // heads
        src = bytes(raw[a:b])
        for r in range(rows):  # what the converter makes of it: row 2i + j <- row j * hd/2 + i
            h, w = divmod(r, hd)
            s_row = h * hd + (w % 2) * (hd // 2) + w // 2
            raw[a + r * rb:a + (r + 1) * rb] = src[s_row * rb:(s_row + 1) * rb]
    open(p, "wb").write(raw)
PY
ev "$d/unpermuted" unpermuted
if [ -s "$d/eval-unpermuted" ] && ! cmp -s "$d/eval-unpermuted" "$d/eval-conv"; then
  ok "q_proj left in GGUF row order changes the logits (max |difference| $(maxdiff "$d/eval-unpermuted" "$d/eval-conv"))"
else bad "q_proj left in GGUF row order gives the same logits: the permutation is not tested"; fi

# Mixtral's config.json as published: not nested.
cp -r "$hf" "$d/flat"
python3 - "$d/flat/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
json.dump(c.get("text_config", c), open(sys.argv[1], "w"), indent=2)
PY
ev "$d/flat" flat
cmp -s "$d/eval-flat" "$d/eval-conv" && ok "un-nested config.json: same logits" || bad "un-nested config.json: $(cat "$d/log")"
python3 - "$d/flat/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["sliding_window"] = 1024
json.dump(c, open(sys.argv[1], "w"))
PY
if "$bin" eval -m "$d/flat" --ids 1,2 >/dev/null 2>"$d/log"; then bad "sliding_window 1024 accepted"
elif grep -q "sliding_window" "$d/log"; then ok "sliding_window refused: $(head -1 "$d/log")"
else bad "sliding_window message: $(cat "$d/log")"; fi

# llama.cpp on the converted GGUF, through the oracle harness, when it is installed.
oracle=""
for o in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$o" ] && [ -d "$o/node_modules/node-llama-cpp" ]; then oracle=$o; break; fi
done
if [ -n "$oracle" ] && command -v node >/dev/null; then
  if node "$src/tests/oracle/llama_ref.mjs" --oracle-dir "$oracle" --threads 1 --model "$conv" \
      --ids "$IDS" --top 0 --mode batch --ctx 128 >"$d/oracle" 2>"$d/log" &&
     python3 "$src/tests/oracle/compare.py" "$d/eval-hf" "$d/oracle" --label hf-mixtral --tol 2e-2 \
       --min-top1 0.99 --max-flipped 0.05; then ok "llama.cpp agrees on the converted GGUF"
  else bad "llama.cpp on the converted GGUF: $(tail -5 "$d/log")"; fi
else
  echo "note: the llama.cpp oracle is not installed; that comparison is skipped"
fi

"$bin" inspect "$hf" >"$d/inspect" 2>&1 || bad "inspect: $(cat "$d/inspect")"
grep -q "Hugging Face folder, model_type mixtral" "$d/inspect" && grep -q "^architecture:   llama (supported)" "$d/inspect" &&
  ok "inspect" || bad "inspect: $(cat "$d/inspect")"
exit $fail
