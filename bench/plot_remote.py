#!/usr/bin/env python3
"""Plots tokens/s per prompt as the disk cache fills (bench/remote_bench.sh)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
limit = sys.argv[3] if len(sys.argv) > 3 else "?"
fig, ax = plt.subplots(figsize=(8, 4.5))
for p, style in (("cold", "o-"), ("warm", "s--")):
    r = [x for x in rows if x["pass"] == p]
    ax.plot([int(x["prompt"]) for x in r], [float(x["total_tok_s"]) for x in r], style,
            label=f"{p} pass" + (" (cache filling from the origin)" if p == "cold" else " (all from disk cache)"))
ax2 = ax.twinx()
r = [x for x in rows if x["pass"] == "cold"]
ax2.bar([int(x["prompt"]) for x in r], [float(x["fetched_mib"]) for x in r], alpha=0.2, color="gray")
ax2.set_ylabel("MiB fetched from the origin (bars)")
ax.set_xlabel("prompt in the sequence")
ax.set_ylabel("tokens/s (prompt + 24 generated)")
ax.set_title(f"deltafin: a remote model gets faster with use (link {limit} MB/s)")
ax.legend(loc="upper left")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
