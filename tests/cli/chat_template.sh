#!/bin/bash
# tcq chat-template: the rendering equals jinja2's (tests/data/chat), --ids, and errors.
set -u
source "$(dirname "$0")/common.bash"
DATA=$REPO_DATA
HERE=$(cd "$(dirname "$0")" && pwd)
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for model in tinyqwen:"$DATA/tinyqwen" qwen3:"$DATA/tokenizers/qwen3"; do
    name=${model%%:*}
    dir=${model#*:}
    "$TCQ" chat-template "$dir" --system "You are a helpful assistant." --user "What is 2+2?" --add-generation-prompt > "$tmp/out.txt"
    cmp -s "$tmp/out.txt" "$HERE/../data/chat/${name}_sys_user_gen.txt" || { echo "FAIL $name rendering"; fail=1; }
done
cat > "$tmp/msgs.json" <<'JSON'
[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}]
JSON
"$TCQ" chat-template "$DATA/tokenizers/qwen3" --messages "$tmp/msgs.json" --add-generation-prompt --thinking off > "$tmp/out.txt"
cmp -s "$tmp/out.txt" "$HERE/../data/chat/qwen3_nothink_gen.txt" || { echo "FAIL qwen3 --messages --thinking off"; fail=1; }
ids=$("$TCQ" chat-template "$DATA/tinyqwen" --user "hi" --add-generation-prompt --ids)
case "$ids" in "1 "*" 2 201 1 "*) ;; *) echo "FAIL --ids: $ids"; fail=1 ;; esac
echo '[{"role": "user"' > "$tmp/bad.json"
out=$("$TCQ" chat-template "$DATA/tinyqwen" --messages "$tmp/bad.json" 2>&1) && { echo "FAIL bad json accepted"; fail=1; }
case $out in *bad.json*) ;; *) echo "FAIL bad json message: $out"; fail=1 ;; esac
printf '{%% if x %%}' > "$tmp/t.jinja"
out=$("$TCQ" chat-template "$tmp/t.jinja" --user hi 2>&1) && { echo "FAIL bad template accepted"; fail=1; }
case $out in *"line 1"*endif*) ;; *) echo "FAIL bad template message: $out"; fail=1 ;; esac
[ $fail = 0 ] && echo "chat_template.sh: ok"
exit $fail
