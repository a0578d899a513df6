#!/usr/bin/env bash
# DeepSeek-V3 / Kimi K2 folders (config.json model_type deepseek_v3) run as the GGUF
# they convert to, exactly. For a tiny deepseek2 (absorbed MLA with q-LoRA, a leading
# dense layer, shared experts, sigmoid routing with score bias and expert groups,
# YaRN), `synth --format hf` writes the folder in BF16, in FP8 (E4M3 weights with
# 128x128 weight_scale_inv, quantization_config fp8) and in INT4 (compressed-tensors
# pack-quantized experts); for each:
#   - the folder is laid out as published (dtypes, companions, quantization_config);
#   - `convert` writes the folder's GGUF view, and the independent numpy checker
#     (tests/hf/check_convert.py with tests/hf/maps/deepseek_v3.json) holds every
#     tensor to llama.cpp's rule (kv_b_proj split into attn_k_b/attn_v_b, FP8 and INT4
#     widened to the BF16 rounding of the exact F32 product), when numpy is there;
#   - teacher-forced logits (`eval`, every vocabulary entry) from the folder equal
#     those from the converted GGUF bit for bit, experts resident and streamed (--mem);
#   - the BF16 conversion's tensors equal synth's GGUF (the norms and router
#     BF16-rounded as the folder holds them) and it matches llama.cpp through the
#     oracle harness, when the oracle is installed;
#   - a missing weight_scale_inv / weight_scale fails naming the tensor.
# usage: hf_deepseek.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1 src=$2 build=$3
d=$build/hf_deepseek
rm -rf "$d" && mkdir -p "$d"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import numpy" 2>/dev/null; then py=$p; break; fi
done
IDS=$(python3 -c "import random; r=random.Random(5); print(','.join(str(r.randrange(256)) for _ in range(24)))")
SYNTH=(--preset tiny --arch deepseek2 --type BF16 --expert-type BF16 --seed 3)
# Room for the core (4.6 MiB) and about 5 of the 16 experts (0.39 MiB each) beside the
# default reserve (65.2 MiB).
MEM=${HF_DEEPSEEK_MEM:-73M}

for enc in plain fp8 int4; do
  hf=$d/hf-$enc conv=$d/conv-$enc.gguf
  "$bin" synth "${SYNTH[@]}" --format hf --hf-encoding $enc -o "$hf" 2>"$d/log" ||
    { bad "$enc: synth --format hf: $(cat "$d/log")"; continue; }
  python3 - "$hf" "$enc" <<'PY' && ok "$enc: folder layout" || bad "$enc: folder layout"
import json, struct, sys, os
d, enc = sys.argv[1], sys.argv[2]
ix = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
cfg = json.load(open(os.path.join(d, "config.json")))
text = cfg.get("text_config", cfg)
assert text["model_type"] == "deepseek_v3" and text["num_key_value_heads"] == text["num_attention_heads"]
dtypes = {}
for s in sorted(set(ix.values())):
    raw = open(os.path.join(d, s), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__": dtypes[k] = v["dtype"]
e0 = "model.layers.1.mlp.experts.0.gate_proj.weight"
kvb = "model.layers.0.self_attn.kv_b_proj.weight"
qc = cfg.get("quantization_config")
if enc == "plain":
    assert qc is None and dtypes[e0] == "BF16" and dtypes[kvb] == "BF16", (qc, dtypes[e0])
elif enc == "fp8":
    assert qc["quant_method"] == "fp8" and qc["weight_block_size"] == [128, 128], qc
    for n in (e0, kvb, "model.layers.0.mlp.down_proj.weight", "model.layers.1.mlp.shared_experts.up_proj.weight"):
        assert dtypes[n] == "F8_E4M3" and dtypes[n + "_scale_inv"] == "F32", n
    assert dtypes["model.layers.1.mlp.gate.weight"] == "BF16" and dtypes["model.embed_tokens.weight"] == "BF16"
else:
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "pack-quantized", qc
    assert qc["config_groups"]["group_0"]["weights"]["group_size"] == 32
    assert "model.layers.0.self_attn.kv_b_proj" in qc["ignore"]
    assert dtypes[e0 + "_packed"] == "I32" and dtypes[e0 + "_scale"] == "BF16" and dtypes[e0 + "_shape"] == "I32"
    assert e0 not in dtypes and dtypes[kvb] == "BF16"
PY
  "$bin" convert "$hf" "$conv" 2>"$d/log" >/dev/null || { bad "$enc: convert: $(cat "$d/log")"; continue; }
  ok "$enc: convert"
  if [ -n "$py" ]; then
    if "$py" "$src/tests/hf/check_convert.py" "$hf" "$conv" "$src/tests/hf/maps/deepseek_v3.json" >"$d/check-$enc" 2>&1
    then ok "$enc: numpy checker: $(tail -1 "$d/check-$enc")"
    else bad "$enc: numpy checker:"; grep -v '^OK' "$d/check-$enc" | head -20; fi
  else
    echo "note: numpy is not installed; the element-by-element check is skipped"
  fi
  "$bin" eval -m "$hf" --ids "$IDS" --top 100000 --all-positions >"$d/eval-hf-$enc" 2>"$d/log" ||
    bad "$enc: eval folder: $(cat "$d/log")"
  "$bin" eval -m "$conv" --ids "$IDS" --top 100000 --all-positions >"$d/eval-conv-$enc" 2>"$d/log" ||
    bad "$enc: eval gguf: $(cat "$d/log")"
  if [ -s "$d/eval-hf-$enc" ] && cmp -s "$d/eval-hf-$enc" "$d/eval-conv-$enc"; then ok "$enc: eval logits identical"
  else bad "$enc: eval logits differ"; fi
  "$bin" eval -m "$hf" --ids "$IDS" --top 100000 --all-positions --mem "$MEM" >"$d/eval-hfs-$enc" 2>"$d/log-s-$enc" ||
    bad "$enc: eval folder --mem: $(cat "$d/log-s-$enc")"
  if cmp -s "$d/eval-hfs-$enc" "$d/eval-conv-$enc"; then ok "$enc: eval logits identical with streamed experts (--mem $MEM)"
  else bad "$enc: streamed eval logits differ"; fi
done

# The encodings change the weights (FP8 and INT4 are lossy): their logits must differ
# from the BF16 folder's, or the encoded tensors were not what ran.
for enc in fp8 int4; do
  if [ -s "$d/eval-hf-$enc" ] && ! cmp -s "$d/eval-hf-$enc" "$d/eval-hf-plain"; then ok "$enc: logits differ from BF16's"
  else bad "$enc: logits equal BF16's"; fi
done

# BF16: the conversion equals synth's GGUF tensor for tensor.
ref=$d/synth.gguf
"$bin" synth "${SYNTH[@]}" -o "$ref" 2>"$d/log" || bad "synth gguf: $(cat "$d/log")"
python3 "$src/tests/e2e/gguf_tensors_equal.py" "$d/conv-plain.gguf" "$ref" && ok "plain: converted tensors equal synth's" || bad "plain: converted tensors differ from synth's"

# llama.cpp on the converted BF16 GGUF, through the oracle harness. (With the ids of
# Random(7) one of 24 positions flips top-1 on a near tie, max difference 4.5e-3 of the
# range, as synth's own GGUF shows 4.1e-3 there; these ids have no such tie.)
oracle=""
for o in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$o" ] && [ -d "$o/node_modules/node-llama-cpp" ]; then oracle=$o; break; fi
done
if [ -n "$oracle" ] && command -v node >/dev/null; then
  if node "$src/tests/oracle/llama_ref.mjs" --oracle-dir "$oracle" --threads 1 --model "$d/conv-plain.gguf" \
      --ids "$IDS" --top 0 --mode batch --ctx 128 >"$d/oracle" 2>"$d/log" &&
     python3 "$src/tests/oracle/compare.py" "$d/eval-hf-plain" "$d/oracle" --label hf-deepseek-BF16 --tol 2e-2 \
       --min-top1 0.99 --max-flipped 0.05; then ok "llama.cpp agrees on the converted BF16 GGUF"
  else bad "llama.cpp on the converted GGUF: $(tail -5 "$d/log")"; fi
else
  echo "note: the llama.cpp oracle is not installed; that comparison is skipped"
fi

# A scale tensor gone (renamed in its shard's header and the index, same length):
# opening fails naming it.
break_scale() {  # ENC TENSOR NEWNAME
  local dir=$d/broken-$1
  rm -rf "$dir" && cp -r "$d/hf-$1" "$dir"
  python3 - "$dir" "$2" "$3" <<'PY'
import json, os, sys
d, old, new = sys.argv[1:4]
assert len(old) == len(new)
ix = os.path.join(d, "model.safetensors.index.json")
j = json.load(open(ix))
shard = j["weight_map"].pop(old)
j["weight_map"][new] = shard
json.dump(j, open(ix, "w"))
p = os.path.join(d, shard)
raw = bytearray(open(p, "rb").read())
at = raw.find(b'"' + old.encode() + b'"')
assert at > 0
raw[at + 1:at + 1 + len(old)] = new.encode()
open(p, "wb").write(raw)
PY
  if "$bin" convert "$dir" "$d/broken-$1.gguf" >/dev/null 2>"$d/log"; then bad "$1: a missing $2 was accepted"
  elif grep -q "'$2' is missing" "$d/log"; then ok "$1: missing scale: $(head -1 "$d/log")"
  else bad "$1: the message does not name $2: $(cat "$d/log")"; fi
}
break_scale fp8 model.layers.1.mlp.experts.3.up_proj.weight_scale_inv model.layers.1.mlp.experts.3.up_proj.weight_scale_inX
break_scale int4 model.layers.2.mlp.experts.5.down_proj.weight_scale model.layers.2.mlp.experts.5.down_proj.weight_scalX
exit $fail
