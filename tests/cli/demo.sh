#!/bin/bash
# tcq demo: the 2-bit tinyqwen in models/ writes the prompt and a greedy continuation, its bits per
# weight, prefill and decode tok/s; the same prompt at bf16 with --bf16 (when the big test data is
# there); --codec keeps the codec demonstration.
set -u
source "$(dirname "$0")/common.bash"
fail=0
out=$("$TCQ" demo -n 12 2>/dev/null) || { echo "FAIL: demo exited $?"; exit 1; }
check() { grep -qE -- "$1" <<<"$out" || { echo "FAIL: demo output lacks /$1/:"; echo "$out"; fail=1; }; }
check "^The Linux kernel loads a module into memory when .+"
check "bits/weight  2\.3[0-9]* over 29\.4M trellis-coded weights"
check "prefill +[0-9]+ tokens, [0-9.]+ tok/s"
check "decode +12 tokens, [0-9.]+ tok/s"
check "bf16 +not shipped"
# greedy: the same text twice, and with one thread
a=$("$TCQ" demo -n 12 --threads 1 2>/dev/null | head -4)
[ "$a" = "$(head -4 <<<"$out")" ] || { echo "FAIL: demo text differs with --threads 1"; fail=1; }
if have_data tinyqwen/model.safetensors.index.json; then
    out=$("$TCQ" demo -n 4 --bf16 "$BIG_DATA/tinyqwen" 2>/dev/null) || { echo "FAIL: demo --bf16 exited $?"; fail=1; }
    check "bf16 +.*tinyqwen: prefill [0-9.]+ tok/s, decode [0-9.]+ tok/s \(4 tokens\)"
fi
c=$("$TCQ" demo --codec --rows 16 --cols 512 2>&1) || { echo "FAIL: demo --codec exited $?"; fail=1; }
grep -q "normalized MSE" <<<"$c" || { echo "FAIL: demo --codec: $c"; fail=1; }
[ $fail = 0 ] && echo "demo.sh: ok"
test_exit $fail
