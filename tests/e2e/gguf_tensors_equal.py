#!/usr/bin/env python3
# usage: gguf_tensors_equal.py CONVERTED.gguf REFERENCE.gguf
# The Hugging Face tests' check that `convert` wrote synth's tensors: the same names,
# types and shapes, and the same bytes, except F32 tensors the folder holds in BF16,
# which must equal the reference rounded to BF16 (nearest, ties to even). F32, F16
# and BF16 tensors only. Prints the count; exits non-zero (AssertionError) otherwise.
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_patch import Gguf  # noqa: E402

SIZE = {0: 4, 1: 2, 30: 2}
def tensors(p):
    g = Gguf(open(p, "rb").read())
    out = {}
    for name, (at, nd, ty, off) in g.tensors.items():
        ne = struct.unpack_from("<%dQ" % nd, g.d, at + 4)
        n = 1
        for x in ne: n *= x
        out[name] = (ty, ne, bytes(g.d[g.data_start + off: g.data_start + off + n * SIZE[ty]]))
    return out
conv, ref = tensors(sys.argv[1]), tensors(sys.argv[2])
assert conv.keys() == ref.keys(), set(conv) ^ set(ref)
def bf16_round(b):
    xs = struct.unpack("<%dI" % (len(b) // 4), b)
    return struct.pack("<%dI" % len(xs), *(((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16 for x in xs))
rounded = 0
for name, (ty, ne, data) in ref.items():
    cty, cne, cdata = conv[name]
    assert (cty, cne) == (ty, ne), (name, cty, cne, ty, ne)
    if cdata != data:
        assert ty == 0 and cdata == bf16_round(data), name
        rounded += 1
print(f"{len(ref)} tensors, {rounded} BF16-rounded F32 tensors")
