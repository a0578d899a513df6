"""A small GGUF (version 3) writer and header reader: F32 and F16 tensors only.

Layout: "GGUF", u32 version, u64 n_tensors, u64 n_kv, then the key/values, then the
tensor infos (name, u32 n_dims, u64 ne[n_dims] with ne[0] contiguous, u32 type,
u64 offset into the data section), zero padding to the alignment, then the data,
each tensor starting at an aligned offset. Little-endian throughout.
"""
import struct

ALIGN = 32
# Value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
           U64: "<Q", I64: "<q", F64: "<d"}
# Tensor types (ggml_type ids).
T_F32, T_F16 = 0, 1
_NP = {T_F32: "<f4", T_F16: "<f2"}


def _str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == STRING:
        return _str(v)
    if vtype == ARRAY:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(_str(s) for s in items)
        return out + b"".join(struct.pack(_SCALAR[etype], x) for x in items)
    return struct.pack(_SCALAR[vtype], v)


class Writer:
    def __init__(self):
        self.kv = []       # (key, type, value)
        self.tensors = []  # (name, type, array in its final dtype)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def add_tensor(self, name, array, ttype):
        """array: numpy array in row-major order; its last axis becomes ne[0]."""
        import numpy as np  # only the writer needs numpy (tests read headers without it)
        self.tensors.append((name, ttype, np.ascontiguousarray(array, dtype=_NP[ttype])))

    def write(self, path):
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, t, v in self.kv:
            head += _str(k) + struct.pack("<I", t) + _value(t, v)
        offset = 0
        offsets = []
        for name, t, a in self.tensors:
            ne = a.shape[::-1]
            head += _str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
            head += struct.pack("<IQ", t, offset)
            offsets.append(offset)
            offset += (a.nbytes + ALIGN - 1) // ALIGN * ALIGN
        head += b"\0" * (-len(head) % ALIGN)
        with open(path, "wb") as f:
            f.write(head)
            for (_, _, a), off in zip(self.tensors, offsets):
                f.write(a.tobytes())
                f.write(b"\0" * (-a.nbytes % ALIGN))


def read_header(path):
    """Returns (kv dict, [(name, type, ne tuple)]) of a GGUF file (for tests and tools)."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = data[pos:pos + n].decode()
        pos += n
        return s

    def value(t):
        if t == STRING:
            return string()
        if t == ARRAY:
            et, n = take("<IQ")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[t])

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    _, n_t, n_kv = take("<IQQ")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("<I"))
    tensors = []
    for _ in range(n_t):
        name = string()
        nd = take("<I")
        ne = struct.unpack_from(f"<{nd}Q", data, pos)
        pos += 8 * nd
        t, _ = take("<IQ")
        tensors.append((name, t, tuple(ne)))
    return kv, tensors
