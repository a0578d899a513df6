#!/usr/bin/env python3
"""Self-check of tests/oracle/llama_ref.mjs (developer tool, not a ctest).

Generates tiny random qwen3moe GGUFs in a temp dir (make_tiny_qwen3moe.py), runs
llama_ref.mjs in every mode and checks it against itself and against an independent
numpy forward pass of qwen3moe:
  --info fields, batch vs single logits, numpy vs llama.cpp (f16 and f32 KV cache),
  determinism (rerun, thread count), greedy vs argmax of teacher forcing,
  tokenizer (BOS per metadata, special tokens), a GGUF without tokenizer,
  and llama.cpp's tokenizer golden tests in shared/vocab (VOCAB_DIR) when present.
Prints timings.  Exit 0 when all checks pass.

  python3 tests/oracle/selfcheck/check_oracle.py [N_TOKENS]
Needs numpy and gguf-py (GGUF_PY, default build/llama.cpp/gguf-py), node and
node-llama-cpp (DELTAFIN_ORACLE_DIR or <repo>/build/oracle; scripts/install-oracle).
"""
import glob, json, os, subprocess, sys, tempfile, time
sys.path.insert(0, os.environ.get('GGUF_PY', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'build', 'llama.cpp', 'gguf-py')))
import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, '..', 'llama_ref.mjs')
GEN = os.path.join(HERE, 'make_tiny_qwen3moe.py')
N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
failures = []


def check(ok, what):
    print(('PASS ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)


def run(model, *args, expect_rc=0):
    t0 = time.time()
    p = subprocess.run(['node', REF, '--model', model, *map(str, args)], capture_output=True, text=True)
    dt = time.time() - t0
    if p.returncode != expect_rc:
        sys.stderr.write(p.stderr)
        raise SystemExit(f'llama_ref {args[:3]} exited {p.returncode}, expected {expect_rc}')
    return [json.loads(l) for l in p.stdout.splitlines()], dt


def dense(rows, V):
    m = np.full((len(rows), V), np.nan)
    for r in rows:
        for t, l in r['top']:
            m[r['pos'], t] = l
    return m


class Qwen3MoeRef:
    """Plain numpy (float64) qwen3moe forward pass, written from the architecture."""

    def __init__(self, path):
        r = gguf.GGUFReader(path)
        f = {x.name: x for x in r.fields.values()}
        k = lambda n: f[n].parts[f[n].data[0]][0]
        self.T = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}
        a = 'qwen3moe.'
        self.L = int(k(a + 'block_count'))
        self.H = int(k(a + 'attention.head_count'))
        self.HKV = int(k(a + 'attention.head_count_kv'))
        self.D = int(k(a + 'attention.key_length'))
        self.K = int(k(a + 'expert_used_count'))
        self.eps = float(k(a + 'attention.layer_norm_rms_epsilon'))
        self.base = float(k(a + 'rope.freq_base'))

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope_neox(self, x, pos):  # (n, heads, D); pairs (i, i + D/2)
        half = self.D // 2
        ang = pos[:, None] * self.base ** (-np.arange(half) * 2.0 / self.D)[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    def forward(self, ids):
        T, H, HKV, D = self.T, self.H, self.HKV, self.D
        n = len(ids)
        pos = np.arange(n, dtype=np.float64)
        x = T['token_embd.weight'][ids]
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for i in range(self.L):
            p = f'blk.{i}.'
            h = self.rms(x, T[p + 'attn_norm.weight'])
            q = (h @ T[p + 'attn_q.weight'].T).reshape(n, H, D)
            k = (h @ T[p + 'attn_k.weight'].T).reshape(n, HKV, D)
            v = (h @ T[p + 'attn_v.weight'].T).reshape(n, HKV, D)
            q = self.rope_neox(self.rms(q, T[p + 'attn_q_norm.weight']), pos)
            k = self.rope_neox(self.rms(k, T[p + 'attn_k_norm.weight']), pos)
            o = np.zeros((n, H, D))
            for hh in range(H):
                g = hh // (H // HKV)
                s = q[:, hh] @ k[:, g].T / np.sqrt(D) + mask
                s = np.exp(s - s.max(-1, keepdims=True))
                o[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, g]
            x = x + o.reshape(n, H * D) @ T[p + 'attn_output.weight'].T
            h = self.rms(x, T[p + 'ffn_norm.weight'])
            lg = h @ T[p + 'ffn_gate_inp.weight'].T
            pr = np.exp(lg - lg.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)  # softmax over all experts
            y = np.zeros_like(x)
            for t in range(n):
                sel = np.argsort(-pr[t])[:self.K]
                w = pr[t, sel] / pr[t, sel].sum()  # top-k, renormalized
                for e, we in zip(sel, w):
                    gt = T[p + 'ffn_gate_exps.weight'][e] @ h[t]
                    up = T[p + 'ffn_up_exps.weight'][e] @ h[t]
                    y[t] += we * (T[p + 'ffn_down_exps.weight'][e] @ (gt / (1 + np.exp(-gt)) * up))
            x = x + y
        out = T.get('output.weight', T['token_embd.weight'])
        return self.rms(x, T['output_norm.weight']) @ out.T


def main():
    tmp = tempfile.mkdtemp(prefix='oracle_check_')
    model = os.path.join(tmp, 'tiny.gguf')
    model_bos = os.path.join(tmp, 'tiny_bos_tied.gguf')
    model_nv = os.path.join(tmp, 'tiny_novocab.gguf')
    for args in ([model], [model_bos, '--add-bos', '--tied'], [model_nv, '--no-vocab']):
        subprocess.run([sys.executable, GEN, *args], check=True, stdout=subprocess.DEVNULL)

    info, dt = run(model, '--info')
    info = info[0]
    print('info:', json.dumps(info))
    V = info['n_vocab']
    check(info['architecture'] == 'qwen3moe' and V == 276 and info['n_params'] == 159616,
          '--info: architecture qwen3moe, n_vocab 276, n_params 159616')
    print(f'  timing: --info {dt:.2f}s')

    ids = np.random.default_rng(0).integers(0, V, N).tolist()
    ids_s = ','.join(map(str, ids))
    rb, dt_b = run(model, '--ids', ids_s, '--top', 0, '--lse')
    rs, dt_s = run(model, '--ids', ids_s, '--top', 0, '--mode', 'single')
    r10, dt_10 = run(model, '--ids', ids_s, '--top', 10)
    print(f'  timing: {N} tokens batch top=all {dt_b:.2f}s, single top=all {dt_s:.2f}s, batch top=10 {dt_10:.2f}s')
    B, S = dense(rb, V), dense(rs, V)
    check(len(rb) == N and len(rs) == N and not np.isnan(B).any() and not np.isnan(S).any(),
          f'batch and single give all {V} logits at all {N} positions')
    check([r['top'] for r in r10] == [r['top'][:10] for r in rb], '--top 10 is the head of --top 0')
    d = np.abs(B - S).max(1)
    print(f'  batch vs single (f16 KV): max {d.max():.3g}, median {np.median(d):.3g}')
    check(np.median(d) < 1e-3 and np.mean(d > 1e-2) <= 0.01, 'batch and single logits agree')
    lse = B.max(1) + np.log(np.exp(B - B.max(1, keepdims=True)).sum(1))
    check(np.abs(np.array([r['lse'] for r in rb]) - lse).max() < 1e-4, '--lse = logsumexp of the logits')

    ref = Qwen3MoeRef(model).forward(ids)
    rf32, _ = run(model, '--ids', ids_s, '--top', 0, '--kv', 'f32')
    F = dense(rf32, V)
    d32 = np.abs(F - ref).max()
    d16 = np.abs(B - ref).max(1)
    print(f'  numpy vs llama.cpp: f32 KV max {d32:.3g}; f16 KV max {d16.max():.3g}, median {np.median(d16):.3g}')
    check(d32 < 1e-4, 'raw logits equal an independent numpy forward pass (f32 KV cache)')
    check(np.median(d16) < 1e-3 and np.mean(d16 > 1e-2) <= 0.01,
          'numpy vs default f16 KV cache: close except rare expert-routing flips')

    rt2, _ = run(model, '--ids', ids_s, '--top', 0, '--threads', 2)
    rb2, _ = run(model, '--ids', ids_s, '--top', 0, '--lse')
    check(rb2 == rb, 'rerun gives identical output')
    check(np.array_equal(dense(rt2, V), B), '--threads 2 gives the same logits as the default 1')

    prompt = ids[:20]
    g, dt_g = run(model, '--ids', ','.join(map(str, prompt)), '--greedy', 40)
    gen = g[0]['ids']
    full = prompt + gen[:-1]
    tf, _ = run(model, '--ids', ','.join(map(str, full)), '--top', 1, '--mode', 'single')
    check(len(gen) == 40 and [r['top'][0][0] for r in tf][len(prompt) - 1:] == gen,
          'greedy = argmax of teacher-forced logits')
    print(f'  timing: greedy 40 after a 20-token prompt {dt_g:.2f}s')

    t, _ = run(model, '--tokenize', 'hello the<|im_start|>')
    check(t[0]['ids'] == [257, 267, 111, 258, 274], 'tokenize: BPE merges + special token, no BOS (add_bos false)')
    t, _ = run(model, '--tokenize', 'hello the<|im_start|>', '--no-special')
    check(274 not in t[0]['ids'] and len(t[0]['ids']) > 5, 'tokenize --no-special: special token text not parsed')
    t, _ = run(model_bos, '--tokenize', 'hello')
    check(t[0]['ids'] == [273, 257, 267, 111], 'tokenize: BOS prepended when tokenizer.ggml.add_bos_token is true')
    t, _ = run(model_bos, '--tokenize', 'hello', '--no-add-special')
    check(t[0]['ids'] == [257, 267, 111], 'tokenize --no-add-special: no BOS')

    nvi, _ = run(model_nv, '--info')
    check(nvi[0]['vocab_type'] == 'none' and nvi[0]['n_vocab'] == V, 'GGUF without tokenizer loads (vocab_size key)')
    nvb, _ = run(model_nv, '--ids', ids_s, '--top', 0)
    check(np.array_equal(dense(nvb, V), B), 'GGUF without tokenizer: same logits as with one')
    run(model_nv, '--tokenize', 'x', expect_rc=1)

    # llama.cpp's tokenizer golden tests (shared/vocab: tokenizer-only GGUFs, no BOS, no special parsing)
    vocab_dir = os.environ.get('VOCAB_DIR', os.path.join(HERE, '..', '..', '..', '..', 'shared', 'vocab'))
    for g in sorted(glob.glob(os.path.join(vocab_dir, '*.gguf'))):
        with open(g + '.inp', encoding='utf-8', newline='') as f:
            texts = f.read().split('\n__ggml_vocab_test__\n')
        texts = texts[:-1] if texts and texts[-1] == '' else texts
        with open(g + '.out', encoding='utf-8', newline='') as f:
            want = [[int(x) for x in line.split()] for line in f.read().split('\n')[:len(texts)]]
        t0 = time.time()
        p = subprocess.run(['node', REF, '--model', g, '--tokenize-json', '-', '--no-special', '--no-add-special'],
                           input=json.dumps(texts), capture_output=True, text=True)
        got = [json.loads(l)['ids'] for l in p.stdout.splitlines()] if p.returncode == 0 else None
        check(got == want, f'tokenizer golden test {os.path.basename(g)} ({len(texts)} strings, {time.time() - t0:.1f}s)')

    print(f'{len(failures)} failure(s)' if failures else 'all checks passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
