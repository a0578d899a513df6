# The RAM-cap sweep of bench/stream_vs_llama.sh --sweep: decode tokens/s of deltafin
# and llama.cpp against the cap -> sweep.csv and sweep.png.
# usage: plot_stream_sweep.py RESULTS.jsonl OUTDIR MODEL_NAME
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [json.loads(l) for l in open(sys.argv[1])]
pts = {}
for r in rows:
    if r.get("test") != "tg": continue
    eng, cap = ("deltafin" if r["label"].startswith("sweep-df-") else "llama.cpp"), r["label"].split("-")[-1]
    pts.setdefault(eng, []).append((cap, r["tokens_per_second"], r.get("hit_rate")))
with open(sys.argv[2] + "/sweep.csv", "w") as f:
    f.write("engine,cap,tokens_per_second,hit_rate\n")
    for eng, v in pts.items():
        for cap, t, h in v: f.write(f"{eng},{cap},{t:.3f},{'' if h is None else f'{h:.3f}'}\n")
print(open(sys.argv[2] + "/sweep.csv").read())
num = lambda c: float(c[:-1]) * {"K": 2**10, "M": 2**20, "G": 2**30}[c[-1]]
plt.figure(figsize=(6.4, 4))
for eng, v in pts.items():
    v.sort(key=lambda p: num(p[0]))
    plt.plot([num(c) / 2**30 for c, _, _ in v], [t for _, t, _ in v], marker="o", label=eng)
size = next((r["model_bytes"] for r in rows if "model_bytes" in r), None)
if size: plt.axvline(size / 2**30, color="gray", ls="--", lw=1, label="model size")
plt.xscale("log"); plt.yscale("log")
plt.xlabel("RAM cap (GiB, cgroup v1 limit)"); plt.ylabel("decode tokens/s")
plt.title(f"{sys.argv[3]}: decode under a RAM cap")
plt.legend(); plt.grid(True, which="both", alpha=0.3); plt.tight_layout()
plt.savefig(sys.argv[2] + "/sweep.png", dpi=110)
