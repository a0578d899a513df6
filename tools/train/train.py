"""Trains the qwen3moe-shaped model on token ids from prepare.py.

  nice -n 19 python3 tools/train/train.py --dir WORK --steps 3000 --time-budget 2700

Reproducible: one seed fixes init and batch order; one thread. The LR schedule
depends on --steps only (warmup, cosine to 10%); --time-budget is a safety stop
that saves and exits early. Writes WORK/ckpt.pt (every --ckpt-every steps and at
the end) and appends one JSON line per logged step to WORK/log.jsonl.
"""
import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from model import Config, Model


def batches(ids, batch, seq, gen):
    n = ids.numel() - seq - 1
    while True:
        starts = torch.randint(0, n, (batch,), generator=gen)
        x = torch.stack([ids[s:s + seq + 1] for s in starts.tolist()]).long()
        yield x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, ids, seq, max_windows=24):
    model.eval()
    n = min(max_windows, (ids.numel() - 1) // seq)
    total, count = 0.0, 0
    for i in range(0, n, 8):
        xs = torch.stack([ids[j * seq:j * seq + seq + 1] for j in range(i, min(n, i + 8))]).long()
        logits, _ = model(xs[:, :-1])
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xs[:, 1:].reshape(-1),
                                 reduction="sum").item()
        count += xs[:, 1:].numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--time-budget", type=float, default=2700, help="seconds; stop (and save) after this")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=1)
    for f in dataclasses.fields(Config):
        if f.name not in ("n_vocab", "n_ctx"):
            ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    d = Path(a.dir)
    train_ids, val_ids = torch.load(d / "train.pt"), torch.load(d / "val.pt")
    with open(d / "tokenizer.json") as f:
        n_vocab = 257 + len(json.load(f)["merges"])
    cfg = Config(n_vocab=n_vocab, n_ctx=a.seq,
                 **{f.name: getattr(a, f.name) for f in dataclasses.fields(Config) if f.name not in ("n_vocab", "n_ctx")})
    model = Model(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"config {cfg}\nparams {n_params / 1e6:.2f}M, train tokens {train_ids.numel()}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(a.seed)
    data = batches(train_ids, a.batch, a.seq, gen)
    log = open(d / "log.jsonl", "w")

    def save(step):
        torch.save({"config": dataclasses.asdict(cfg), "model": model.state_dict(), "step": step,
                    "args": vars(a)}, d / "ckpt.tmp")
        (d / "ckpt.tmp").replace(d / "ckpt.pt")

    t0 = time.time()
    step = 0
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = next(data)
        logits, aux = model(x)
        ce = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), y.reshape(-1))
        loss = ce + a.aux_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        elapsed = time.time() - t0
        rec = {"step": step, "loss": ce.item(), "aux": float(aux), "lr": lr, "time": elapsed,
               "tokens": step * a.batch * a.seq}
        if step % a.eval_every == 0 or step == a.steps:
            rec["val"] = evaluate(model, val_ids, a.seq)
            print(f"step {step} loss {ce.item():.3f} val {rec['val']:.3f} aux {float(aux):.3f} "
                  f"{rec['tokens'] / elapsed:.0f} tok/s {elapsed:.0f}s", flush=True)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        if step % a.ckpt_every == 0:
            save(step)
        if elapsed > a.time_budget:
            print(f"time budget reached at step {step}", flush=True)
            break
    save(step)
    print(f"done: {step} steps in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
