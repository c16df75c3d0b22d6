#!/bin/bash
# Every command's failure: a bad model path, a bad flag, a prompt longer than the context, a
# malformed file... exits non-zero, prints an error naming the problem on stderr, and prints no
# statistics (tok/s, perplexity, KL, weights/s, "wrote") for work it did not do.
set -u
source "$(dirname "$0")/common.bash"
Q=$SRC/models/tinyqwen-k2
S=$REPO_DATA/stories260K
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
printf 'not json' >"$t/bad.json"
mkdir "$t/badmodel" && printf '{"model_type": "qwen3"' >"$t/badmodel/config.json"
printf 'NOTSAFETENSORS' >"$t/bad.safetensors"
python_free_long() { local i s=""; for i in $(seq 600); do s="$s kernel module"; done; printf '%s' "$s"; }
LONG=$(python_free_long)
printf '%s' "$LONG" >"$t/long.txt"
# figures, not the words of a usage text
STATS='[0-9] tok/s|perplexity [0-9]|KL\(ref \|\| model\): mean|[0-9] ?M? weights/s|^wrote|"(mse|perplexity|mean_kl|mw_per_s|decode_tok_s)": ?[0-9]'

# name, pattern the error must contain, then the command's arguments
expect_fail() {
    local name=$1 pat=$2
    shift 2
    "$TCQ" "$@" >"$t/out" 2>"$t/err" </dev/null
    local rc=$?
    if [ $rc = 0 ]; then echo "FAIL $name: exit 0"; fail=1; return; fi
    [ $rc -ge 126 ] && { echo "FAIL $name: crashed (exit $rc)"; fail=1; }
    grep -qE -- "$pat" "$t/err" || { echo "FAIL $name: stderr lacks /$pat/:"; sed 's/^/    /' "$t/err" | head -5; fail=1; }
    if grep -qE -- "$STATS" "$t/out" "$t/err"; then
        echo "FAIL $name: statistics printed for work not done:"; grep -hE -- "$STATS" "$t/out" "$t/err" | head -3; fail=1
    fi
}

expect_fail "unknown command" "unknown command|bogus" bogus
expect_fail "demo: bad flag" "--bogus" demo --bogus
expect_fail "demo: missing model" "no-such-model" demo --model "$t/no-such-model"
expect_fail "demo --codec: bad k" "k" demo --codec --k 9
expect_fail "codec: bad flag" "--bogus" codec --bogus
expect_fail "codec: bad k" "k" codec --k 9
expect_fail "inspect: missing file" "no-such" inspect "$t/no-such.safetensors"
expect_fail "inspect: malformed file" "bad.safetensors" inspect "$t/bad.safetensors"
expect_fail "quantize: bad bits" "bits" quantize "$Q" "$t/q" --bits 7
expect_fail "quantize: missing model" "no-such" quantize "$t/no-such" "$t/q" --bits 2
expect_fail "run: missing model" "no-such" run "$t/no-such" -p hi
expect_fail "run: malformed config" "config.json" run "$t/badmodel" -p hi
expect_fail "run: bad flag" "--bogus" run "$Q" --bogus
expect_fail "run: prompt longer than the context" "context" run "$Q" -p "$LONG" --ctx 64 -n 4
expect_fail "run --parallel: prompt longer than the context" "context" run "$Q" -p "$LONG" --ctx 64 -n 4 --parallel 2
expect_fail "chat: missing model" "no-such" chat "$t/no-such"
printf '%s\n' "$LONG" | "$TCQ" chat "$Q" --ctx 64 -n 4 >"$t/out" 2>"$t/err"
rc=$?
{ [ $rc != 0 ] && grep -q context "$t/err" && ! grep -qE -- "$STATS" "$t/err"; } ||
    { echo "FAIL chat: a turn longer than the context: exit $rc"; cat "$t/err" | head -5; fail=1; }
expect_fail "logits: bad token" "vocabulary" logits "$S/hf" --tokens 1,9999 --out "$t/l.safetensors"
[ -e "$t/l.safetensors" ] && { echo "FAIL logits: wrote a file for a failed run"; fail=1; }
expect_fail "logits: missing model" "no-such" logits "$t/no-such" --tokens 1 --out "$t/l.safetensors"
expect_fail "perplexity: missing text" "no-such.txt" perplexity "$Q" "$t/no-such.txt"
expect_fail "perplexity: text shorter than a window" "window|token" perplexity "$S/hf" "$t/bad.json" --tokenizer "$S/tok512.bin" --ctx 256
expect_fail "kl: missing reference" "no-such" kl "$Q" "$t/no-such" "$t/long.txt"
expect_fail "tokenize: missing tokenizer" "no-such" tokenize "$t/no-such" --text x
expect_fail "tokenize: malformed tokenizer" "bad.json" tokenize "$t/bad.json" --text x
expect_fail "chat-template: malformed messages" "bad.json" chat-template "$Q" --messages "$t/bad.json"
expect_fail "bench: unknown benchmark" "bogus" bench bogus
expect_fail "bench model: missing model" "no-such" bench model "$t/no-such"
[ $fail = 0 ] && echo "failures.sh: ok"
exit $fail
