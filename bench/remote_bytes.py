#!/usr/bin/env python3
"""What one remote run fetched against what it needed (bench/remote_bench.sh).

usage: remote_bytes.py MODEL RANGES_LOG FIRST_LINE CACHE_MODEL_DIR RUN_STDERR WALL_S RATE_MBIT

MODEL is the served .gguf file or Hugging Face folder; RANGES_LOG nginx's log of
'$request $http_range $status $body_bytes_sent' lines (tests/remote/nginx.sh), of
which lines FIRST_LINE.. are this run's; CACHE_MODEL_DIR the model's directory in
the disk cache (its experts/L-E entries are the experts the run touched).

Needed = the metadata (GGUF header; a folder's small files and safetensors headers)
+ the core as stored at the origin (every tensor but the routed experts, and for a
folder but the vision tower and projector it never reads) + the touched experts'
bytes. Prints one 'key=value' line per figure, read by remote_bench.sh.
"""
import json
import os
import re
import struct
import sys

EXPERT_HF = re.compile(r"(?:^|\.)layers\.(\d+)\..*\bexperts\.(\d+)\.")
SKIPPED_HF = ("vision_tower.", "mm_projector.", "multi_modal_projector.")


def folder_layout(d):
    """(metadata bytes, core bytes, {(layer, expert): bytes}) of a safetensors folder."""
    meta = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if not f.endswith(".safetensors"))
    core, experts = 0, {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        meta += 8 + n
        for name, t in h.items():
            if name == "__metadata__" or name.startswith(SKIPPED_HF):
                continue
            b = t["data_offsets"][1] - t["data_offsets"][0]
            m = EXPERT_HF.search(name)
            if m:
                key = (int(m[1]), int(m[2]))
                experts[key] = experts.get(key, 0) + b
            else:
                core += b
    return meta, core, experts


def gguf_layout(path):
    """The same for a GGUF file: a stacked expert tensor's bytes split evenly by expert."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
    from gguf_patch import Gguf
    with open(path, "rb") as fh:
        g = Gguf(fh.read(64 << 20))
    size = os.path.getsize(path)
    ts = sorted(g.tensors.items(), key=lambda kv: kv[1][3])
    core, experts = 0, {}
    for i, (name, (at, nd, _ty, off)) in enumerate(ts):
        end = ts[i + 1][1][3] if i + 1 < len(ts) else size - g.data_start
        b = end - off  # with the alignment padding after it
        m = re.match(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$", name)
        if not m:
            core += b
            continue
        n_expert = struct.unpack_from("<%dQ" % nd, g.d, at + 4)[nd - 1]
        for e in range(n_expert):
            experts[(int(m[1]), e)] = experts.get((int(m[1]), e), 0) + b // n_expert
    return g.data_start, core, experts


def main():
    model, log, first, cache_dir, err, wall, rate = sys.argv[1:8]
    meta, core, experts = folder_layout(model) if os.path.isdir(model) else gguf_layout(model)
    touched = [tuple(int(x) for x in e.split("-")) for e in os.listdir(os.path.join(cache_dir, "experts"))
               if re.fullmatch(r"\d+-\d+", e)]
    need = meta + core + sum(experts[k] for k in touched)
    lines = open(log).read().splitlines()[int(first):]
    fetched = sum(int(l.rsplit(" ", 1)[1]) for l in lines if l.rsplit(" ", 1)[1].isdigit())
    t = open(err).read()
    m = re.search(r"(\d+) fetched from the origin \(([\d.]+) MiB in (\d+) range requests\)", t)
    n_exp, exp_req = (int(m[1]), int(m[3])) if m else (0, 0)
    net = re.search(r"network: (\d+) requests.*?([\d.]+) MiB received, ([\d.]+) MiB/s while busy \(([\d.]+) s busy\)", t)
    ttft = re.search(r"time to first token: ([\d.]+)", t)
    pre = re.search(r"prompt: (\d+) tokens in ([\d.]+) s", t)
    dec = re.search(r"decode: (\d+) tokens in ([\d.]+) s", t)
    mib = 1 << 20
    rate_mibs = float(rate) * 1e6 / 8 / mib
    print(f"requests={len(lines)}")
    print(f"fetched_mib={fetched / mib:.1f}")
    print(f"needed_mib={need / mib:.1f}")
    print(f"overhead_pct={100 * (fetched / need - 1):.1f}")
    print(f"meta_mib={meta / mib:.2f} core_mib={core / mib:.1f} experts_touched={len(touched)}/{len(experts)}")
    print(f"expert_requests={exp_req} experts_fetched={n_exp} requests_per_expert={exp_req / max(n_exp, 1):.2f}")
    if net:
        print(f"busy_s={float(net[4]):.2f} net_mibs={float(net[3]):.1f} link_pct={100 * float(net[3]) / rate_mibs:.0f}")
    wall = float(wall)
    if ttft and pre and dec:
        # Load (headers, core, setup) = the run's wall time less prompt and decode.
        load = wall - float(pre[2]) - float(dec[2])
        print(f"wall_s={wall:.2f} load_s={load:.2f} ttft_s={float(ttft[1]):.2f} first_token_s={load + float(ttft[1]):.2f}")
    print(f"fetched_over_wall_pct={100 * fetched / mib / wall / rate_mibs:.0f}")


if __name__ == "__main__":
    main()
