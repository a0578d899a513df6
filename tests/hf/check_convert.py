#!/usr/bin/env python3
"""check_convert.py HF_DIR OUT.gguf NAME_MAP.json

Compares, element by element, every tensor of a Hugging Face folder with its
counterpart in a GGUF converted from it, with decoders of its own (file_readers.py,
hf_formats.py: nothing of deltafin's). Prints one line per GGUF tensor with the largest
difference, and exits 1 on any mismatch beyond the rule, on a GGUF tensor that no map
entry explains, and on an HF tensor that is neither converted nor listed as skipped.

The rule, by source encoding and GGUF type:
  MXFP4 (compressed-tensors) -> MXFP4: the same E2M1 codes and E8M0 bytes (bit-exact).
  BF16 -> BF16: the same bits. Any plain type -> F32: the same value.
  F32 -> BF16, FP8 or INT4 -> BF16: the BF16 rounding (to nearest even) of the exact
    F32 value; FP8: e4m3 * scale_inv of its 128x128 block, INT4: (code - 8) * scale of
    its group, each formed in F32. NaN must stay NaN.
  -> F16: the F16 rounding (to nearest even) of that value.
  An entry with "mul" (a second HF tensor, multiplied element-wise, as llama.cpp fuses
  Kimi K3's res_norm * res_proj) is held to the F32 rounding of the exact product; one
  with "fn": "neg_exp" (ssm_a = -exp(A_log)) to within one unit in the last place of
  the GGUF type, since exp is not correctly rounded everywhere.

NAME_MAP (JSON):
  {"tensors": [{"gguf": "blk.{L}.ffn_gate_exps.weight",
                "hf": "model.layers.{L}.mlp.experts.{E}.gate_proj.weight",
                "ops": [["transpose", [1, 0]], ...]}, ...],
   "skip_hf": ["regex", ...],      HF tensors deliberately not converted (a vision tower)
   "extra_gguf": ["regex", ...]}   GGUF tensors with no HF source (reported, not checked)
A placeholder bound by the GGUF name ({L}) is substituted; one only in the HF name ({E})
stacks that many HF tensors, 0.., along a new first axis (the count is the GGUF tensor's
first dimension). "hf" names the dense weight ("X.weight"); its encoding is found from
the folder: X.weight + X.weight_scale_inv (FP8), X.weight_packed U8 + X.weight_scale
(MXFP4), X.weight_packed I32 + X.weight_scale (+ X.weight_shape) (INT4), else X.weight.
"ops" move data only: reshape, transpose, slice [axis, start, stop], squeeze [axis];
a string where a number goes is an arithmetic expression over config.json's integer
keys (text_config's first), e.g. "qk_nope_head_dim + v_head_dim".
"""
import json
import re
import sys

import numpy as np

import hf_formats as fmt
from file_readers import CheckError, GgufFile, HfFolder


class Source:
    """One HF tensor decoded: exact values (float64), plus, for MXFP4, codes and
    exponents; `approx` when the values come from a function held to one ulp."""

    def __init__(self, encoding, values, codes=None, exps=None, approx=False):
        self.encoding, self.values, self.codes, self.exps = encoding, values, codes, exps
        self.approx = approx

    def apply(self, op, config):
        op = [op[0]] + [resolve(x, config) for x in op[1:]]

        def move(a):
            if a is None:
                return None
            kind = op[0]
            if kind == "reshape":
                return a.reshape(op[1])
            if kind == "transpose":
                return np.ascontiguousarray(a.transpose(op[1]))
            if kind == "slice":
                axis, start, stop = op[1:4]
                idx = [slice(None)] * a.ndim
                idx[axis] = slice(start, stop)
                return a[tuple(idx)]
            if kind == "squeeze":
                return a.squeeze(op[1])
            raise CheckError(f"unknown op {op!r}")
        return Source(self.encoding, move(self.values), move(self.codes), move(self.exps), self.approx)


def resolve(x, config):
    """Numbers stay; lists resolve element-wise; strings are evaluated over the config."""
    if isinstance(x, list):
        return [resolve(y, config) for y in x]
    if isinstance(x, str):
        names = {k: v for k, v in config.items() if isinstance(v, int)}
        if isinstance(config.get("text_config"), dict):
            names.update({k: v for k, v in config["text_config"].items() if isinstance(v, int)})
        try:
            return int(eval(x, {"__builtins__": {}}, names))  # test input, integers only
        except Exception as err:
            raise CheckError(f"op argument {x!r}: {err}")
    return x


def decode(hf, base, used):
    """The HF tensor named `base` (a dense weight name), in whatever encoding the folder has."""
    t = hf.tensors
    qc = hf.quantization_config()
    if base in t and hf.dtype(base) == "F8_E4M3":
        sname = base + "_scale_inv"
        if sname not in t:
            raise CheckError(f"{base}: F8_E4M3 without {sname}")
        block = qc.get("weight_block_size", [128, 128])
        w = hf.array(base)
        s = hf.array(sname)
        s = fmt.bf16_bits_to_f32(s) if hf.dtype(sname) == "BF16" else s.astype(np.float32)
        rows, cols = w.shape
        need = (-(-rows // block[0]), -(-cols // block[1]))
        if s.shape != need:
            raise CheckError(f"{sname}: shape {s.shape}, want {need} for {w.shape} in {block} blocks")
        full = np.repeat(np.repeat(s.astype(np.float64), block[0], 0), block[1], 1)[:rows, :cols]
        exact = fmt.e4m3_table()[w] * full  # exact in float64: 4 x 24 significant bits
        used.update([base, sname])
        return Source("fp8", exact.astype(np.float32).astype(np.float64))
    if base in t:
        dt = hf.dtype(base)
        a = hf.array(base)
        if dt == "BF16":
            v = fmt.bf16_bits_to_f32(a).reshape(a.shape)
        elif dt in ("F32", "F16", "F64"):
            v = a
        else:
            raise CheckError(f"{base}: dtype {dt} is not a weight this check knows")
        used.add(base)
        return Source(dt.lower(), v.astype(np.float64))
    pname, sname = base + "_packed", base + "_scale"
    if pname not in t or sname not in t:
        raise CheckError(f"{base}: not in the folder (nor {pname} with {sname})")
    used.update([pname, sname])
    packed, scale = hf.array(pname), hf.array(sname)
    if hf.dtype(pname) == "U8":
        if hf.dtype(sname) != "U8":
            raise CheckError(f"{sname}: dtype {hf.dtype(sname)}, want U8 (E8M0) beside a U8 {pname}")
        codes = fmt.unpack_ct_mxfp4(packed)
        rows, cols = codes.shape
        if scale.shape != (rows, cols // 32):
            raise CheckError(f"{sname}: shape {scale.shape}, want {(rows, cols // 32)}")
        exps = np.repeat(scale, 32, axis=1)
        return Source("mxfp4", fmt.e2m1_table()[codes] * fmt.e8m0_values(exps), codes, exps)
    if hf.dtype(pname) == "I32":
        if base + "_zero_point" in t:
            raise CheckError(f"{base}: asymmetric INT4 (a zero point) is not a published encoding this check knows")
        groups = qc.get("config_groups", {})
        gs = [g["weights"].get("group_size") for g in groups.values() if isinstance(g, dict) and "weights" in g]
        group = gs[0] if gs and gs[0] else 32
        rows = packed.shape[0]
        cols = packed.shape[1] * 8
        if base + "_shape" in t:
            used.add(base + "_shape")
            rows, cols = (int(x) for x in hf.array(base + "_shape"))
        q = fmt.unpack_ct_int4(packed, cols)[:rows]
        sd = hf.dtype(sname)
        s = fmt.bf16_bits_to_f32(scale).reshape(scale.shape) if sd == "BF16" else scale.astype(np.float32)
        if s.shape != (rows, -(-cols // group)):
            raise CheckError(f"{sname}: shape {s.shape}, want {(rows, -(-cols // group))}")
        full = np.repeat(s.astype(np.float64), group, axis=1)[:, :cols]
        return Source("int4", (q * full).astype(np.float32).astype(np.float64))  # exact, then F32
    raise CheckError(f"{pname}: dtype {hf.dtype(pname)}, want U8 (MXFP4) or I32 (INT4)")


def pattern_regex(p):
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>\\d+)", re.escape(p)) + "$")


def compare(name, gg, src):
    """(ok, rule, max |difference|, mismatches) of GGUF tensor `name` against `src`."""
    gtype, shape, _, nbytes = gg.tensors[name]
    if nbytes is None:
        return False, f"GGUF type {gtype} not decoded by this check", float("nan"), -1
    if tuple(src.values.shape) != tuple(shape):
        return False, f"shape {shape} but the HF source is {src.values.shape}", float("nan"), -1
    raw = gg.raw(name)
    got = fmt.gguf_values(raw, gtype, shape)
    want = src.values
    if src.approx and gtype in (fmt.GGUF_F32, fmt.GGUF_BF16, fmt.GGUF_F16):
        mant = {fmt.GGUF_F32: 23, fmt.GGUF_BF16: 7, fmt.GGUF_F16: 10}[gtype]
        _, e = np.frexp(np.where(np.isfinite(want), want, 0.0))
        ulp = np.ldexp(1.0, e - 1 - mant)
        off = np.where(np.isnan(want), ~np.isnan(got), ~(np.abs(got - want) <= ulp))
        bad = int(np.count_nonzero(off))
        rule = "within one ulp of the function's value"
    elif gtype == fmt.GGUF_MXFP4:
        if src.encoding != "mxfp4":
            return False, f"MXFP4 from {src.encoding}: a re-quantization", float("nan"), -1
        codes, exps = fmt.gguf_mxfp4_split(raw, shape)
        bad = int(np.count_nonzero((codes != src.codes) | (exps != src.exps)))
        rule = "same codes and scales"
    elif gtype == fmt.GGUF_BF16:
        bits = np.frombuffer(raw, dtype=np.uint16).reshape(shape)
        expect = fmt.f32_to_bf16_bits(want.astype(np.float32))
        nan = np.isnan(want)
        got_nan = (bits & 0x7F80) == 0x7F80
        got_nan &= (bits & 0x7F) != 0
        bad = int(np.count_nonzero(np.where(nan, ~got_nan, bits != expect)))
        want = fmt.bf16_bits_to_f32(expect).reshape(shape).astype(np.float64)
        rule = "same bits" if src.encoding == "bf16" else "BF16 rounding of the F32 value"
    elif gtype == fmt.GGUF_F32:
        w32 = want.astype(np.float32)
        bad = int(np.count_nonzero(np.where(np.isnan(w32), ~np.isnan(got), got.astype(np.float32).view(np.uint32) != w32.view(np.uint32))))
        rule = "same value"
    elif gtype == fmt.GGUF_F16:
        w16 = want.astype(np.float16)
        bad = int(np.count_nonzero(np.where(np.isnan(w16), ~np.isnan(got), got.astype(np.float16).view(np.uint16) != w16.view(np.uint16))))
        want = w16.astype(np.float64)
        rule = "F16 rounding of the value"
    else:
        return False, f"GGUF type {gtype} not decoded by this check", float("nan"), -1
    finite = np.isfinite(want) & np.isfinite(got)
    diff = float(np.max(np.abs(got[finite] - want[finite]), initial=0.0))
    return bad == 0, rule, diff, bad


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    hf = HfFolder(argv[1])
    gg = GgufFile(argv[2])
    with open(argv[3]) as f:
        nmap = json.load(f)
    entries = [(pattern_regex(e["gguf"]), e) for e in nmap.get("tensors", [])]
    skip = [re.compile(p) for p in nmap.get("skip_hf", [])]
    extra = [re.compile(p) for p in nmap.get("extra_gguf", [])]
    used, failures, checked = set(), 0, 0
    for name in gg.tensors:
        hit = next(((m, e) for rx, e in entries if (m := rx.match(name))), None)
        if hit is None:
            if any(r.search(name) for r in extra):
                print(f"SKIP {name}: no HF source (listed in extra_gguf)")
                continue
            print(f"FAIL {name}: no entry of the name map explains it")
            failures += 1
            continue
        m, e = hit
        bound = m.groupdict()
        hf_pat = e["hf"]
        free = [k for k in re.findall(r"\{(\w+)\}", hf_pat) if k not in bound]
        try:
            if len(free) > 1:
                raise CheckError(f"{hf_pat}: more than one placeholder to stack ({free})")
            count = gg.tensors[name][1][0] if free else None
            names = [hf_pat.format(**bound, **({free[0]: i} if free else {})) for i in range(count or 1)]
            parts = []
            for n in names:
                s = decode(hf, n, used)
                if "mul" in e:
                    other = decode(hf, e["mul"].format(**bound), used)
                    if other.values.size != s.values.size:
                        raise CheckError(f"{n} * {e['mul']}: {s.values.shape} against {other.values.shape}")
                    prod = (s.values * other.values.reshape(s.values.shape)).astype(np.float32)
                    s = Source(f"{s.encoding}*{other.encoding}", prod.astype(np.float64))
                if e.get("fn") == "neg_exp":
                    s = Source(f"-exp({s.encoding})", -np.exp(s.values), approx=True)
                elif "fn" in e:
                    raise CheckError(f"unknown fn {e['fn']!r}")
                for op in e.get("ops", []):
                    s = s.apply(op, hf.config)
                parts.append(s)
            if free:
                encs = {p.encoding for p in parts}
                if len(encs) != 1:
                    raise CheckError(f"{hf_pat}: experts in several encodings {sorted(encs)}")
                stack = lambda attr: None if getattr(parts[0], attr) is None else np.stack([getattr(p, attr) for p in parts])
                src = Source(parts[0].encoding, stack("values"), stack("codes"), stack("exps"))
            else:
                src = parts[0]
            ok, rule, diff, bad = compare(name, gg, src)
        except CheckError as err:
            ok, rule, diff, bad, src = False, str(err), float("nan"), -1, None
        checked += 1
        gtype = fmt.GGUF_TYPE_NAMES.get(gg.tensors[name][0], str(gg.tensors[name][0]))
        how = f"{gtype} <- {src.encoding}{' x' + str(len(names)) if free else ''}" if src else gtype
        print(f"{'OK  ' if ok else 'FAIL'} {name}: {how}: max|diff| {diff:.6g}, "
              f"{bad if bad >= 0 else '?'} element(s) off ({rule})")
        failures += 0 if ok else 1
    companions = ("_scale_inv", "_scale", "_packed", "_shape", "_zero_point")
    for name in sorted(hf.tensors):
        if name in used or any(r.search(name) for r in skip):
            continue
        print(f"FAIL {name}: HF tensor with no counterpart in the GGUF (nor in skip_hf)"
              + (" (a scale or packing companion left over)" if name.endswith(companions) else ""))
        failures += 1
    print(f"{checked} GGUF tensor(s) checked, {len(used)} HF tensor(s) used, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except CheckError as err:
        print(f"check_convert: {err}", file=sys.stderr)
        sys.exit(1)
