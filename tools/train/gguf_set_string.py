#!/usr/bin/env python3
"""Sets one string key in a GGUF file's metadata, keeping everything else as it was.

    gguf_set_string.py IN.gguf OUT.gguf KEY VALUE_FILE

The other keys keep their bytes and order (a new key goes last); the tensor infos
keep their offsets, which count from the data section, and the data section is
copied byte for byte, so every tensor stays bit-identical. IN and OUT may be the
same path (OUT is written to a temporary file and renamed over it). Used to give the
committed kjv-moe models their chat template (tools/train/chat_template.jinja).
"""
import os
import struct
import sys

STRING, ARRAY = 8, 9
_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    src, dst, key, value_file = sys.argv[1:]
    data = open(src, "rb").read()
    value = open(value_file, "rb").read()
    if data[:4] != b"GGUF":
        sys.exit(f"{src}: not a GGUF file")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    if version != 3:
        sys.exit(f"{src}: GGUF version {version}; only 3 is handled")
    pos = 24

    def skip_string(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return p + 8 + n

    def skip_value(p, t):
        if t == STRING:
            return skip_string(p)
        if t == ARRAY:
            et, n = struct.unpack_from("<IQ", data, p)
            p += 12
            if et == STRING:
                for _ in range(n):
                    p = skip_string(p)
                return p
            if et == ARRAY:
                for _ in range(n):
                    p = skip_value(p, ARRAY)
                return p
            return p + n * _SIZE[et]
        return p + _SIZE[t]

    kvs = []  # (key, raw bytes of the whole entry)
    alignment = 32
    for _ in range(n_kv):
        start = pos
        (n,) = struct.unpack_from("<Q", data, pos)
        k = data[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (t,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, t)
        if k == "general.alignment":
            (alignment,) = struct.unpack_from("<I", data, pos - 4)
        kvs.append((k, data[start:pos]))
    infos_start = pos
    for _ in range(n_tensors):
        pos = skip_string(pos)
        (nd,) = struct.unpack_from("<I", data, pos)
        pos += 4 + 8 * nd + 4 + 8
    infos = data[infos_start:pos]
    data_start = (pos + alignment - 1) // alignment * alignment

    entry = struct.pack("<Q", len(key.encode())) + key.encode() + struct.pack("<IQ", STRING, len(value)) + value
    kept = [raw for k, raw in kvs if k != key]
    n_kv_out = len(kept) + 1
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv_out)
    head += b"".join(raw if k != key else entry for k, raw in kvs) if any(k == key for k, _ in kvs) \
        else b"".join(kept) + entry
    head += infos
    head += b"\0" * (-len(head) % alignment)
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        f.write(data[data_start:])
    os.replace(tmp, dst)
    print(f"{dst}: {key} set ({len(value)} bytes); {n_tensors} tensors, data copied unchanged "
          f"({len(data) - data_start} bytes)")


if __name__ == "__main__":
    main()
