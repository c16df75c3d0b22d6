#!/bin/bash
# tcq tokenize: ids for known texts, --json, --no-bos, and clear errors for bad input.
set -u
source "$(dirname "$0")/common.bash"
DATA=$REPO_DATA
fail=0
expect() {  # expect NAME WANT GOT
    if [ "$2" != "$3" ]; then echo "FAIL $1: want '$2' got '$3'"; fail=1; fi
}
expect llama2c "1 403 407 261 378" "$("$TCQ" tokenize "$DATA/stories260K/tok512.bin" --text "Once upon a time")"
expect llama2c-nobos "403 407 261 378" "$("$TCQ" tokenize "$DATA/stories260K/tok512.bin" --text "Once upon a time" --no-bos)"
expect qwen3-json "[9707,1879,0]" "$("$TCQ" tokenize "$DATA/tokenizers/qwen3/tokenizer.json" --text "Hello world!" --json)"
expect qwen3-special "151644 872" "$("$TCQ" tokenize "$DATA/tokenizers/qwen3" --text "<|im_start|>user")"
out=$("$TCQ" tokenize "$DATA/no-such-dir" --text x 2>&1); rc=$?
expect missing-rc 1 $rc
case $out in *no-such-dir*) ;; *) echo "FAIL missing: message does not name the path: $out"; fail=1 ;; esac
tmp=$(mktemp -d)
printf '{"model": {"type": "BPE", "vocab": ' > "$tmp/tokenizer.json"
out=$("$TCQ" tokenize "$tmp" --text x 2>&1); rc=$?
expect malformed-rc 1 $rc
case $out in *"$tmp/tokenizer.json"*) ;; *) echo "FAIL malformed: message does not name the file: $out"; fail=1 ;; esac
rm -rf "$tmp"
"$TCQ" tokenize 2>/dev/null; expect usage-rc 2 $?
[ $fail = 0 ] && echo "tokenize.sh: ok"
exit $fail
