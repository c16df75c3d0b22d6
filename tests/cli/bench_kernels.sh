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
"$tcq" bench kernels --k 9 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--k 9 accepted"; fail=1; }
"$tcq" bench kernels --regime nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--regime nope accepted"; fail=1; }
"$tcq" bench nope >/dev/null 2>&1; [ $? -eq 2 ] || { echo "bench nope accepted"; fail=1; }
exit $fail
