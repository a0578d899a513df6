"""Routing statistics of the trained model on held-out text, with a plot.

  python3 tools/train/routing_stats.py --ckpt WORK/ckpt.pt --tokenizer WORK/tokenizer.json \
      --text WORK/test.txt --json stats.json --png routing.png

Per MoE layer, over every token of the text (windows of the training context):
  top10_share  share of all routes taken by the most popular 10% of experts
               (uniform routing: 0.10)
  gini         Gini coefficient of the per-expert route counts (uniform: 0)
  reuse        mean fraction of a token's top-k experts also chosen for the
               previous token (independent uniform choice: k/E)
  next_recall  layer l+1's router (its ffn_norm, then its gate) applied to a state
               of layer l, top-k recall against what layer l+1 really picks:
               'mid'  = layer l's residual after attention (its MoE input),
               'out'  = layer l's output (layer l+1's input, before its attention)
               (chance: k/E)
"""
import argparse
import json

import numpy as np
import torch

import bpe
from model import Config, Model


@torch.no_grad()
def collect(model, ids, seq):
    """Runs windows of `seq` tokens; returns per layer: top-k ids [N, k], the MoE input
    residual [N, d] and the layer output [N, d]."""
    c = model.c
    sel = [[] for _ in range(c.n_layer)]
    mid = [[] for _ in range(c.n_layer)]
    out = [[] for _ in range(c.n_layer)]
    for s in range(0, len(ids) - 1, seq):
        w = torch.tensor([ids[s:s + seq]])
        T = w.shape[1]
        x = model.embed(w)
        for l, b in enumerate(model.blocks):
            x = x + b.attn(b.attn_norm(x), model.cos[:T], model.sin[:T], model.mask)
            mid[l].append(x[0].clone())
            _, top, _ = b.moe.route(b.ffn_norm(x)[0])
            sel[l].append(top)
            y, _ = b.moe(b.ffn_norm(x))
            x = x + y
            out[l].append(x[0].clone())
    cat = lambda L: [torch.cat(v) for v in L]
    return cat(sel), cat(mid), cat(out)


def overlap(a, b):
    """Mean |a_i ∩ b_i| / k over rows of two [N, k] id tensors."""
    k = a.shape[1]
    return float((a[:, :, None] == b[:, None, :]).any(-1).float().sum(-1).mean() / k)


def gini(counts):
    x = np.sort(np.asarray(counts, dtype=np.float64))
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1).dot(x) / (n * x.sum()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--json")
    ap.add_argument("--png")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ck = torch.load(a.ckpt, map_location="cpu")
    c = Config(**ck["config"])
    model = Model(c)
    model.load_state_dict(ck["model"])
    model.eval()
    tok = bpe.Tokenizer.load(a.tokenizer)
    ids = tok.encode(open(a.text).read())
    sel, mid, out = collect(model, ids, c.n_ctx)
    E, k = c.n_expert, c.n_used
    n_top = max(1, round(0.1 * E))
    layers = []
    for l in range(c.n_layer):
        counts = np.bincount(sel[l].reshape(-1).numpy(), minlength=E)
        r = {"layer": l, "counts": counts.tolist(),
             "top10_share": float(np.sort(counts)[::-1][:n_top].sum() / counts.sum()),
             "gini": gini(counts),
             "reuse": overlap(sel[l][1:], sel[l][:-1])}
        if l + 1 < c.n_layer:
            nb = model.blocks[l + 1]
            with torch.no_grad():
                r["next_recall_mid"] = overlap(nb.moe.route(nb.ffn_norm(mid[l]))[1], sel[l + 1])
                r["next_recall_out"] = overlap(nb.moe.route(nb.ffn_norm(out[l]))[1], sel[l + 1])
        layers.append(r)
    res = {"tokens": len(ids), "n_expert": E, "n_used": k, "chance_overlap": k / E, "layers": layers}
    for r in layers:
        extra = "" if "next_recall_mid" not in r else \
            f"  next-layer recall mid {r['next_recall_mid']:.3f} out {r['next_recall_out']:.3f}"
        print(f"layer {r['layer']}: top10% share {r['top10_share']:.3f}  gini {r['gini']:.3f}  "
              f"reuse {r['reuse']:.3f}{extra}")
    print(f"{len(ids)} tokens; chance overlap k/E = {k / E:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    if a.png:
        plot(res, a.png)


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    L = res["layers"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for r in L:
        c = np.sort(np.asarray(r["counts"], dtype=float))[::-1]
        ax1.plot(np.arange(1, len(c) + 1), c / c.sum(), marker=".", label=f"layer {r['layer']} (gini {r['gini']:.2f})")
    ax1.axhline(1 / res["n_expert"], color="gray", ls="--", lw=1, label="uniform")
    ax1.set_xlabel("expert rank")
    ax1.set_ylabel("share of routes")
    ax1.set_title("Expert popularity (held-out text)")
    ax1.legend(fontsize=8)
    x = np.arange(len(L))
    ax2.bar(x - 0.27, [r["reuse"] for r in L], 0.27, label="reuse vs previous token")
    ax2.bar(x, [r.get("next_recall_mid", np.nan) for r in L], 0.27, label="layer l+1 router on l's MoE input")
    ax2.bar(x + 0.27, [r.get("next_recall_out", np.nan) for r in L], 0.27, label="layer l+1 router on l's output")
    ax2.axhline(res["chance_overlap"], color="gray", ls="--", lw=1, label="chance k/E")
    ax2.set_xticks(x, [f"layer {r['layer']}" for r in L])
    ax2.set_ylim(0, 1.3)
    ax2.set_ylabel("fraction of top-k experts")
    ax2.set_title("Expert locality")
    ax2.legend(fontsize=8, loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
