#!/bin/bash
# tcq bench kernels: a tiny run prints the floors, a dense line and one line per kernel call, as
# JSON; bad options fail with exit code 2.
set -u
tcq=$1
out=$("$tcq" bench kernels --json --shape 256x512 --k 2 --M 1,3 --reps 1 --threads 2) || { echo "bench failed"; exit 1; }
fail=0
for op in '"op":"bandwidth"' '"op":"blas"' '"op":"issue_rate"' '"op":"dense"' '"op":"reduce"' '"op":"scatter"' '"op":"swiglu"'; do
    grep -q "$op" <<<"$out" || { echo "missing $op"; fail=1; }
done
n=$(grep -c '"path":' <<<"$out")
[ "$n" -eq 12 ] || { echo "expected 12 kernel lines (3 ops x 2 M x 2 paths), got $n"; fail=1; }
grep -q '"fast_rel_err":0\.0' <<<"$out" || { echo "fast-path error missing or not small"; fail=1; }
# each ISA measures its floors with its own instructions (the AVX-512 loops fault on an AVX2-only
# CPU): pinned to AVX2 the fast mix is AVX2's and the M = 1 kernel gets an instruction floor; the
# scalar path has no mix, hence none
for isa in avx2 scalar; do
    o=$(TCQ_ISA=$isa "$tcq" bench kernels --json --shape 256x512 --k 2 --M 1 --path fast --ops reduce --reps 1 --no-dense) ||
        { echo "bench failed with TCQ_ISA=$isa"; fail=1; continue; }
    got=$(grep '"op":"issue_rate","mix":"fast"' <<<"$o" | sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')
    [ -n "$got" ] || { echo "$isa: the issue_rate line names no ISA"; fail=1; continue; }
    [ "$isa" = avx2 ] && [ "$got" = scalar ] && continue   # this CPU has no AVX2: the pin falls back
    [ "$got" = "$isa" ] || { echo "TCQ_ISA=$isa: issue_rate measured for $got"; fail=1; }
    floor=$(grep '"op":"reduce"' <<<"$o" | sed -n 's/.*"instr_floor_us":\([0-9.]*\).*/\1/p')
    if [ "$isa" = avx2 ]; then
        awk -v f="$floor" 'BEGIN { exit !(f > 0) }' || { echo "avx2: no instruction floor ($floor)"; fail=1; }
    else
        [ "$floor" = "0.0" ] || { echo "scalar: instruction floor $floor"; fail=1; }
    fi
done
# the registry: --list names every kernel of this CPU; --kernel NAME times that entry and no other
l=$("$tcq" bench kernels --list) || { echo "--list failed"; fail=1; }
for k in trellis.reduce.fast.m1.scalar trellis.scatter.exact.tile.scalar swiglu.fused.fast.shared.scalar f32.blas; do
    grep -q "^$k " <<<"$l" || { echo "--list lacks $k"; fail=1; }
done
o=$("$tcq" bench kernels --json --kernel trellis.scatter.fast.shared.scalar --shape 256x512 --k 2 --reps 1 --no-dense) ||
    { echo "--kernel failed"; fail=1; }
[ "$(grep -c '"path":' <<<"$o")" -eq 3 ] || { echo "--kernel: expected 3 lines (M = 2, 3, 4): $o"; fail=1; }
[ "$(grep -c '"kernel":"trellis.scatter.fast.shared.scalar"' <<<"$o")" -eq 3 ] || { echo "--kernel ran another kernel: $o"; fail=1; }
"$tcq" bench kernels --kernel trellis.nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--kernel trellis.nope accepted"; fail=1; }
"$tcq" bench kernels --k 9 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--k 9 accepted"; fail=1; }
"$tcq" bench kernels --regime nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--regime nope accepted"; fail=1; }
"$tcq" bench nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "bench nope accepted"; fail=1; }
# the CUDA families (src/kernels/cuda/registry.c), listed without a device; --kernel refuses a name
# that is not one
l=$("$tcq" cuda-bench --list) || { echo "cuda-bench --list failed"; fail=1; }
for k in fast int8 int int16 pair wgmma wgmma-ss bf16-gemm; do
    grep -q "^$k " <<<"$l" || { echo "cuda-bench --list lacks $k"; fail=1; }
done
"$tcq" cuda-bench --kernel nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "cuda-bench --kernel nope accepted"; fail=1; }
exit $fail
