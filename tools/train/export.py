"""Checkpoint + tokenizer -> GGUF (qwen3moe) with F32 or F16 matrices.

  python3 tools/train/export.py --ckpt WORK/ckpt.pt --tokenizer WORK/tokenizer.json \
      --out kjv-moe-F16.gguf --type F16
Norms and the router stay F32 (as llama.cpp's converter keeps them). Quantized
files come from `deltafin quantize` on the result.
"""
import argparse
import os

import numpy as np
import torch

import bpe
import gguf_file as G


def tensor_map(cfg):
    """GGUF name -> checkpoint key. The token embedding doubles as the output matrix."""
    m = {"token_embd.weight": "embed.weight", "output_norm.weight": "output_norm.weight"}
    for i in range(cfg["n_layer"]):
        b, p = f"blocks.{i}.", f"blk.{i}."
        m.update({
            p + "attn_norm.weight": b + "attn_norm.weight",
            p + "attn_q.weight": b + "attn.wq.weight",
            p + "attn_k.weight": b + "attn.wk.weight",
            p + "attn_v.weight": b + "attn.wv.weight",
            p + "attn_output.weight": b + "attn.wo.weight",
            p + "attn_q_norm.weight": b + "attn.q_norm.weight",
            p + "attn_k_norm.weight": b + "attn.k_norm.weight",
            p + "ffn_norm.weight": b + "ffn_norm.weight",
            p + "ffn_gate_inp.weight": b + "moe.router.weight",
            p + "ffn_gate_exps.weight": b + "moe.gate",    # [E, ff, d] -> ne {d, ff, E}
            p + "ffn_up_exps.weight": b + "moe.up",
            p + "ffn_down_exps.weight": b + "moe.down",    # [E, d, ff] -> ne {ff, d, E}
        })
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", choices=["F32", "F16"], default="F16")
    ap.add_argument("--name", default="kjv-moe")
    a = ap.parse_args()
    ck = torch.load(a.ckpt, map_location="cpu")
    cfg, sd = ck["config"], ck["model"]
    tok = bpe.Tokenizer.load(a.tokenizer)
    if len(tok.tokens) != cfg["n_vocab"]:
        raise SystemExit(f"export: tokenizer has {len(tok.tokens)} tokens, model {cfg['n_vocab']}")

    w = G.Writer()
    arch = "qwen3moe"
    w.add("general.architecture", G.STRING, arch)
    w.add("general.name", G.STRING, a.name)
    w.add("general.alignment", G.U32, G.ALIGN)
    w.add("general.file_type", G.U32, 0 if a.type == "F32" else 1)
    for k, t, v in [
        ("block_count", G.U32, cfg["n_layer"]), ("context_length", G.U32, cfg["n_ctx"]),
        ("embedding_length", G.U32, cfg["d_model"]), ("feed_forward_length", G.U32, cfg["d_ff_exp"]),
        ("attention.head_count", G.U32, cfg["n_head"]), ("attention.head_count_kv", G.U32, cfg["n_head_kv"]),
        ("attention.key_length", G.U32, cfg["head_dim"]), ("attention.value_length", G.U32, cfg["head_dim"]),
        ("rope.freq_base", G.F32, cfg["rope_base"]),
        ("attention.layer_norm_rms_epsilon", G.F32, cfg["rms_eps"]),
        ("expert_count", G.U32, cfg["n_expert"]), ("expert_used_count", G.U32, cfg["n_used"]),
        ("expert_feed_forward_length", G.U32, cfg["d_ff_exp"]),
    ]:
        w.add(f"{arch}.{k}", t, v)
    w.add("tokenizer.ggml.model", G.STRING, "gpt2")
    w.add("tokenizer.ggml.pre", G.STRING, "gpt-2")
    w.add("tokenizer.ggml.tokens", G.ARRAY, (G.STRING, tok.tokens))
    w.add("tokenizer.ggml.token_type", G.ARRAY, (G.I32, [1] * (len(tok.tokens) - 1) + [3]))
    w.add("tokenizer.ggml.merges", G.ARRAY, (G.STRING, [f"{x} {y}" for x, y in tok.merges]))
    w.add("tokenizer.ggml.bos_token_id", G.U32, tok.eot)
    w.add("tokenizer.ggml.eos_token_id", G.U32, tok.eot)
    w.add("tokenizer.ggml.add_bos_token", G.BOOL, False)
    w.add("tokenizer.ggml.add_eos_token", G.BOOL, False)
    # A plain-text chat template, so that `deltafin chat` and `serve` can talk to it.
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja")) as f:
        w.add("tokenizer.chat_template", G.STRING, f.read())

    mat_type = G.T_F32 if a.type == "F32" else G.T_F16
    for name, key in tensor_map(cfg).items():
        arr = sd[key].float().numpy()
        small = arr.ndim == 1 or name.endswith("ffn_gate_inp.weight")
        w.add_tensor(name, arr, G.T_F32 if small else mat_type)
    w.write(a.out)
    print(f"wrote {a.out}: {len(w.tensors)} tensors, step {ck['step']}")


if __name__ == "__main__":
    main()
