#!/usr/bin/env bash
# tcq serve under the official OpenAI client: bash tests/server/run.sh path/to/tcq
# Starts a server on 127.0.0.1 (a free port the server picks and prints) with the committed tiny
# model (tests/data/tiny_qwen3 + tests/data/tiny_chat_tok), runs test.mjs against it, stops it
# with SIGINT and checks it exited cleanly (under AddressSanitizer that includes no leak).
# Exit 77 (skipped) only where node is missing; npm packages come from `npm ci --prefix tests/server`.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tcq="$1"
command -v node >/dev/null 2>&1 || { echo "server: node is missing: skipped"; exit 77; }
if [ ! -d "$here/node_modules/openai" ]; then
    npm ci --prefix "$here" --no-audit --no-fund >/dev/null 2>&1 ||
        { echo "server: the openai npm package is missing and npm ci failed (run npm ci --prefix tests/server)"; exit 1; }
fi
log="$(mktemp -d)"
trap 'rm -rf "$log"' EXIT
start() {   # start NAME ARGS...: the server's pid in $pid, its base URL in $url
    local name="$1"; shift
    "$tcq" serve "$root/tests/data/tiny_qwen3" --tokenizer "$root/tests/data/tiny_chat_tok" --port 0 "$@" \
        >"$log/$name.out" 2>"$log/$name.err" &
    pid=$!
    url=""
    for _ in $(seq 1 300); do
        url=$(sed -n 's|^tcq serve: listening on \(http://.*\)$|\1|p' "$log/$name.out" 2>/dev/null)
        [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "server: $name did not come up"; cat "$log/$name.err"; return 1
}
stop() {    # stop NAME: SIGINT, then its exit status must be 0
    kill -INT "$pid"
    wait "$pid"
    local rc=$?
    if [ $rc -ne 0 ]; then echo "server: $1 exited with $rc"; tail -40 "$log/$1.err"; return 1; fi
}
rc=0
start main --parallel 16 --api-key test-key --alias tiny --body-limit 65536 || exit 1
TCQ_URL="$url" TCQ_KEY=test-key node "$here/test.mjs" || rc=1
stop main || rc=1
grep -c '^POST' "$log/main.err" | sed 's/^/server: request lines logged: /'
# Listening before the model has loaded (--load-after stands for a slow load: loading starts only
# once the gate file exists, so no clock decides the outcome): /health and the completion routes
# answer 503 until it is ready, then 200.  The model is the tiny one with a
# tokenizer cut to its first 384 ids, so that replies hold ids without text (tests/server/vocab.mjs).
mkdir -p "$log/tok384"
node "$root/tests/cli/cut_tokenizer.mjs" "$root/tests/data/tiny_chat_tok" "$log/tok384" 384
"$tcq" serve "$root/tests/data/tiny_qwen3" --tokenizer "$log/tok384" --port 0 --parallel 4 --load-after "$log/gate" \
    >"$log/slow.out" 2>"$log/slow.err" &
pid=$!
url=""
for _ in $(seq 1 100); do
    url=$(sed -n 's|^tcq serve: listening on \(http://.*\)$|\1|p' "$log/slow.out" 2>/dev/null)
    [ -n "$url" ] && break
    sleep 0.05
done
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
h=$(code "$url/health") c=$(code -X POST -d '{"prompt":"x"}' "$url/v1/completions")
if [ "$h" = 503 ] && [ "$c" = 503 ] && curl -s "$url/health" | grep -q '"loading"'; then
    echo "ok   while loading: /health 503, /v1/completions 503"
else
    echo "FAIL while loading: /health $h, /v1/completions $c (want 503, 503)"; rc=1
fi
touch "$log/gate"
for _ in $(seq 1 300); do [ "$(code "$url/health")" = 200 ] && break; sleep 0.1; done
if [ "$(code "$url/health")" = 200 ]; then echo "ok   loaded: /health 200"; else echo "FAIL /health never 200"; rc=1; fi
TCQ_URL="$url" node "$here/vocab.mjs" || rc=1
stop slow || rc=1
# The chat page in a real browser, where chromium is installed (tests/server/page.mjs).
if command -v chromium >/dev/null 2>&1 && [ -d "$here/node_modules/playwright-core" ]; then
    start page --parallel 2 --ctx 2048 || exit 1
    TCQ_URL="$url" node "$here/page.mjs" || rc=1
    stop page || rc=1
else
    echo "server: chromium or playwright-core missing: the chat page test did not run"
fi
[ $rc -eq 0 ] && echo "server: all passed"
exit $rc
