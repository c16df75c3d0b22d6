#!/bin/bash
# tcq quantize with a calibration (issue 23): clear errors for a missing / empty / too short
# calibration file, a --bpw outside [2, 4], LDLQ without Hessians; an LDLQ artifact and a mixed
# (--bpw) artifact of tests/data/tiny_llama (given a character tokenizer) load and run, the
# saved Hessians are reused, inspect shows the k mix, and --layers 1 (with --calib-mode sequential)
# writes a one-layer model that runs.
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
model="$tmp/model"
mkdir -p "$model"
cp "$(dirname "$0")/../data/tiny_llama/config.json" "$(dirname "$0")/../data/tiny_llama/model.safetensors" "$model/"
# a character-level BPE tokenizer (ids < 512, the model's vocabulary): <unk>, a-z, space
{
    printf '{"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null, '
    printf '"post_processor": null, "decoder": null, "model": {"type": "BPE", "unk_token": "<unk>", '
    printf '"fuse_unk": false, "byte_fallback": false, "vocab": {"<unk>": 0, " ": 1'
    i=2
    for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do printf ', "%s": %d' "$c" $i; i=$((i + 1)); done
    printf '}, "merges": []}}\n'
} >"$model/tokenizer.json"
words="the quick brown fox jumps over a lazy dog while seven wizards quietly hex big jugs "
for i in $(seq 60); do printf '%s' "$words"; done >"$tmp/calib.txt"   # ~5000 tokens
: >"$tmp/empty.txt"
printf 'short text' >"$tmp/short.txt"

check 2 "method rtn|ldlq" "$model" "$tmp/o" --bits 2 --method gptq
check 2 "needs a number" "$model" "$tmp/o" --bits 2 --bpw x
check 2 "calib-mode sequential|original" "$model" "$tmp/o" --bits 2 --calib-mode gptq
check 2 "asym layer|within" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/calib.txt" --asym yes
check 1 "asymmetric targets need LDLQ with a sequential calibration" "$model" "$tmp/o" --bits 2 --method ldlq \
    --calib "$tmp/calib.txt" --asym layer
check 2 "asym-alpha needs a number" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/calib.txt" --asym-alpha x
check 1 "asym alpha 0.25: in \[0, 2\] (0: 0.25), with asym only" "$model" "$tmp/o" --bits 2 --method ldlq \
    --calib "$tmp/calib.txt" --calib-mode sequential --asym-alpha 0.25
check 1 "needs a calibration" "$model" "$tmp/o" --bits 2 --method ldlq
check 1 "bits per weight 5 outside \[2, 4\]" "$model" "$tmp/o" --bits 2 --bpw 5 --calib "$tmp/calib.txt"
check 1 "bits per weight 1.5 outside \[2, 4\]" "$model" "$tmp/o" --bits 2 --bpw 1.5 --calib "$tmp/calib.txt"
check 2 "alloc-windows in \[0, 65536\]" "$model" "$tmp/o" --bits 2 --bpw 3 --calib "$tmp/calib.txt" --alloc-windows -2
check 2 "alloc-costs and --save-alloc need --bpw" "$model" "$tmp/o" --bits 2 --calib "$tmp/calib.txt" --save-alloc "$tmp/c"
check 2 "scale-search in \[0, 9\]" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/calib.txt" --scale-search 10
check 2 "axis0-group must be in \[1, 256\]" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/calib.txt" --axis0-group 0
check 2 "axis0-group must be in \[1, 256\]" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/calib.txt" --axis0-group 257
check 1 "calibration file $tmp/nope.txt" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/nope.txt"
check 1 "calibration file $tmp/empty.txt is empty" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/empty.txt"
check 1 "shorter than one window of 128" "$model" "$tmp/o" --bits 2 --method ldlq --calib "$tmp/short.txt" --calib-ctx 128
touch "$tmp/hessians.bin"
check 1 "not a tcq Hessian file" "$model" "$tmp/o" --bits 2 --method ldlq --hessians "$tmp"

# LDLQ at k = 2 with saved Hessians, then a mixed artifact from them
check 0 "method ldlq" "$model" "$tmp/q2" --bits 2 --method ldlq --calib "$tmp/calib.txt" --calib-tokens 2048 \
    --calib-ctx 128 --save-hessians "$tmp/h" --threads 2
grep -q "proxy" "$tmp/err" || { echo "FAIL: no per-tensor proxy lines"; cat "$tmp/err"; fail=1; }
check 1 "Hadamard seed 1, not 2" "$model" "$tmp/o" --bits 2 --method ldlq --hessians "$tmp/h" --seed 2
check 0 "method ldlq" "$model" "$tmp/q2g" --bits 2 --method ldlq --hessians "$tmp/h" --axis0-group 8 --threads 2
check 2 "bpw needs --calib FILE" "$model" "$tmp/o" --bits 2 --method ldlq --hessians "$tmp/h" --bpw 3
# a mixed artifact: saved Hessians, the text's first 2 windows measure each candidate's KL (cost lines)
check 0 "method ldlq" "$model" "$tmp/qm" --bits 2 --method ldlq --hessians "$tmp/h" --bpw 3 \
    --calib "$tmp/calib.txt" --calib-ctx 128 --alloc-windows 2 --save-alloc "$tmp/costs.txt" --threads 2
grep -Eq "model.layers.1.mlp.down_proj.weight +cost k=2 [0-9.e+-]+ k=3" "$tmp/err" || { echo "FAIL: no cost lines"; cat "$tmp/err"; fail=1; }
bpw=$(sed -n 's/.*method ldlq, \([0-9.]*\) bits per coded weight.*/\1/p' "$tmp/err")
awk -v b="$bpw" 'BEGIN { exit !(b > 2.5 && b <= 3.07) }' || { echo "FAIL: --bpw 3 gave $bpw bits per weight"; fail=1; }
# the saved costs at another budget: no text needed
check 0 "method ldlq" "$model" "$tmp/qk" --bits 2 --method ldlq --hessians "$tmp/h" --bpw 2.5 --alloc-costs "$tmp/costs.txt" --threads 2
bpw=$(sed -n 's/.*method ldlq, \([0-9.]*\) bits per coded weight.*/\1/p' "$tmp/err")
awk -v b="$bpw" 'BEGIN { exit !(b > 2.2 && b <= 2.57) }' || { echo "FAIL: --bpw 2.5 from costs gave $bpw bits per weight"; fail=1; }
"$TCQ" inspect "$tmp/qm" >"$tmp/ins" 2>&1 || { echo "FAIL: inspect"; fail=1; }
grep -q "trellis k mix:.*k=2.*k=[34]" "$tmp/ins" || { echo "FAIL: inspect shows no k mix"; cat "$tmp/ins"; fail=1; }
# --layers 1: a one-layer model, sequential Hessians
check 0 "layer 1/1: Hessians ready" "$model" "$tmp/q1" --bits 2 --method ldlq --calib "$tmp/calib.txt" \
    --calib-tokens 1024 --calib-ctx 128 --calib-mode sequential --layers 1 --threads 2
grep -q '"num_hidden_layers": *1' "$tmp/q1/config.json" || { echo "FAIL: --layers 1 config"; cat "$tmp/q1/config.json"; fail=1; }
grep -Eq "model.layers.0.mlp.down_proj.weight +k=2 proxy .* [0-9.]+ s$" "$tmp/err" || { echo "FAIL: tensor line"; cat "$tmp/err"; fail=1; }
# --device cuda with a calibration (the GPU's Hessians, LDL and LDLQ): without CUDA or a device a
# clear error, non-zero, nothing written; with one it runs (tests/cuda/quantize-ldlq-on-device.sh
# compares it with the CPU's)
"$TCQ" quantize "$model" "$tmp/qg" --bits 2 --method ldlq --calib "$tmp/calib.txt" --calib-tokens 1024 \
    --calib-ctx 128 --threads 2 --device cuda >"$tmp/out" 2>&1
rc=$?
if [ $rc != 0 ] && { [ $rc != 1 ] || ! grep -q "quantize --device cuda" "$tmp/out" || [ -e "$tmp/qg" ]; }; then
    echo "FAIL: --device cuda --method ldlq without a GPU -> rc $rc (want 1, a message, no output dir):"; cat "$tmp/out"; fail=1
fi
for q in q1 q2 qm qk; do
    "$TCQ" run "$tmp/$q" -p "the quick" -n 4 --temp 0 >"$tmp/run" 2>&1 || { echo "FAIL: run $q"; cat "$tmp/run"; fail=1; }
done
exit $fail
