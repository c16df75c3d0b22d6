#!/usr/bin/env python3
"""Instructions per weight in the main loops of the integer tensor-core kernels (imma.cu: k_im_reduce,
k_im_scatter, the M = 1..8 decode kernels the device model runs), from `cuobjdump -sass`:

    cuobjdump -sass build-cuda/tcq | python3 bench/cuda/im_sass.py

For each instance, the main loop is the smallest backward-branch range holding the most IMMA
instructions (the unrolled T-block of the reduce, the D k-steps of the scatter); its opcode
histogram, grouped by the pipe that runs it on sm_90, is printed with the weights one pass decodes
per lane: reduce<K, SP, NT> 2 m-tiles x 2 rows x SP positions, scatter<K, NT> D k-steps x 2 inputs
x 16 positions (D = 4, or 2 at NT = 2 except k = 3: im_kernels.cuh).
"""
import re
import sys

# sm_90 pipes (per SM and clock, lanes): ALU (LOP3, SHF, IADD3, ISETP, ...) 64; FMA-heavy (IMAD,
# IMUL) 64; FP32 FMA 128; IMMA on the tensor pipe; loads on LSU/MIO.  Issue: 4 warp-instructions.
PIPE = {
    "alu": {"LOP3", "SHF", "IADD3", "ISETP", "SEL", "LEA", "IABS", "IMNMX", "PRMT", "FLO", "POPC", "BREV",
            "PLOP3", "P2R", "R2P", "VIMNMX", "LOP", "SGXT", "BMSK", "CS2R", "FSEL", "FSETP", "FMNMX"},
    "fmaheavy": {"IMAD", "IMUL", "IDP", "IDP4A"},
    "fp32": {"FADD", "FMUL", "FFMA"},
    "tensor": {"IMMA", "HMMA"},
    "mem": {"LDG", "LDS", "STS", "STG", "LDC", "ULDC", "LD", "ST", "CCTL", "LDL", "STL", "SHFL", "RED", "ATOMG"},
}


def pipe_of(op):
    for p, ops in PIPE.items():
        if op in ops:
            return p
    if op.startswith("U"):
        return "uniform"
    return "other"


def weights_per_pass(name):
    m = re.search(r"k_im_reduceILi(\d)ELi(\d+)ELi(\d)E", name)
    if m:
        return 2 * 2 * int(m.group(2))
    m = re.search(r"k_im_scatterILi(\d)ELi(\d)E", name)
    if m:
        k, nt = int(m.group(1)), int(m.group(2))
        d = 2 if nt == 2 and k != 3 else 4
        return d * 2 * 16
    return None


def analyse(name, body):
    ins = []
    for line in body:
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if not m:
            continue
        addr, text = int(m.group(1), 16), m.group(2).strip()
        toks = text.split()
        op = toks[1] if toks[0].startswith("@") else toks[0]
        base = op.split(".")[0]
        tgt = None
        if base == "BRA":
            t = re.search(r"0x([0-9a-f]+)", text)
            if t:
                tgt = int(t.group(1), 16)
        ins.append((addr, base, tgt))
    loops = [(t, a) for a, b, t in ins if b == "BRA" and t is not None and t < a]
    best = None
    for lo, hi in loops:
        body_ins = [b for a, b, _ in ins if lo <= a <= hi]
        key = (body_ins.count("IMMA"), -len(body_ins))
        if best is None or key > best[0]:
            best = (key, lo, hi, body_ins)
    wpp = weights_per_pass(name)
    if not best or not wpp:
        return
    _, lo, hi, body_ins = best
    hist, pipes = {}, {}
    for b in body_ins:
        hist[b] = hist.get(b, 0) + 1
        p = pipe_of(b)
        pipes[p] = pipes.get(p, 0) + 1
    short = re.sub(r"^.*?(k_im_\w+?E)E.*$", r"\1", name)
    n = len(body_ins)
    print(f"{short}: {len(ins)} instructions, main loop {n} = {n / wpp:.2f} a weight ({wpp} weights a lane a pass)")
    print("   pipes a weight: " + ", ".join(f"{p} {c / wpp:.2f}" for p, c in sorted(pipes.items(), key=lambda x: -x[1])))
    print("   " + " ".join(f"{o}={c}" for o, c in sorted(hist.items(), key=lambda x: -x[1])))


def main():
    name, body = None, []
    for line in sys.stdin:
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name and re.search(r"k_im_(reduce|scatter)", name):
                analyse(name, body)
            name, body = m.group(1), []
        elif name:
            body.append(line)
    if name and re.search(r"k_im_(reduce|scatter)", name):
        analyse(name, body)


if __name__ == "__main__":
    main()
