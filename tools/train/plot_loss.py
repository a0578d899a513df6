"""Loss curve from train.py's log.jsonl -> PNG.

  python3 tools/train/plot_loss.py WORK/log.jsonl loss.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_loss.py LOG.jsonl OUT.png")
    recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    tok = [r["tokens"] / 1e6 for r in recs]
    loss = [r["loss"] for r in recs]
    smooth, acc = [], 0.0
    for n, v in enumerate(loss, 1):  # EMA with bias correction (no drag from the first value)
        acc = 0.9 * acc + 0.1 * v
        smooth.append(acc / (1 - 0.9 ** n))
    val = [(r["tokens"] / 1e6, r["val"]) for r in recs if "val" in r]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(tok, loss, color="tab:blue", alpha=0.3, lw=1)
    ax.plot(tok, smooth, color="tab:blue", label="train (EMA 0.9)")
    ax.plot([v[0] for v in val], [v[1] for v in val], "o-", color="tab:orange", label="validation (held-out chapters)")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(min(loss + [v[1] for v in val]) - 0.2, min(8.5, max(loss) + 0.2))
    ax.grid(alpha=0.3)
    ax.legend()
    last = recs[-1]
    ax.set_title(f"kjv-moe: {last['step']} steps, {last['time'] / 60:.0f} min on 1 CPU thread")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
