#!/usr/bin/env bash
# The whole kjv-moe pipeline: text -> tokenizer -> training -> GGUF (F16, Q8_0,
# Q4_K) -> routing statistics and plots. Reproduces assets/models/ (see
# docs/TRAINED_MODEL.md); needs `scripts/setup --train` and a built build/deltafin.
#
#   tools/train/pipeline.sh WORK_DIR [train.py options...]
# Default training options are those of the committed model. Runs at nice 19 on one
# thread; the training step is bounded by --time-budget (seconds).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: pipeline.sh WORK_DIR [train.py options...]" >&2; exit 2; }
work=$1; shift
py() { nice -n 19 /usr/bin/python3 "$@"; }
bin=$root/build/deltafin
[ -x "$bin" ] || { echo "pipeline: build deltafin first (cmake --build build --target deltafin)" >&2; exit 1; }
mkdir -p "$work"
[ -f "$work/train.txt" ] || py "$here/data.py" --out "$work"
[ -f "$work/train.pt" ] || py "$here/prepare.py" --dir "$work" --vocab 3072
py "$here/train.py" --dir "$work" --seed 1234 --steps 240 --batch 8 --seq 256 --lr 4e-3 --warmup 20 \
  --eval-every 20 --ckpt-every 20 --time-budget 2640 "$@" | tee "$work/train.out"
py "$here/export.py" --ckpt "$work/ckpt.pt" --tokenizer "$work/tokenizer.json" --out "$work/kjv-moe-F16.gguf" --type F16
py "$here/export.py" --ckpt "$work/ckpt.pt" --tokenizer "$work/tokenizer.json" --out "$work/kjv-moe-F32.gguf" --type F32
py "$here/check_logits.py" --ckpt "$work/ckpt.pt" --tokenizer "$work/tokenizer.json" --gguf "$work/kjv-moe-F32.gguf" --deltafin "$bin"
for t in Q8_0 Q4_K; do "$bin" quantize "$work/kjv-moe-F16.gguf" "$work/kjv-moe-$t.gguf" --type "$t" --fallback Q8_0 --force; done
py "$here/plot_loss.py" "$work/log.jsonl" "$work/loss.png"
py "$here/routing_stats.py" --ckpt "$work/ckpt.pt" --tokenizer "$work/tokenizer.json" --text "$work/test.txt" \
  --json "$work/routing.json" --png "$work/routing.png"
