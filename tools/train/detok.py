"""Token ids -> text with a GGUF's byte-level BPE vocabulary (used by tests).

  python3 tools/train/detok.py MODEL.gguf 12,345,67
Prints the text the ids spell, without a trailing newline; special (control) tokens
print nothing, as llama.cpp and deltafin render them in generated text.
"""
import sys

import gguf_file
from bpe import B2C

C2B = {c: b for b, c in B2C.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: detok.py MODEL.gguf ID,ID,...")
    kv, _ = gguf_file.read_header(sys.argv[1])
    if kv.get("tokenizer.ggml.model") != "gpt2":
        sys.exit(f"{sys.argv[1]}: tokenizer.ggml.model is {kv.get('tokenizer.ggml.model')!r}, not gpt2")
    tokens, types = kv["tokenizer.ggml.tokens"], kv.get("tokenizer.ggml.token_type")
    out = bytearray()
    for s in filter(None, sys.argv[2].split(",")):
        i = int(s)
        if not 0 <= i < len(tokens):
            sys.exit(f"token id {i} is outside the vocabulary of {len(tokens)}")
        if types and types[i] == 3:
            continue
        out += bytes(C2B[c] for c in tokens[i])
    sys.stdout.buffer.write(bytes(out))


if __name__ == "__main__":
    main()
