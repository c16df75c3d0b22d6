#!/usr/bin/env python3
"""Cast a bf16 safetensors model directory to f16 (docs/PERFORMANCE.md, issue 27: what the fast
path's f16 -> bf16 weight rounding costs on a trained model).  Usage:
    bf16_to_f16.py IN_DIR OUT_DIR [--dither SEED]
Every BF16 tensor becomes F16 by numpy's round-to-nearest-even (values past f16's range would
become inf: counted, as are those that land on f16 subnormals or zero); every other tensor and
every non-safetensors file is copied as is; config.json's dtype says float16.  Then it reports
whether f16 -> bf16 (round to nearest even, what the fast path does) gives back the original bf16
bits (and whether the f16 values themselves survive it), and how many values do not.
--dither SEED multiplies every weight by 1 + u, u uniform in [-2^-8, 2^-8), before the cast: a
stand-in for a model trained in f16, whose weights use all 11 bits, so that the rounding to bf16
moves nearly every one of them (by up to bf16's unit roundoff)."""
import json, os, shutil, sys

import numpy as np


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f):
    """round to nearest even (NaN quieted), tcq_f32_to_bf16's bits"""
    u = f.view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def main():
    src, dst = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(int(sys.argv[4])) if len(sys.argv) > 4 and sys.argv[3] == "--dither" else None
    os.makedirs(dst, exist_ok=True)
    n = n_back = n_same = n_inf = n_sub = n_zero = 0
    for name in sorted(os.listdir(src)):
        p = os.path.join(src, name)
        if not name.endswith(".safetensors"):
            if name == "config.json":
                cfg = json.load(open(p))
                cfg["dtype"] = cfg["torch_dtype"] = "float16"
                json.dump(cfg, open(os.path.join(dst, name), "w"), indent=2)
            elif os.path.isfile(p):
                shutil.copy(p, dst)
            continue
        raw = open(p, "rb").read()
        hl = int.from_bytes(raw[:8], "little")
        hdr = json.loads(raw[8 : 8 + hl])
        body = raw[8 + hl :]
        out_hdr, parts, off = {}, [], 0
        for t, info in hdr.items():
            if t == "__metadata__":
                out_hdr[t] = info
                continue
            a, b = info["data_offsets"]
            data = body[a:b]
            if info["dtype"] == "BF16":
                u = np.frombuffer(data, dtype=np.uint16)
                f32 = bf16_to_f32(u)
                if rng is not None:
                    f32 = (f32 * (1 + rng.uniform(-2.0**-8, 2.0**-8, f32.size))).astype(np.float32)
                h = f32.astype(np.float16)
                back = f32_to_bf16(h.astype(np.float32))
                n += u.size
                n_back += int(np.count_nonzero(back == u))
                n_same += int(np.count_nonzero(bf16_to_f32(back) == h.astype(np.float32)))
                n_inf += int(np.count_nonzero(np.isinf(h) & ~np.isinf(f32)))
                n_sub += int(np.count_nonzero((h != 0) & (np.abs(h) < np.float16(6.103515625e-05))))
                n_zero += int(np.count_nonzero((h == 0) & (f32 != 0)))
                data = h.tobytes()
                info = dict(info, dtype="F16")
            info = dict(info, data_offsets=[off, off + len(data)])
            off += len(data)
            out_hdr[t] = info
            parts.append(data)
        hb = json.dumps(out_hdr, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)
        with open(os.path.join(dst, name), "wb") as f:
            f.write(len(hb).to_bytes(8, "little"))
            f.write(hb)
            for d in parts:
                f.write(d)
    print(f"{n} bf16 values cast to f16: {n_inf} overflowed to inf, {n_sub} landed on f16 subnormals, "
          f"{n_zero} flushed to zero")
    print(f"f16 -> bf16 (RNE) gives back the original bf16 bits for {n_back} of {n} "
          f"({'exact round trip' if n_back == n else f'{n - n_back} differ'}); the f16 value itself for {n_same} "
          f"({n - n_same} move)")


if __name__ == "__main__":
    main()
