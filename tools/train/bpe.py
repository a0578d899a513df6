"""Byte-level BPE (GPT-2 style): training, encoding, and the GGUF token tables.

Pre-tokenizer: GPT-2's split, which llama.cpp and deltafin both run for
tokenizer.ggml.pre = "gpt-2":
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)
Python's `re` has no \\p{..}; [^\\W\\d_] stands for letters and \\d for numbers, exact
for the ASCII-only KJV. Text the pattern does not match becomes a piece of its
own (as in llama.cpp), which the trailing |\\s+ reproduces.

Vocabulary: ids 0..255 are the 256 bytes (in GPT-2's printable byte->char map),
then one token per merge in rank order, then the special end-of-text token.
"""
import collections
import json
import re

_L, _N = r"[^\W\d_]", r"\d"
PRETOKENIZE = re.compile(
    rf"'s|'t|'re|'ve|'m|'ll|'d| ?{_L}+| ?{_N}+| ?(?:(?!{_L}|{_N})[^\s])+|\s+(?!\S)|\s+")
EOT = "<|endoftext|>"


def byte_to_char():
    """GPT-2's map from bytes to printable unicode characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


B2C = byte_to_char()


def pieces(text):
    return PRETOKENIZE.findall(text)


def train(text, vocab_size):
    """Learns vocab_size - 257 merges from text (EOT markers removed). Returns merges as (a, b)
    pairs of token strings in rank order."""
    words = collections.Counter()
    for chunk in text.split(EOT):
        words.update(pieces(chunk))
    # word -> list of symbols; pair stats maintained incrementally.
    seqs = [[B2C[b] for b in w.encode()] for w in words]
    freq = [words[w] for w in words]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for i, s in enumerate(seqs):
        for p in zip(s, s[1:]):
            pair_count[p] += freq[i]
            where[p].add(i)
    merges = []
    n_merges = vocab_size - 257
    while len(merges) < n_merges and pair_count:
        # Highest count; ties broken by the pair's text so the result is deterministic.
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        merges.append(best)
        a, b = best
        ab = a + b
        for i in list(where[best]):
            s = seqs[i]
            for p in zip(s, s[1:]):
                pair_count[p] -= freq[i]
                if pair_count[p] <= 0:
                    del pair_count[p]
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(ab)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[i] = out
            for p in zip(out, out[1:]):
                pair_count[p] += freq[i]
                where[p].add(i)
        del where[best]
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = [tuple(m) for m in merges]
        self.tokens = [B2C[b] for b in range(256)] + [a + b for a, b in self.merges] + [EOT]
        self.id = {t: i for i, t in enumerate(self.tokens)}
        assert len(self.id) == len(self.tokens), "duplicate token text"
        self.rank = {m: r for r, m in enumerate(self.merges)}
        self.eot = len(self.tokens) - 1
        self.cache = {}
        self.c2b = {c: b for b, c in B2C.items()}

    def _word(self, w):
        got = self.cache.get(w)
        if got is not None:
            return got
        s = [B2C[b] for b in w.encode()]
        while len(s) > 1:
            best, at = None, -1
            for j, p in enumerate(zip(s, s[1:])):
                r = self.rank.get(p)
                if r is not None and (best is None or r < best):
                    best, at = r, j
            if best is None:
                break
            a, b = self.merges[best]
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            s = out
        ids = [self.id[t] for t in s]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        """EOT markers in text become the EOT token; everything else is BPE."""
        ids = []
        for k, chunk in enumerate(text.split(EOT)):
            if k:
                ids.append(self.eot)
            for p in pieces(chunk):
                ids.extend(self._word(p))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i == self.eot:
                out += EOT.encode()
            else:
                out += bytes(self.c2b[c] for c in self.tokens[i])
        return out.decode("utf-8", errors="replace")

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"merges": [list(m) for m in self.merges], "eot": EOT}, f)

    @staticmethod
    def load(path):
        with open(path) as f:
            return Tokenizer(json.load(f)["merges"])
