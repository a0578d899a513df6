#!/usr/bin/env python3
"""Malformed models for the tests: patches a GGUF file in place, keeping every
offset valid (values of the same size, names of the same length).

usage: gguf_patch.py SRC DST EDIT...
  kv:KEY=TYPE:VALUE     a metadata value of 4 bytes: TYPE u32, i32 or f32 (nan, inf ok)
  rename:NAME=NEW       a tensor's name (NEW as long as NAME)
  dim:NAME:D=N          dimension D of a tensor (N not above the old value, so its
                        data stays inside the file)
  nan:NAME              the tensor's first element becomes NaN (F32 or F16 only)
"""
import struct
import sys

GGUF_TYPES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # scalar sizes
KV_TYPE = {'u32': (4, '<I'), 'i32': (5, '<i'), 'f32': (6, '<f')}


class Gguf:
    def __init__(self, data):
        self.d = bytearray(data)
        self.p = 0
        assert self.d[:4] == b'GGUF', 'not a GGUF file'
        self.p = 8
        n_tensors, n_kv = self.u64(), self.u64()
        self.kv = {}  # key -> offset of its type field
        self.alignment = 32
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.p
            t = self.u32()
            if key == 'general.alignment':
                self.alignment = struct.unpack_from('<I', self.d, self.p)[0]
            self.skip_value(t)
        self.tensors = {}  # name -> (offset of n_dims, n_dims, type, data offset)
        for _ in range(n_tensors):
            name = self.string()
            at = self.p
            nd = self.u32()
            self.p += 8 * nd
            ty = self.u32()
            off = self.u64()
            self.tensors[name] = (at, nd, ty, off)
        self.data_start = (self.p + self.alignment - 1) // self.alignment * self.alignment

    def u32(self):
        v = struct.unpack_from('<I', self.d, self.p)[0]
        self.p += 4
        return v

    def u64(self):
        v = struct.unpack_from('<Q', self.d, self.p)[0]
        self.p += 8
        return v

    def string(self):
        n = self.u64()
        s = bytes(self.d[self.p:self.p + n]).decode()
        self.p += n
        return s

    def skip_value(self, t):
        if t == 8:
            self.string()
        elif t == 9:
            et, n = self.u32(), self.u64()
            for _ in range(n):
                self.skip_value(et)
        else:
            self.p += GGUF_TYPES[t]

    def edit(self, e):
        kind, _, rest = e.partition(':')
        if kind == 'kv':
            key, _, val = rest.partition('=')
            tname, _, v = val.partition(':')
            at = self.kv[key]
            old_t = struct.unpack_from('<I', self.d, at)[0]
            assert GGUF_TYPES.get(old_t) == 4, f'{key} is not a 4-byte value'
            t, fmt = KV_TYPE[tname]
            struct.pack_into('<I', self.d, at, t)
            struct.pack_into(fmt, self.d, at + 4, float(v) if tname == 'f32' else int(v))
        elif kind == 'rename':
            name, _, new = rest.partition('=')
            assert len(new) == len(name), 'the new name must be as long as the old'
            at = self.tensors[name][0] - len(name)
            self.d[at:at + len(name)] = new.encode()
        elif kind == 'dim':
            name, _, dv = rest.rpartition('=')
            name, _, d = name.rpartition(':')
            at, nd, _, _ = self.tensors[name]
            assert int(d) < nd
            old = struct.unpack_from('<Q', self.d, at + 4 + 8 * int(d))[0]
            assert int(dv) <= old, 'a larger dimension would reach past the data'
            struct.pack_into('<Q', self.d, at + 4 + 8 * int(d), int(dv))
        elif kind == 'nan':
            _, _, ty, off = self.tensors[rest]
            at = self.data_start + off
            if ty == 0:
                struct.pack_into('<f', self.d, at, float('nan'))
            elif ty == 1:
                struct.pack_into('<H', self.d, at, 0x7E00)
            else:
                raise SystemExit(f'nan: {rest} is neither F32 nor F16 (type {ty})')
        else:
            raise SystemExit(f'unknown edit {e}')


def main():
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    g = Gguf(open(src, 'rb').read())
    for e in edits:
        g.edit(e)
    open(dst, 'wb').write(g.d)


if __name__ == '__main__':
    main()
