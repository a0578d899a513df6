"""Minimal readers for the conversion check, written from the file formats'
definitions: a Hugging Face folder of safetensors shards (model.safetensors.index.json
weight_map, or one model.safetensors) and a GGUF file (version 2 or 3). They return
raw bytes and shapes; hf_formats.py gives the bytes their values.

safetensors: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape,
data_offsets: [begin, end]}} (offsets relative to byte 8 + N), then the data.
GGUF: magic "GGUF", u32 version, u64 tensor count, u64 key/value count, the key/values,
the tensor infos (name, u32 n_dims, u64 dims (fastest first), u32 type, u64 offset),
then the data at the next multiple of general.alignment (default 32).
"""
import json
import os
import struct

import numpy as np

from hf_formats import GGUF_BLOCKS

ST_DTYPES = {
    "F64": (np.float64, 8), "F32": (np.float32, 4), "F16": (np.float16, 2),
    "BF16": (np.uint16, 2), "F8_E4M3": (np.uint8, 1), "U8": (np.uint8, 1), "I8": (np.int8, 1),
    "I16": (np.int16, 2), "I32": (np.int32, 4), "I64": (np.int64, 8), "BOOL": (np.uint8, 1),
}


class CheckError(Exception):
    pass


class HfFolder:
    """Every tensor of a folder's shards: name -> (file, dtype, shape, begin, end)."""

    def __init__(self, folder):
        self.folder = folder
        self.config = self._json("config.json")
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        elif os.path.exists(os.path.join(folder, "model.safetensors")):
            files = ["model.safetensors"]
        else:
            raise CheckError(f"{folder}: neither model.safetensors.index.json nor model.safetensors")
        self.tensors = {}
        for name in files:
            self._read_header(os.path.join(folder, name))

    def _json(self, name):
        path = os.path.join(self.folder, name)
        if not os.path.exists(path):
            raise CheckError(f"{path}: missing")
        with open(path) as f:
            return json.load(f)

    def _read_header(self, path):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        size = os.path.getsize(path)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in ST_DTYPES:
                raise CheckError(f"{path}: tensor {name}: dtype {info['dtype']} unknown to the check")
            begin, end = info["data_offsets"]
            want = int(np.prod(info["shape"], dtype=np.int64)) * ST_DTYPES[info["dtype"]][1]
            if end - begin != want or 8 + n + end > size:
                raise CheckError(f"{path}: tensor {name}: byte range {begin}..{end} does not fit its shape or the file")
            if name in self.tensors:
                raise CheckError(f"{path}: tensor {name} is also in {self.tensors[name][0]}")
            self.tensors[name] = (path, info["dtype"], tuple(info["shape"]), 8 + n + begin, 8 + n + end)

    def array(self, name):
        """The tensor's elements as stored (BF16 as uint16 bits, F8_E4M3 as uint8 codes)."""
        path, dtype, shape, begin, end = self.tensors[name]
        with open(path, "rb") as f:
            f.seek(begin)
            raw = f.read(end - begin)
        return np.frombuffer(raw, dtype=ST_DTYPES[dtype][0]).reshape(shape)

    def dtype(self, name):
        return self.tensors[name][1]

    def quantization_config(self):
        qc = self.config.get("quantization_config")
        if qc is None and isinstance(self.config.get("text_config"), dict):
            qc = self.config["text_config"].get("quantization_config")
        return qc or {}


class GgufFile:
    """The tensor infos of a GGUF file: name -> (type, numpy shape, absolute offset, bytes)."""

    _SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self._f = f
            if f.read(4) != b"GGUF":
                raise CheckError(f"{path}: not a GGUF file")
            (version,) = struct.unpack("<I", f.read(4))
            if version not in (2, 3):
                raise CheckError(f"{path}: GGUF version {version}")
            n_tensors, n_kv = struct.unpack("<QQ", f.read(16))
            self.kv = {}
            for _ in range(n_kv):
                key = self._string()
                (vtype,) = struct.unpack("<I", f.read(4))
                self.kv[key] = self._value(vtype)
            infos = []
            for _ in range(n_tensors):
                name = self._string()
                (n_dims,) = struct.unpack("<I", f.read(4))
                dims = struct.unpack(f"<{n_dims}Q", f.read(8 * n_dims))
                gtype, offset = struct.unpack("<IQ", f.read(12))
                infos.append((name, gtype, dims, offset))
            align = int(self.kv.get("general.alignment", 32))
            data = (f.tell() + align - 1) // align * align
        size = os.path.getsize(path)
        self.tensors = {}
        for name, gtype, dims, offset in infos:
            shape = tuple(reversed(dims))  # numpy order: slowest first
            n = int(np.prod(dims, dtype=np.int64))
            if gtype in GGUF_BLOCKS:
                elems, nbytes = GGUF_BLOCKS[gtype]
                if dims[0] % elems:
                    raise CheckError(f"{path}: tensor {name}: row of {dims[0]} not a multiple of {elems}")
                nbytes = n // elems * nbytes
            else:
                nbytes = None  # a type this check does not decode: reported by the caller
            if nbytes is not None and data + offset + nbytes > size:
                raise CheckError(f"{path}: tensor {name}: data past the end of the file")
            self.tensors[name] = (gtype, shape, data + offset, nbytes)

    def _string(self):
        (n,) = struct.unpack("<Q", self._f.read(8))
        return self._f.read(n).decode("utf-8")

    def _value(self, vtype):
        if vtype in self._SCALARS:
            fmt = self._SCALARS[vtype]
            return struct.unpack(fmt, self._f.read(struct.calcsize(fmt)))[0]
        if vtype == 8:
            return self._string()
        if vtype == 9:
            etype, n = struct.unpack("<IQ", self._f.read(12))
            return [self._value(etype) for _ in range(n)]
        raise CheckError(f"{self.path}: unknown GGUF value type {vtype}")

    def raw(self, name):
        gtype, shape, offset, nbytes = self.tensors[name]
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(nbytes)
