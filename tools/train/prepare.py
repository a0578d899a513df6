"""Text -> tokenizer + token ids. Writes DIR/tokenizer.json and DIR/{train,val}.pt.

  python3 tools/train/prepare.py --dir WORK [--vocab 3072]
(expects WORK/{train,val}.txt from data.py)
"""
import argparse
import time
from pathlib import Path

import torch

import bpe


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--vocab", type=int, default=3072, help="total tokens incl. 256 bytes and EOT")
    a = ap.parse_args()
    d = Path(a.dir)
    train_text = (d / "train.txt").read_text()
    t0 = time.time()
    tok = bpe.Tokenizer(bpe.train(train_text, a.vocab))
    tok.save(d / "tokenizer.json")
    print(f"tokenizer: {len(tok.tokens)} tokens, trained in {time.time() - t0:.0f}s")
    for name in ("train", "val"):
        text = train_text if name == "train" else (d / f"{name}.txt").read_text()
        ids = tok.encode(text)
        assert tok.decode(ids) == text, f"{name}: encode/decode round trip failed"
        torch.save(torch.tensor(ids, dtype=torch.int16 if len(tok.tokens) < 32768 else torch.int32),
                   d / f"{name}.pt")
        print(f"{name}: {len(ids)} tokens ({len(text) / len(ids):.2f} chars/token)")


if __name__ == "__main__":
    main()
