#!/usr/bin/env bash
# A Hugging Face folder runs as the GGUF it converts to, exactly. For a tiny
# qwen3moe in BF16 and in F32, `synth --format hf` writes a folder laid out as
# published checkpoints are (several shards with a weight_map, experts out of id
# order, a vision tower to skip, a nested text_config); then:
#   - `convert` writes the folder's GGUF view; its tensor data equals the GGUF synth
#     writes for the same spec (byte for byte, the norms and router BF16-rounded
#     where the folder holds them in BF16);
#   - teacher-forced logits (`eval`, every vocabulary entry) and greedy text (`run`)
#     from the folder equal those from the converted GGUF bit for bit, with every
#     expert resident and with experts streamed (--mem) through the store;
#   - `inspect FOLDER` reports the inventory and the header bytes it read;
#   - the converted BF16 GGUF matches llama.cpp through the oracle harness
#     (tests/oracle: llama_ref.mjs + compare.py), when the oracle is installed;
#   - generation_config.json's sampling (temperature, top_p, top_k) becomes the
#     model's defaults (GGUF general.sampling.*) for the flags a run leaves out, in
#     the folder and in the GGUF it converts to, and serve's requests; do_sample false
#     is greedy;
#   - a truncated shard and a broken shard header fail naming the shard.
# usage: hf_folder.sh DELTAFIN SOURCE_DIR BUILD_DIR
set -u
bin=$1 src=$2 build=$3
d=$build/hf_folder
rm -rf "$d" && mkdir -p "$d"
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# Room for the core and 2 (BF16) or 1 (F32) of the 16 experts beside the default reserve.
declare -A MEM=([BF16]=68M [F32]=70M)
IDS=$(python3 -c "import random; r=random.Random(5); print(','.join(str(r.randrange(256)) for _ in range(24)))")

# An output folder two directories down that do not exist yet: synth creates them.
rm -rf "$d/new"
if "$bin" synth --preset tiny --arch qwen3moe --format hf -o "$d/new/dirs/hf" 2>"$d/log" && [ -f "$d/new/dirs/hf/config.json" ]; then
  ok "synth --format hf creates missing parent directories"
else
  bad "synth --format hf into new directories: $(cat "$d/log")"
fi

for T in BF16 F32; do
  hf=$d/hf-$T conv=$d/conv-$T.gguf ref=$d/synth-$T.gguf
  "$bin" synth --preset tiny --arch qwen3moe --type $T --expert-type $T --seed 3 --format hf -o "$hf" 2>"$d/log" ||
    { bad "$T: synth --format hf: $(cat "$d/log")"; continue; }
  "$bin" synth --preset tiny --arch qwen3moe --type $T --expert-type $T --seed 3 -o "$ref" 2>"$d/log" ||
    { bad "$T: synth: $(cat "$d/log")"; continue; }
  # The folder's layout: shards, index, a skipped tower, experts out of id order.
  python3 - "$hf" <<'PY' && ok "$T: folder layout" || bad "$T: folder layout"
import json, struct, sys, os, re
d = sys.argv[1]
ix = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
shards = sorted(set(ix.values()))
assert len(shards) >= 2, shards
assert any(k.startswith("vision_tower.") for k in ix)
assert "text_config" in json.load(open(os.path.join(d, "config.json")))
order = []
for s in shards:
    raw = open(os.path.join(d, s), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    for k, v in sorted(((k, v) for k, v in h.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
        m = re.match(r"model\.layers\.0\.mlp\.experts\.(\d+)\.gate_proj", k)
        if m: order.append(int(m.group(1)))
assert sorted(order) == list(range(len(order))) and order != sorted(order), order
PY
  "$bin" convert "$hf" "$conv" 2>"$d/log" || { bad "$T: convert: $(cat "$d/log")"; continue; }
  if "$bin" convert "$hf" "$conv" 2>"$d/log"; then bad "$T: convert overwrote without --force"
  elif "$bin" convert --force "$hf" "$conv" 2>>"$d/log"; then ok "$T: convert, --force"
  else bad "$T: convert --force: $(cat "$d/log")"; fi
  # Tensor data against synth's GGUF.
  python3 "$src/tests/e2e/gguf_tensors_equal.py" "$conv" "$ref" && ok "$T: converted tensors equal synth's" || bad "$T: converted tensors differ from synth's"
  # Logits and text: folder == converted GGUF, bit for bit.
  "$bin" eval -m "$hf" --ids "$IDS" --top 100000 --all-positions >"$d/eval-hf-$T" 2>"$d/log" || bad "$T: eval folder: $(cat "$d/log")"
  "$bin" eval -m "$conv" --ids "$IDS" --top 100000 --all-positions >"$d/eval-conv-$T" 2>"$d/log" || bad "$T: eval gguf: $(cat "$d/log")"
  if [ -s "$d/eval-hf-$T" ] && cmp -s "$d/eval-hf-$T" "$d/eval-conv-$T"; then ok "$T: eval logits identical"
  else bad "$T: eval logits differ"; fi
  "$bin" eval -m "$hf" --ids "$IDS" --top 100000 --all-positions --mem "${MEM[$T]}" >"$d/eval-hfs-$T" 2>"$d/log" || bad "$T: eval folder --mem: $(cat "$d/log")"
  if cmp -s "$d/eval-hfs-$T" "$d/eval-conv-$T"; then ok "$T: eval logits identical with streamed experts"
  else bad "$T: streamed eval logits differ"; fi
  for m in "$hf" "$conv"; do
    "$bin" run -m "$m" -p "the cat" -n 12 --temp 0 --seed 1 2>/dev/null >"$d/run-$T-$(basename "$m")"
  done
  if [ -s "$d/run-$T-hf-$T" ] && cmp -s "$d/run-$T-hf-$T" "$d/run-$T-conv-$T.gguf"; then ok "$T: run text identical"
  else bad "$T: run text differs"; fi
done

# inspect: the inventory from the headers alone.
"$bin" inspect "$d/hf-BF16" >"$d/inspect" 2>&1 || bad "inspect: $(cat "$d/inspect")"
grep -q "Hugging Face folder, model_type qwen3_moe" "$d/inspect" && grep -q "1 skipped" "$d/inspect" &&
  grep -q "^headers read: " "$d/inspect" && grep -q "^architecture:   qwen3moe (supported)" "$d/inspect" &&
  ok "inspect" || bad "inspect: $(cat "$d/inspect")"

# llama.cpp on the converted GGUF, through the oracle harness.
oracle=""
for o in "${DELTAFIN_ORACLE_DIR:-}" "$build/oracle" "$src/build/oracle"; do
  if [ -n "$o" ] && [ -d "$o/node_modules/node-llama-cpp" ]; then oracle=$o; break; fi
done
if [ -n "$oracle" ] && command -v node >/dev/null; then
  if node "$src/tests/oracle/llama_ref.mjs" --oracle-dir "$oracle" --threads 1 --model "$d/conv-BF16.gguf" \
      --ids "$IDS" --top 0 --mode batch --ctx 128 >"$d/oracle" 2>"$d/log" &&
     python3 "$src/tests/oracle/compare.py" "$d/eval-hf-BF16" "$d/oracle" --label hf-BF16 --tol 2e-2 \
       --min-top1 0.99 --max-flipped 0.05; then ok "llama.cpp agrees on the converted BF16 GGUF"
  else bad "llama.cpp on the converted GGUF: $(tail -5 "$d/log")"; fi
else
  echo "note: the llama.cpp oracle is not installed; that comparison is skipped"
fi

# generation_config.json's sampling defaults, from the folder and from its conversion.
cp -r "$d/hf-BF16" "$d/gen"
python3 - "$d/gen/generation_config.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
g.update({"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20})
json.dump(g, open(sys.argv[1], "w"))
PY
"$bin" convert "$d/gen" "$d/gen.gguf" >/dev/null 2>"$d/log" || bad "convert with sampling defaults: $(cat "$d/log")"
for m in "$d/gen" "$d/gen.gguf"; do
  "$bin" run -m "$m" -p hi -n 2 --top-k 5 --seed 1 >/dev/null 2>"$d/log"
  if grep -q "sampling: the model's defaults --temp 0.6 --top-p 0.9 " "$d/log" && ! grep -q -- "--top-k 20" "$d/log"
  then ok "$(basename "$m"): generation_config's sampling is the default, a flag overrides it"
  else bad "$(basename "$m"): sampling defaults: $(cat "$d/log")"; fi
done
"$bin" serve -m "$d/gen.gguf" --port 0 >"$d/serve.out" 2>&1 &
spid=$!
for _ in $(seq 300); do grep -q "listening on" "$d/serve.out" && break; sleep 0.1; done
kill $spid 2>/dev/null; wait $spid 2>/dev/null
grep -q "requests that leave them out get the model's sampling: --temp 0.6 --top-k 20 --top-p 0.9" "$d/serve.out" &&
  ok "serve: requests get the model's sampling defaults" || bad "serve sampling defaults: $(cat "$d/serve.out")"
"$bin" run -m "$d/hf-BF16" -p hi -n 2 >/dev/null 2>"$d/log"
grep -q "sampling: the model's defaults --temp 0 " "$d/log" && ok "do_sample false: greedy by default" ||
  bad "do_sample false: $(cat "$d/log")"

# Damaged folders fail naming the shard.
cp -r "$d/hf-BF16" "$d/trunc"
shard=$(ls "$d/trunc" | grep -m1 'safetensors$')
truncate -s -100 "$d/trunc/$shard"
if "$bin" eval -m "$d/trunc" --ids 1,2 2>"$d/log" >/dev/null; then bad "truncated shard accepted"
elif grep -q "$shard" "$d/log"; then ok "truncated shard: $(head -1 "$d/log")"
else bad "truncated shard message does not name $shard: $(cat "$d/log")"; fi
cp -r "$d/hf-BF16" "$d/broken"
printf '\x10' | dd of="$d/broken/$shard" bs=1 seek=8 conv=notrunc 2>/dev/null
if "$bin" inspect "$d/broken" >"$d/log" 2>&1; then bad "broken header accepted"
elif grep -q "$shard" "$d/log"; then ok "broken header: $(grep -m1 error "$d/log")"
else bad "broken header message does not name $shard: $(cat "$d/log")"; fi
exit $fail
