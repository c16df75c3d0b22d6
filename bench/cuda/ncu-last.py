#!/usr/bin/env python3
"""The last N kernels of an `ncu --csv --metrics gpu__time_duration.sum` log, in launch order, with
their device time (one decode step of `tcq bench model`, which ends with its decode steps), then
the same N grouped by kernel name.  Usage: ncu-last.py LOG [N]"""
import csv, sys

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        v = float(r["Metric Value"].replace(",", ""))
        if r.get("Metric Unit") in ("nsecond", "ns"):
            v /= 1000.0
        elif r.get("Metric Unit") in ("msecond", "ms"):
            v *= 1000.0
        rows.append((r["Kernel Name"][:70], v, r.get("Grid Size", ""), r.get("Block Size", "")))
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
last = rows[-n:]
for name, us, g, b in last:
    print(f"{us:9.2f} us  {g:>16} {b:>12}  {name}")
print(f"sum of the last {len(last)}: {sum(r[1] for r in last):.1f} us (of {len(rows)} kernels)")
groups = {}
for name, us, _, _ in last:
    c, t = groups.get(name, (0, 0.0))
    groups[name] = (c + 1, t + us)
for name, (c, t) in sorted(groups.items(), key=lambda x: -x[1][1]):
    print(f"{t:9.2f} us {c:3d}x  {name}")
