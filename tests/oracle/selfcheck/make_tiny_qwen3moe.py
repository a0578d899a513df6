#!/usr/bin/env python3
"""Generate a tiny random qwen3moe GGUF (all F32) with a byte-level GPT-2 style BPE
vocab (256 byte tokens + a few merges + 3 control tokens = 276), for checking the
oracle (llama_ref.mjs).  Needs numpy and gguf-py: set GGUF_PY to llama.cpp's gguf-py
directory (default build/llama.cpp/gguf-py).  Write the file outside the repo."""
import argparse, os, sys
sys.path.insert(0, os.environ.get('GGUF_PY', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'build', 'llama.cpp', 'gguf-py')))
import numpy as np
import gguf

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return dict(zip(bs, [chr(c) for c in cs]))

ap = argparse.ArgumentParser()
ap.add_argument('out')
ap.add_argument('--layers', type=int, default=2)
ap.add_argument('--embd', type=int, default=64)
ap.add_argument('--heads', type=int, default=4)
ap.add_argument('--heads-kv', type=int, default=2)
ap.add_argument('--head-dim', type=int, default=16)
ap.add_argument('--experts', type=int, default=8)
ap.add_argument('--used', type=int, default=2)
ap.add_argument('--ff-exp', type=int, default=32)
ap.add_argument('--ctx', type=int, default=2048)
ap.add_argument('--seed', type=int, default=1234)
ap.add_argument('--tied', action='store_true', help='no output.weight (tied to token_embd)')
ap.add_argument('--add-bos', action='store_true')
ap.add_argument('--drop', action='append', default=[], help='omit this metadata key (test)')
ap.add_argument('--no-vocab', action='store_true', help="tokenizer.ggml.model = 'none' (no tokenizer)")
a = ap.parse_args()

rng = np.random.default_rng(a.seed)
b2u = bytes_to_unicode()
tokens = [b2u[b] for b in range(256)]
merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "Ġ w", "Ġ o", "l l", "e l", "el l", "h ell", "hell o", "Ġ hello"]
for m in merges:
    tokens.append(m.replace(' ', ''))
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ttypes = [gguf.TokenType.NORMAL] * len(tokens) + [gguf.TokenType.CONTROL] * len(specials)
tokens += specials
n_vocab = len(tokens)

w = gguf.GGUFWriter(a.out, 'qwen3moe')
_akv = w.add_key_value
w.add_key_value = lambda k, *x, **y: None if k in a.drop else _akv(k, *x, **y)
w.add_name('tiny-qwen3moe-test')
w.add_context_length(a.ctx)
w.add_embedding_length(a.embd)
w.add_block_count(a.layers)
w.add_feed_forward_length(a.ff_exp * a.used)
w.add_expert_feed_forward_length(a.ff_exp)
w.add_head_count(a.heads)
w.add_head_count_kv(a.heads_kv)
w.add_key_length(a.head_dim)
w.add_value_length(a.head_dim)
w.add_rope_freq_base(1000000.0)
w.add_layer_norm_rms_eps(1e-6)
w.add_expert_count(a.experts)
w.add_expert_used_count(a.used)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
if a.no_vocab:
    w.add_tokenizer_model('none')
    w.add_vocab_size(n_vocab)
else:
    w.add_tokenizer_model('gpt2')
    w.add_tokenizer_pre('qwen2')
    w.add_token_list(tokens)
    w.add_token_types(ttypes)
    w.add_token_merges(merges)
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(a.add_bos)

def t(name, *shape, scale=None):
    fan_in = shape[-1]
    s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
    w.add_tensor(name, (rng.standard_normal(shape) * s).astype(np.float32))

def norm(name, n):
    w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

E, H, HKV, D, X, F = a.embd, a.heads, a.heads_kv, a.head_dim, a.experts, a.ff_exp
t('token_embd.weight', n_vocab, E, scale=1.0)
norm('output_norm.weight', E)
if not a.tied:
    t('output.weight', n_vocab, E)
for i in range(a.layers):
    p = f'blk.{i}.'
    norm(p + 'attn_norm.weight', E)
    t(p + 'attn_q.weight', H * D, E)
    t(p + 'attn_k.weight', HKV * D, E)
    t(p + 'attn_v.weight', HKV * D, E)
    t(p + 'attn_output.weight', E, H * D)
    norm(p + 'attn_q_norm.weight', D)
    norm(p + 'attn_k_norm.weight', D)
    norm(p + 'ffn_norm.weight', E)
    t(p + 'ffn_gate_inp.weight', X, E)
    t(p + 'ffn_gate_exps.weight', X, F, E)
    t(p + 'ffn_up_exps.weight', X, F, E)
    t(p + 'ffn_down_exps.weight', X, E, F)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"wrote {a.out}: n_vocab={n_vocab}")
