#!/usr/bin/env python3
"""Compare deltafin's and llama.cpp's teacher-forced logits.

Both files hold JSON lines {"pos": i, "top": [[id, logit], ...]} with the whole
vocabulary (--top 0 for the oracle, --top <n_vocab> for deltafin eval).
Reports top-1 agreement and, per position, the largest logit difference relative to
the reference's logit range. Positions whose difference exceeds --tol are counted as
"flipped" (a routing choice flipped on a near-tie, which random-weight MoE models
make chaotic). Exits 1 if top-1 agreement < --min-top1, or if more than --max-flipped
of positions exceed the tolerance.
"""
import argparse
import json
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            rows[o["pos"]] = {int(i): float(v) for i, v in o["top"]}
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("ref")
    ap.add_argument("--tol", type=float, default=1e-3, help="max |diff| / logit range")
    ap.add_argument("--min-top1", type=float, default=0.99)
    ap.add_argument("--max-flipped", type=float, default=0.01)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    ours, ref = load(a.ours), load(a.ref)
    if set(ours) != set(ref) or not ref:
        print(f"{a.label}: positions differ: ours {len(ours)}, ref {len(ref)}")
        return 1
    agree = 0
    flipped = 0
    worst = 0.0
    worst_ok = 0.0
    for pos in sorted(ref):
        r, o = ref[pos], ours[pos]
        if set(r) != set(o):
            print(f"{a.label}: position {pos}: vocabularies differ ({len(o)} vs {len(r)} ids)")
            return 1
        top_r = max(r, key=lambda i: (r[i], -i))
        top_o = max(o, key=lambda i: (o[i], -i))
        agree += top_r == top_o
        rng = max(r.values()) - min(r.values())
        d = max(abs(r[i] - o[i]) for i in r) / (rng if rng > 0 else 1.0)
        worst = max(worst, d)
        if d > a.tol:
            flipped += 1
        else:
            worst_ok = max(worst_ok, d)
    n = len(ref)
    top1 = agree / n
    frac = flipped / n
    ok = top1 >= a.min_top1 and frac <= a.max_flipped
    print(f"{a.label}: positions {n}, top-1 agreement {top1:.4f} (min {a.min_top1}), "
          f"over tolerance {flipped} ({frac:.4f}, max {a.max_flipped}), "
          f"max rel diff within tol {worst_ok:.2e} (tol {a.tol:.0e}), overall max {worst:.2e} -> "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
