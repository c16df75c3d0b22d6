#!/bin/bash
# tcq codec and tcq bench encode: JSON lines with the documented keys, sane values, bad options
# rejected with exit code 2.
set -u
TCQ=$1
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; fi; }

out=$("$TCQ" codec --samples 8192 --k 2,4 --threads 2 --json) || { echo "FAIL: codec exited $?"; exit 1; }
check '[ "$(echo "$out" | wc -l)" = 2 ]' "codec --json printed $(echo "$out" | wc -l) lines, want 2"
for key in L k T samples mse rd_bound mw_per_s search; do
    check 'echo "$out" | head -1 | grep -q "\"$key\":"' "codec JSON lacks key $key: $out"
done
mse2=$(echo "$out" | head -1 | sed 's/.*"mse":\([0-9.e-]*\).*/\1/')
check 'awk -v m="$mse2" "BEGIN{exit !(m > 0.070 && m < 0.080)}"' "k=2 MSE $mse2 outside [0.070, 0.080]"
seams=$("$TCQ" codec --samples 4096 --k 2 --search seams --seams 2 --json)
check 'echo "$seams" | grep -q "\"search\":\"seams\""' "seams search not reported: $seams"
# same seed, any thread count: same MSE
a=$("$TCQ" codec --samples 4096 --k 3 --threads 1 --json | sed 's/.*"mse":\([0-9.e-]*\).*/\1/')
b=$("$TCQ" codec --samples 4096 --k 3 --threads 3 --json | sed 's/.*"mse":\([0-9.e-]*\).*/\1/')
check '[ "$a" = "$b" ]' "codec MSE differs with threads: $a vs $b"
"$TCQ" codec --k 9 >/dev/null 2>&1; rc=$?
check '[ $rc -ne 0 ]' "codec --k 9 accepted"
"$TCQ" codec --bogus >/dev/null 2>&1; rc=$?
check '[ $rc -eq 2 ]' "codec --bogus exit $rc, want 2"
"$TCQ" codec --help | grep -q "scale 1" || { echo "FAIL: codec --help does not say the samples are coded at scale 1"; fail=1; }

b=$("$TCQ" bench encode --rows 2 --cols 512 --repeats 1 --k 2 --json) || { echo "FAIL: bench encode exited $?"; exit 1; }
check 'echo "$b" | grep -q "\"mw_per_s\":"' "bench encode JSON lacks mw_per_s: $b"
"$TCQ" bench bogus >/dev/null 2>&1; rc=$?
check '[ $rc -eq 2 ]' "bench bogus exit $rc, want 2"
"$TCQ" bench --help | grep -q encode || { echo "FAIL: bench --help does not list encode"; fail=1; }
exit $fail
