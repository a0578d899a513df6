"""Number formats of published checkpoints and of GGUF, written for the conversion
check from the formats' definitions (OCP 8-bit floating point and microscaling
specifications, compressed-tensors' packing, GGUF's block layouts), independently of
deltafin's C++ decoders. numpy only.

  E4M3 ("fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
    subnormal (m/8 * 2^-6); S.1111.111 is NaN; there are no infinities.
  E2M1: sign (bit 3), 2 exponent bits (bias 1), 1 mantissa bit: 0, .5, 1, 1.5, 2, 3, 4, 6.
  E8M0: 2^(e - 127); 255 is NaN in the OCP definition.
  compressed-tensors MXFP4: byte i of a row holds element 2i (low nibble) and 2i+1.
  compressed-tensors INT4 pack-quantized: int32 word j of a row holds elements
    8j..8j+7, element 8j+k in bits 4k..4k+3, stored as q + 8 (symmetric).
  GGUF MXFP4 block: one E8M0 byte, then 16 bytes; element e < 16 is the low nibble of
    byte e, element e + 16 its high nibble.
"""
import numpy as np


def e4m3_table():
    """float64[256]: the value of every E4M3 code (NaN for the two NaN codes)."""
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        out[code] = -v if s else v
    return out


E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_table():
    """float64[16]: the value of every E2M1 code."""
    return np.array([(-1.0 if c & 8 else 1.0) * E2M1_MAGNITUDES[c & 7] for c in range(16)])


def e8m0_values(e):
    """float64 array: 2^(e - 127) for E8M0 bytes (NaN for 255)."""
    e = np.asarray(e, dtype=np.int64)
    v = np.ldexp(1.0, e - 127)
    return np.where(e == 255, np.nan, v)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """Round float32 values to BF16 (nearest, ties to even) by arithmetic on the value:
    BF16 keeps 8 significant bits, and its quantum never goes below 2^-133. NaN maps to
    a NaN (0x7fc0 with its sign); overflow to infinity."""
    x = np.asarray(x, dtype=np.float32)
    f = x.astype(np.float64)
    finite = np.isfinite(f)
    _, e = np.frexp(np.where(finite, f, 0.0))  # f = m * 2^e, |m| in [0.5, 1)
    q = np.maximum(e - 8, -133)
    r = np.rint(np.ldexp(np.where(finite, f, 0.0), -q))  # rint: ties to even
    with np.errstate(over="ignore"):
        back = np.ldexp(r, q).astype(np.float32)
    bits = (back.view(np.uint32) >> 16).astype(np.uint16)
    sign = (x.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
    bits = np.where(np.isinf(f), sign | np.uint16(0x7F80), bits)
    bits = np.where(np.isnan(f), sign | np.uint16(0x7FC0), bits)
    return bits.astype(np.uint16)


def unpack_ct_mxfp4(packed):
    """uint8 [..., cols/2] -> E2M1 codes uint8 [..., cols]."""
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    codes[..., 0::2] = packed & 15
    codes[..., 1::2] = packed >> 4
    return codes


def unpack_ct_int4(words, cols):
    """int32 [rows, ceil(cols/8)] -> signed codes int64 [rows, cols] (stored value - 8)."""
    w = np.asarray(words).view(np.uint32).astype(np.int64)
    rows = w.shape[0]
    out = np.empty((rows, w.shape[1] * 8), dtype=np.int64)
    for k in range(8):
        out[:, k::8] = (w >> (4 * k)) & 15
    return out[:, :cols] - 8


# ---- GGUF tensor types ------------------------------------------------------------------

GGUF_F32, GGUF_F16, GGUF_BF16, GGUF_MXFP4 = 0, 1, 30, 39
GGUF_TYPE_NAMES = {GGUF_F32: "F32", GGUF_F16: "F16", GGUF_BF16: "BF16", GGUF_MXFP4: "MXFP4"}
# (elements per block, bytes per block) of the types this check decodes.
GGUF_BLOCKS = {GGUF_F32: (1, 4), GGUF_F16: (1, 2), GGUF_BF16: (1, 2), GGUF_MXFP4: (32, 17)}


def gguf_mxfp4_split(raw, shape):
    """GGUF MXFP4 bytes of a tensor of numpy shape [..., cols] -> (codes uint8 [..., cols],
    exponents uint8 [..., cols] (each element's block byte))."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 17)
    e = blocks[:, 0]
    qs = blocks[:, 1:]
    codes = np.concatenate([qs & 15, qs >> 4], axis=1)  # elements 0..15, then 16..31
    exps = np.repeat(e[:, None], 32, axis=1)
    return codes.reshape(shape), exps.reshape(shape)


def gguf_values(raw, gtype, shape):
    """GGUF tensor bytes -> float64 values of numpy shape `shape`."""
    if gtype == GGUF_F32:
        return np.frombuffer(raw, dtype=np.float32).reshape(shape).astype(np.float64)
    if gtype == GGUF_F16:
        return np.frombuffer(raw, dtype=np.float16).reshape(shape).astype(np.float64)
    if gtype == GGUF_BF16:
        return bf16_bits_to_f32(np.frombuffer(raw, dtype=np.uint16)).reshape(shape).astype(np.float64)
    if gtype == GGUF_MXFP4:
        codes, exps = gguf_mxfp4_split(raw, shape)
        return e2m1_table()[codes] * e8m0_values(exps)
    raise ValueError(f"GGUF type {gtype} is not one this check decodes")
