"""A qwen3moe-shaped MoE transformer in torch, matching llama.cpp's qwen3moe graph.

Per layer (x: [B, T, d]):
  h = rms(x) * attn_norm
  q, k, v = h Wq, h Wk, h Wv            q: [B, T, H, hd], k, v: [B, T, Hkv, hd]
  q = rms(q) * q_norm; k = rms(k) * k_norm   (per head, over hd)
  q, k = rope_neox(q), rope_neox(k)     pairs (i, i + hd/2), theta_i = pos * base^(-2i/hd)
  x = x + softmax(q k^T / sqrt(hd) + causal) v  Wo     (kv heads shared by H/Hkv q heads)
  h = rms(x) * ffn_norm
  p = softmax(h Wr)                     router over all n_expert experts
  top-k of p, weights renormalised to sum 1
  x = x + sum_k w_k * down_k(silu(gate_k h) * up_k h)
logits = (rms(x) * output_norm) W_out, W_out = token embedding (tied).
"""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Config:
    n_vocab: int = 3072
    n_ctx: int = 256
    n_layer: int = 4
    d_model: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_expert: int = 32
    n_used: int = 4
    d_ff_exp: int = 128
    rms_eps: float = 1e-6
    rope_base: float = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_neox(x, cos, sin):
    """x: [B, T, H, hd]; cos, sin: [T, hd/2]. Rotates (x[i], x[i + hd/2])."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.wq = nn.Linear(c.d_model, c.n_head * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d_model, c.n_head_kv * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d_model, c.n_head_kv * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_head * c.head_dim, c.d_model, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_eps)

    def forward(self, h, cos, sin, mask):
        c = self.c
        B, T, _ = h.shape
        q = self.q_norm(self.wq(h).view(B, T, c.n_head, c.head_dim))
        k = self.k_norm(self.wk(h).view(B, T, c.n_head_kv, c.head_dim))
        v = self.wv(h).view(B, T, c.n_head_kv, c.head_dim)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        rep = c.n_head // c.n_head_kv  # q head i uses kv head i // rep, as ggml broadcasts
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        att = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim) + mask[:T, :T]
        o = att.softmax(-1) @ v
        return self.wo(o.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c.d_model, c.n_expert, bias=False)
        # Stacked per expert: gate/up [E, ff, d], down [E, d, ff] (nn.Linear's [out, in] layout).
        s = 1.0 / math.sqrt(c.d_model)
        self.gate = nn.Parameter(torch.randn(c.n_expert, c.d_ff_exp, c.d_model) * s)
        self.up = nn.Parameter(torch.randn(c.n_expert, c.d_ff_exp, c.d_model) * s)
        self.down = nn.Parameter(torch.randn(c.n_expert, c.d_model, c.d_ff_exp) * (0.5 / math.sqrt(c.d_ff_exp)))

    def route(self, h):
        """h: [N, d] -> probs [N, E], top-k ids [N, k], normalised weights [N, k]."""
        probs = self.router(h).float().softmax(-1)
        w, ids = probs.topk(self.c.n_used, dim=-1)
        return probs, ids, w / w.sum(-1, keepdim=True)

    def forward(self, h):
        B, T, d = h.shape
        hf = h.reshape(B * T, d)
        probs, ids, w = self.route(hf)
        out = torch.zeros_like(hf)
        flat_ids = ids.reshape(-1)
        order = torch.argsort(flat_ids, stable=True)
        counts = torch.bincount(flat_ids, minlength=self.c.n_expert).tolist()
        tok = order // self.c.n_used
        wsorted = w.reshape(-1)[order]
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            t = tok[start:start + n]
            x = hf[t]
            y = (F.silu(x @ self.gate[e].t()) * (x @ self.up[e].t())) @ self.down[e].t()
            out.index_add_(0, t, y * wsorted[start:start + n, None])
            start += n
        # Switch-style balance loss: E * sum_e (share of routes to e) * (mean prob of e).
        share = torch.bincount(flat_ids, minlength=self.c.n_expert).float() / flat_ids.numel()
        aux = self.c.n_expert * (share * probs.mean(0)).sum()
        return out.view(B, T, d), aux


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.d_model, c.rms_eps)
        self.moe = MoE(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        y, aux = self.moe(self.ffn_norm(x))
        return x + y, aux


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.n_vocab, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.output_norm = RMSNorm(c.d_model, c.rms_eps)
        inv = c.rope_base ** (-torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
        ang = torch.arange(c.n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        self.register_buffer("mask", torch.full((c.n_ctx, c.n_ctx), float("-inf")).triu(1), persistent=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        for b in self.blocks:
            for lin in (b.attn.wq, b.attn.wk, b.attn.wv, b.moe.router):
                nn.init.normal_(lin.weight, std=0.02)
            nn.init.normal_(b.attn.wo.weight, std=0.02 / math.sqrt(2 * c.n_layer))

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embed(idx)
        aux = 0.0
        for b in self.blocks:
            x, a = b(x, self.cos[:T], self.sin[:T], self.mask)
            aux = aux + a
        return self.output_norm(x) @ self.embed.weight.t(), aux / len(self.blocks)
