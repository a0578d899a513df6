"""Compares the torch model's logits with `deltafin eval` on the exported GGUF.

  python3 tools/train/check_logits.py --ckpt WORK/ckpt.pt --tokenizer WORK/tokenizer.json \
      --gguf model-F32.gguf --deltafin build/deltafin [--tol 1e-3]
Exits 1 if a top-10 logit differs by more than --tol (relative to the logit range)
or the top-1 token differs at any position.
"""
import argparse
import json
import subprocess
import sys

import torch

import bpe
from model import Config, Model

PROMPT = "In the beginning God created the heaven and the earth. And the LORD spake unto Moses, saying,"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--deltafin", required=True)
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ck = torch.load(a.ckpt, map_location="cpu")
    model = Model(Config(**ck["config"]))
    model.load_state_dict(ck["model"])
    model.eval()
    tok = bpe.Tokenizer.load(a.tokenizer)
    ids = tok.encode(PROMPT)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0][0]
    out = subprocess.run([a.deltafin, "eval", "-m", a.gguf, "--ids", ",".join(map(str, ids)), "--top", "10",
                          "--all-positions", "-t", "1"], check=True, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if len(rows) != len(ids):
        sys.exit(f"deltafin eval printed {len(rows)} positions for {len(ids)} tokens")
    worst, top_ok = 0.0, True
    for r in rows:
        ref = logits[r["pos"]]
        scale = float(ref.max() - ref.min())
        for tid, val in r["top"]:
            worst = max(worst, abs(val - float(ref[tid])) / scale)
        top_ok &= r["top"][0][0] == int(ref.argmax())
    print(f"{len(ids)} positions: max |deltafin - torch| / logit range = {worst:.2e}, top-1 agree: {top_ok}")
    sys.exit(0 if worst <= a.tol and top_ok else 1)


if __name__ == "__main__":
    main()
