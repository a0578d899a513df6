#!/usr/bin/env python3
"""selftest.py WORK_DIR: holds check_convert.py to its word without deltafin.

Writes a small Hugging Face folder (two shards: BF16, F32, FP8 with partial 128x128
blocks and a NaN, INT4 pack-quantized, compressed-tensors MXFP4 experts, an MLA
kv_b split by reshape/slice/transpose, K3's fused res_norm * res_proj and
-exp(A_log), a vision
tensor to skip) and a GGUF converted from it here, by arithmetic that differs from the
checker's (BF16 rounding by the bit trick, MXFP4 blocks assembled by hand). The
checker must pass that GGUF, and fail each of a set of single defects: one BF16 bit,
MXFP4 nibbles swapped, an MLA split from the wrong rows, an HF tensor left out, a tensor the map does not explain, and
F32 where a BF16 rounding was due.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_gguf(path, tensors):
    """tensors: name -> (gguf type, numpy shape, raw bytes)."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + s("general.architecture") + struct.pack("<I", 8) + s("test")
    data, infos = b"", b""
    for name, (gtype, shape, raw) in tensors.items():
        data += b"\0" * (-len(data) % 32)
        infos += s(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *reversed(shape))
        infos += struct.pack("<IQ", gtype, len(data))
        data += raw
    out += infos
    out += b"\0" * (-len(out) % 32)
    with open(path, "wb") as f:
        f.write(out + data)


def bf16_bits(x):  # ggml's rounding, by the usual bit trick
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def e4m3(code):
    s, e, m = code >> 7, (code >> 3) & 15, code & 7
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * np.exp2(e.astype(np.float64) - 10))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v)


def build(work):
    hf = os.path.join(work, "hf")
    os.makedirs(hf, exist_ok=True)
    emb = rng.standard_normal((16, 64)).astype(np.float32)
    emb_bf = bf16_bits(emb)
    norm = rng.standard_normal(64).astype(np.float32)
    # FP8 130 x 200: block rows 128 + 2, block columns 128 + 72; one NaN code.
    w8 = rng.integers(0, 256, (130, 200)).astype(np.uint8)
    w8[(w8 & 0x7F) == 0x7F] = 0x10
    w8[5, 7] = 0x7F
    s8 = np.array([[0.01, 3.0], [1e-3, 0.37]], dtype=np.float32)
    # INT4 4 x 64 in groups of 32, BF16 scales with low bits set.
    q4 = rng.integers(0, 16, (4, 64))
    words = np.zeros((4, 8), dtype=np.uint32)
    for k in range(8):
        words |= (q4[:, k::8].astype(np.uint32) << np.uint32(4 * k))
    sc4 = bf16_bits(rng.uniform(0.001, 0.1, (4, 2)).astype(np.float32))
    # MXFP4 experts: 3 x [8, 64].
    mx_packed = rng.integers(0, 256, (3, 8, 32)).astype(np.uint8)
    mx_scale = rng.integers(100, 140, (3, 8, 2)).astype(np.uint8)

    shard1 = {
        "model.embed_tokens.weight": ("BF16", emb_bf),
        "model.norm.weight": ("F32", norm),
        "model.layers.0.proj8.weight": ("F8_E4M3", w8),
        "model.layers.0.proj8.weight_scale_inv": ("F32", s8),
        "vision_tower.patch.weight": ("BF16", emb_bf[:2]),
    }
    # An MLA kv_b [heads * (nope + v), kv_lora] split as llama.cpp splits it.
    kvb = bf16_bits(rng.standard_normal((2 * 5, 4)).astype(np.float32))
    shard1["model.layers.0.self_attn.kv_b_proj.weight"] = ("BF16", kvb)
    # Kimi K3's attention-residual score (norm * proj, fused) and KDA's A_log.
    res_norm = bf16_bits(rng.standard_normal(64).astype(np.float32))
    res_proj = bf16_bits(rng.standard_normal((1, 64)).astype(np.float32))
    a_log = rng.uniform(-3, 3, 8).astype(np.float32)
    shard1["model.layers.0.mlp_res_norm.weight"] = ("BF16", res_norm)
    shard1["model.layers.0.mlp_res_proj.weight"] = ("BF16", res_proj)
    shard1["model.layers.0.self_attn.A_log"] = ("F32", a_log)
    shard2 = {
        "model.layers.0.proj4.weight_packed": ("I32", words.view(np.int32)),
        "model.layers.0.proj4.weight_scale": ("BF16", sc4),
        "model.layers.0.proj4.weight_shape": ("I64", np.array([4, 64], dtype=np.int64)),
    }
    for e in range(3):
        shard2[f"model.layers.0.experts.{e}.w1.weight_packed"] = ("U8", mx_packed[e])
        shard2[f"model.layers.0.experts.{e}.w1.weight_scale"] = ("U8", mx_scale[e])
    files = {"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}
    wm = {}
    for fname, ts in files.items():
        write_safetensors(os.path.join(hf, fname), ts)
        wm.update({n: fname for n in ts})
    with open(os.path.join(hf, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump({"architectures": ["Test"], "num_key_value_heads": 2, "qk_nope_head_dim": 3,
                   "v_head_dim": 2, "kv_lora_rank": 4, "quantization_config": {
            "quant_method": "fp8", "weight_block_size": [128, 128]}}, f)

    # The GGUF, converted here.
    p8 = (e4m3(w8.astype(np.int64)) * np.repeat(np.repeat(s8.astype(np.float64), 128, 0), 128, 1)[:130, :200])
    q4v = (q4 - 8) * np.repeat((sc4.astype(np.uint32) << 16).view(np.float32), 32, axis=1)
    blocks = np.empty((3, 8, 2, 17), dtype=np.uint8)
    for e in range(3):
        for r in range(8):
            for b in range(2):
                p = mx_packed[e, r, b * 16:(b + 1) * 16]
                code = lambda i: (p[i // 2] >> (4 * (i % 2))) & 15
                blocks[e, r, b, 0] = mx_scale[e, r, b]
                for j in range(16):
                    blocks[e, r, b, 1 + j] = code(j) | (code(j + 16) << 4)
    gg = {
        "token_embd.weight": (30, (16, 64), emb_bf.tobytes()),
        "output_norm.weight": (0, (64,), norm.tobytes()),
        "blk.0.proj8.weight": (30, (130, 200), bf16_bits(p8.astype(np.float32)).tobytes()),
        "blk.0.proj4.weight": (30, (4, 64), bf16_bits(q4v.astype(np.float32)).tobytes()),
        "blk.0.ffn_gate_exps.weight": (39, (3, 8, 64), blocks.tobytes()),
        "blk.0.attn_k_b.weight": (30, (2, 4, 3), np.ascontiguousarray(kvb.reshape(2, 5, 4)[:, :3, :].transpose(0, 2, 1)).tobytes()),
        "blk.0.attn_v_b.weight": (30, (2, 2, 4), np.ascontiguousarray(kvb.reshape(2, 5, 4)[:, 3:, :]).tobytes()),
    }
    f32 = lambda b: (b.astype(np.uint32) << 16).view(np.float32)
    gg["blk.0.ffn_res_score.weight"] = (0, (64,), (f32(res_norm) * f32(res_proj).reshape(64)).tobytes())
    gg["blk.0.ssm_a"] = (0, (8,), (-np.exp(a_log.astype(np.float64))).astype(np.float32).tobytes())
    kv = ["reshape", ["num_key_value_heads", "qk_nope_head_dim + v_head_dim", "kv_lora_rank"]]
    nmap = {
        "tensors": [
            {"gguf": "token_embd.weight", "hf": "model.embed_tokens.weight"},
            {"gguf": "output_norm.weight", "hf": "model.norm.weight"},
            {"gguf": "blk.{L}.proj8.weight", "hf": "model.layers.{L}.proj8.weight"},
            {"gguf": "blk.{L}.proj4.weight", "hf": "model.layers.{L}.proj4.weight"},
            {"gguf": "blk.{L}.ffn_gate_exps.weight", "hf": "model.layers.{L}.experts.{E}.w1.weight"},
            {"gguf": "blk.{L}.attn_k_b.weight", "hf": "model.layers.{L}.self_attn.kv_b_proj.weight",
             "ops": [kv, ["slice", 1, 0, "qk_nope_head_dim"], ["transpose", [0, 2, 1]]]},
            {"gguf": "blk.{L}.attn_v_b.weight", "hf": "model.layers.{L}.self_attn.kv_b_proj.weight",
             "ops": [kv, ["slice", 1, "qk_nope_head_dim", "qk_nope_head_dim + v_head_dim"]]},
            {"gguf": "blk.{L}.ffn_res_score.weight", "hf": "model.layers.{L}.mlp_res_norm.weight",
             "mul": "model.layers.{L}.mlp_res_proj.weight"},
            {"gguf": "blk.{L}.ssm_a", "hf": "model.layers.{L}.self_attn.A_log", "fn": "neg_exp"},
        ],
        "skip_hf": [r"^vision_tower\."],
    }
    return hf, gg, nmap


def run(work, name, hf, gg, nmap, want_ok):
    gpath, mpath = os.path.join(work, name + ".gguf"), os.path.join(work, name + ".json")
    write_gguf(gpath, gg)
    with open(mpath, "w") as f:
        json.dump(nmap, f)
    r = subprocess.run([sys.executable, os.path.join(HERE, "check_convert.py"), hf, gpath, mpath],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok != want_ok:
        print(f"selftest {name}: checker {'passed' if ok else 'failed'}, want {'pass' if want_ok else 'fail'}\n"
              + r.stdout + r.stderr)
        return False
    print(f"selftest {name}: {'passed' if ok else 'failed'} as it should")
    return True


def main():
    work = sys.argv[1]
    hf, gg, nmap = build(work)
    good = run(work, "good", hf, gg, nmap, True)

    def defect(name, change):
        g, m = dict(gg), json.loads(json.dumps(nmap))
        change(g, m)
        return run(work, name, hf, g, m, False)

    def flip_bf16(g, m):
        t, shape, raw = g["blk.0.proj8.weight"]
        b = bytearray(raw)
        b[2 * (200 * 129 + 150)] ^= 1  # the lowest mantissa bit of one element of the edge block
        g["blk.0.proj8.weight"] = (t, shape, bytes(b))

    def swap_nibbles(g, m):
        t, shape, raw = g["blk.0.ffn_gate_exps.weight"]
        a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 17).copy()
        a[:, 1:] = (a[:, 1:] >> 4) | (a[:, 1:] << 4)
        g["blk.0.ffn_gate_exps.weight"] = (t, shape, a.tobytes())

    def drop(g, m):
        del g["blk.0.proj4.weight"]
        m["tensors"] = [e for e in m["tensors"] if "proj4" not in e["gguf"]]

    def unexplained(g, m):
        g["blk.0.extra.weight"] = (0, (4,), np.zeros(4, dtype=np.float32).tobytes())

    def f32_not_bf16(g, m):
        t, shape, raw = g["blk.0.proj4.weight"]
        v = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        g["blk.0.proj4.weight"] = (0, shape, (v * np.float32(1.0000001)).astype(np.float32).tobytes())

    def v_from_k_rows(g, m):  # v_b taken from the wrong rows of kv_b
        t, shape, raw = g["blk.0.attn_v_b.weight"]
        kvb = np.frombuffer(g["token_embd.weight"][2], dtype=np.uint16)[:16]
        g["blk.0.attn_v_b.weight"] = (t, shape, kvb.tobytes())

    def a_off(g, m):  # four ulps off
        t, shape, raw = g["blk.0.ssm_a"]
        g["blk.0.ssm_a"] = (t, shape, (np.frombuffer(raw, dtype=np.uint32) + 4).tobytes())

    def res_score_unfused(g, m):  # the norm alone, not the product
        t, shape, raw = g["blk.0.ffn_res_score.weight"]
        n = np.frombuffer(g["token_embd.weight"][2], dtype=np.uint16)[:64]
        g["blk.0.ffn_res_score.weight"] = (t, shape, ((n.astype(np.uint32) << 16).view(np.float32)).tobytes())

    results = [good, defect("ssm_a_ulps", a_off), defect("res_score_unfused", res_score_unfused), defect("v_b_rows", v_from_k_rows), defect("bf16_bit", flip_bf16), defect("mxfp4_nibbles", swap_nibbles),
               defect("hf_left_out", drop), defect("gguf_unexplained", unexplained),
               defect("f32_off", f32_not_bf16)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
