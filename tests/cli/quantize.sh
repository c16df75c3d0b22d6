#!/bin/bash
# tcq quantize: argument errors exit 2, model errors exit 1 with a message naming the file.
set -u
TCQ=$1
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # expected-rc pattern args...
    local want=$1 pat=$2
    shift 2
    "$TCQ" quantize "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$pat" "$tmp/err" "$tmp/out"; then
        echo "FAIL: tcq quantize $* -> rc $rc (want $want), output:"; cat "$tmp/out" "$tmp/err"
        fail=1
    fi
}
check 0 "usage: tcq quantize" --help
check 2 "usage" onlyone
check 2 "bits must be 2, 3 or 4" "$tmp/in" "$tmp/out1" --bits 5
check 2 "needs an integer" "$tmp/in" "$tmp/out1" --bits x
check 2 "default or seams" "$tmp/in" "$tmp/out1" --bits 2 --search best
check 2 "unknown or incomplete option" "$tmp/in" "$tmp/out1" --bits 2 --seams
check 2 "exclude each other" "$tmp/in" "$tmp/out1" --bits 2 --rotate-only
check 2 "lm-head-bits must be" "$tmp/in" "$tmp/out1" --bits 2 --lm-head-bits 5
check 2 "lm-head-bits must be" "$tmp/in" "$tmp/out1" --rotate-only --lm-head-bits 4
check 2 "unknown or incomplete option" "$tmp/in" "$tmp/out1" --bits 2 --frobnicate 1
check 1 "$tmp/in/config.json" "$tmp/in" "$tmp/out1" --bits 2
mkdir -p "$tmp/in"
echo '{"model_type": "mistral", "hidden_size": 256}' >"$tmp/in/config.json"
check 1 'model_type "mistral"' "$tmp/in" "$tmp/out1" --bits 2
echo '{"model_type": "llama", "hidden_size": 256}' >"$tmp/in/config.json"
check 1 "$tmp/in" "$tmp/in" "$tmp/out1" --bits 3
check 2 "device cpu|cuda" "$tmp/in" "$tmp/out1" --bits 2 --device gpu
check 2 "device cuda runs only the default search" "$tmp/in" "$tmp/out1" --bits 2 --device cuda --search seams
check 2 "device cuda handles --L up to 12" "$tmp/in" "$tmp/out1" --bits 2 --device cuda --L 14
# --device cuda on a real model: without CUDA (or a device) a clear error and nothing written;
# with one, the CPU quantizer's artifact byte for byte
model=$(cd "$(dirname "$0")/../data/tiny_llama" && pwd)
"$TCQ" quantize "$model" "$tmp/qcpu" --bits 2 --threads 2 >"$tmp/out" 2>&1 || { echo "FAIL: cpu quantize"; cat "$tmp/out"; fail=1; }
"$TCQ" quantize "$model" "$tmp/qgpu" --bits 2 --threads 2 --device cuda >"$tmp/out" 2>&1
rc=$?
if [ $rc = 0 ]; then
    for f in "$tmp/qcpu"/*; do
        cmp "$f" "$tmp/qgpu/$(basename "$f")" || { echo "FAIL: --device cuda wrote a different $(basename "$f")"; fail=1; }
    done
elif [ $rc != 1 ] || ! grep -q "quantize --device cuda" "$tmp/out" || [ -e "$tmp/qgpu" ]; then
    echo "FAIL: --device cuda without a GPU -> rc $rc (want 1, a message, no output dir):"; cat "$tmp/out"; fail=1
fi
exit $fail
