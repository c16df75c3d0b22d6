#!/bin/bash
# --device on the model commands where no GPU can run them (CI: a build without CUDA, or with
# CUDA on a machine without the device): a clear error and a non-zero exit, never a silent CPU
# run; bad --device values are refused; --device cpu and auto (no GPU here) still run.
set -u
source "$(dirname "$0")/common.bash"
D=$REPO_DATA
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }
M="$D/stories260K/stories260K.bin"
TOK="$D/stories260K/tok512.bin"
has_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && has_gpu=1

if [ $has_gpu = 0 ]; then
  for cmd in "run $M --tokenizer $TOK --temp 0 -n 4" "logits $M --tokens 1,2,3 --out $t/l.safetensors" \
             "perplexity $M $D/stories260K/stories260K.expected.txt --tokenizer $TOK --ctx 32 --windows 1" \
             "bench model $M --prompt 8 --gen 2"; do
    "$TCQ" $cmd --device cuda >/dev/null 2>"$t/err"
    rc=$?
    check "${cmd%% *} --device cuda exits non-zero" "[ $rc -ne 0 ]"
    check "${cmd%% *} --device cuda names the problem" "grep -qiE 'cuda' \"$t/err\""
  done
  # serve listens first, then loads: the load fails, the server stops with an error
  timeout 60 "$TCQ" serve "$M" --tokenizer "$TOK" --port 0 --device cuda >/dev/null 2>"$t/err"
  rc=$?
  check "serve --device cuda exits non-zero (not a timeout)" "[ $rc -ne 0 ] && [ $rc -ne 124 ]"
  check "serve --device cuda names the problem" "grep -qiE 'cuda' \"$t/err\""
  "$TCQ" logits "$M" --tokens 1,2,3 --out "$t/l.safetensors" --device cuda:7 >/dev/null 2>"$t/err"
  check "cuda:7 exits non-zero" "[ $? -ne 0 ] && grep -qi 'cuda' \"$t/err\""
  "$TCQ" run "$M" --tokenizer "$TOK" --temp 0 -n 4 --device auto >"$t/auto.txt" 2>/dev/null
  check "auto without a GPU runs on the CPU" "[ $? -eq 0 ] && [ -s \"$t/auto.txt\" ]"
fi
"$TCQ" run "$M" --tokenizer "$TOK" --temp 0 -n 4 --device cpu >"$t/cpu.txt" 2>/dev/null
check "--device cpu runs" "[ $? -eq 0 ] && [ -s \"$t/cpu.txt\" ]"
"$TCQ" serve "$M" --tokenizer "$TOK" --port 0 --device gpu >/dev/null 2>"$t/err"
check "serve --device gpu is refused" "[ $? -eq 2 ] && grep -q -- '--device' \"$t/err\""
for bad in gpu cuda: cuda:x ""; do
  "$TCQ" run "$M" --tokenizer "$TOK" --temp 0 -n 4 --device "$bad" >/dev/null 2>"$t/err"
  check "--device '$bad' is refused" "[ $? -eq 2 ] && grep -q -- '--device' \"$t/err\""
done
"$TCQ" bench model --prompt 8,x --device cpu >/dev/null 2>"$t/err"
check "bench model: bad --prompt list is refused" "[ $? -eq 2 ] && grep -q -- '--prompt' \"$t/err\""
[ $fail = 0 ] && echo "model_device: all checks passed"
exit $fail
