#!/bin/bash
# tcq run / logits / perplexity on stories260K and tinyqwen: greedy text matches llama2.c, logits
# files are written with the right shape, errors are clean.
set -u
source "$(dirname "$0")/common.bash"
D=$REPO_DATA
# the tinyqwen runs use the 2-bit model in the repository (models/, what `tcq demo` runs)
Q=$SRC/models/tinyqwen-k2
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }

want=$(sed -n "2,/^$/p" "$D/stories260K/stories260K.expected.txt" | head -c 200)
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" --temp 0 -n 100 >"$t/bin.txt" 2>"$t/err"
check "run .bin exit" "[ $? -eq 0 ]"
check "run .bin text" "[ \"\$(head -c 200 \"$t/bin.txt\")\" = \"\$want\" ]"
check "run prints tok/s" "grep -q 'decode: .* tok/s' \"$t/err\""
"$TCQ" run "$D/stories260K/hf" --tokenizer "$D/stories260K/tok512.bin" --temp 0 -n 100 --kv f16 >"$t/hf.txt" 2>"$t/err"
check "run hf text" "[ \"\$(head -c 200 \"$t/hf.txt\")\" = \"\$want\" ]"
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" -p "Once upon a time" --temp 0 -n 20 >"$t/p.txt" 2>/dev/null
check "run with prompt" "head -c 60 \"$t/p.txt\" | grep -q '^Once upon a time, there was a little girl'"
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" --temp 0 -n 100 --ctx 16 >/dev/null 2>"$t/err"
check "context overflow exits 1" "[ $? -eq 1 ] && grep -q 'context' \"$t/err\""
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" --temp 0 -n 100 --stop "Lily" >"$t/s.txt" 2>/dev/null
check "stop string" "[ \"\$(cat \"$t/s.txt\")\" = 'Once upon a time, there was a little girl named ' ]"
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" --temp 1 --seed 3 -n 40 >"$t/a.txt" 2>/dev/null
"$TCQ" run "$D/stories260K/stories260K.bin" --tokenizer "$D/stories260K/tok512.bin" --temp 1 --seed 3 -n 40 --threads 1 >"$t/b.txt" 2>/dev/null
check "seeded run is reproducible" "cmp -s \"$t/a.txt\" \"$t/b.txt\""
R="$TCQ run $D/stories260K/stories260K.bin --tokenizer $D/stories260K/tok512.bin -p 'Once upon a time' --temp 1 -n 30"
eval "$R --seed 6" >"$t/one.txt" 2>/dev/null
eval "$R --seed 5 --parallel 3" >"$t/par.txt" 2>/dev/null
sed -n '/^--- sample 1/,/^--- sample 2/p' "$t/par.txt" | sed '1d;$d' >"$t/par1.txt"
check "parallel sample 1 equals a single run with its seed" "cmp -s \"$t/one.txt\" \"$t/par1.txt\""

# a model whose vocabulary is larger than its tokenizer's (Qwen3: 151936 rows, 151669 tokens):
# tiny_qwen3 with its tokenizer cut to the first 384 ids, as tests/server/vocab.mjs; greedy text
# then holds ids without text, which are tokens without text, not an error
node "$SRC/tests/cli/cut_tokenizer.mjs" "$SRC/tests/data/tiny_chat_tok" "$t" 384
"$TCQ" run "$SRC/tests/data/tiny_qwen3" --tokenizer "$t" -p "the river and the stone" --temp 0 -n 32 >"$t/cut.txt" 2>"$t/err"
check "run: ids past the tokenizer are tokens without text" "[ $? -eq 0 ] && grep -q 'decode: 32 tokens' \"$t/err\""

"$TCQ" logits "$D/stories260K/hf" --tokens 1,403,407 --out "$t/l.safetensors" 2>/dev/null
check "logits exit" "[ $? -eq 0 ]"
check "logits header" "head -c 200 \"$t/l.safetensors\" | grep -q '\"logits\".*\"F32\".*\\[3, *512\\]'"
"$TCQ" logits "$Q" --tokens 5,6,7,8,9,10,11,12 --out "$t/q1.safetensors" --threads 1 2>/dev/null
"$TCQ" logits "$Q" --tokens 5,6,7,8,9,10,11,12 --out "$t/q2.safetensors" --threads 2 2>/dev/null
check "logits identical with 1 and 2 threads" "cmp -s \"$t/q1.safetensors\" \"$t/q2.safetensors\""
"$TCQ" logits "$D/stories260K/hf" --tokens 1,9999 --out "$t/x.safetensors" 2>"$t/err"
check "logits bad token" "[ $? -eq 1 ] && grep -q 'vocabulary' \"$t/err\""
"$TCQ" run "$D/nonexistent" -p hi >/dev/null 2>"$t/err"
check "missing model" "[ $? -eq 1 ] && grep -q 'nonexistent' \"$t/err\""

"$TCQ" run "$Q" --chat -p "What is a kernel module?" -n 8 --temp 0 >"$t/c.txt" 2>"$t/err"
check "run --chat" "[ $? -eq 0 ] && [ -s \"$t/c.txt\" ] && ! grep -q 'im_start' \"$t/c.txt\""
printf 'What is Linux?\nAnd Python?\n' | "$TCQ" chat "$Q" -n 6 --temp 0 >"$t/chat.txt" 2>"$t/err"
check "chat: two turns, the second reuses the KV cache" "[ $? -eq 0 ] && [ \$(grep -c '^\[prefill' \"$t/err\") -eq 2 ] && grep -q '([1-9][0-9]* reused)' \"$t/err\""

head -c 60000 "$D/tinyqwen/valid.txt" >"$t/v.txt"
"$TCQ" perplexity "$Q" "$t/v.txt" --ctx 128 --windows 4 --json >"$t/ppl.json" 2>/dev/null
check "perplexity json" "grep -q '\"windows\": 4' \"$t/ppl.json\""
# the reference runs the exact path whatever --kpath says: the same path on both sides gives 0
"$TCQ" kl "$Q" "$Q" "$t/v.txt" --ctx 64 --windows 2 --kpath exact --json >"$t/kl.json" 2>/dev/null
check "kl of a model with itself is 0" "grep -q '\"mean_kl\": 0.00000000' \"$t/kl.json\" && grep -q '\"top1_agree\": 1.000000' \"$t/kl.json\""
"$TCQ" perplexity "$Q" "$t/v.txt" --kpath bogus >/dev/null 2>"$t/err"
check "bad --kpath is a usage error" "[ $? -eq 2 ] && grep -q 'kpath' \"$t/err\""
"$TCQ" bench model --layers 1 --bits 2 --vocab 512 --prompt 8 --gen 2 --batch 2 --json >"$t/b.json" 2>/dev/null
check "bench model (synthetic trellis k=2)" "grep -q '\"decode_tok_s\": [0-9]' \"$t/b.json\" && grep -q 'trellis k=2' \"$t/b.json\""
exit $fail
