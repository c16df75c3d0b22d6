#!/usr/bin/env bash
# tcq inspect on the bf16 tinyqwen model ($TCQ_TEST_DATA) and on a small trellis model written here.
set -euo pipefail
source "$(dirname "$0")/common.bash"
tcq=$TCQ
data=$BIG_DATA
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if have_data tinyqwen/model.safetensors.index.json; then
  out=$("$tcq" inspect "$data/tinyqwen")
  grep -q "90 tensors in 5 file(s)" <<<"$out" || fail "tinyqwen header line: $out"
  grep -q "totals: 90 tensors, 58739712 bytes" <<<"$out" || fail "tinyqwen totals"
  grep -q "29369856 parameters" <<<"$out" || fail "tinyqwen parameters"
  grep -Eq "model.embed_tokens.weight +BF16 \[8192, 512\]" <<<"$out" || fail "embed_tokens line"
  grep -q '"params": 29369856' <<<"$("$tcq" inspect --json "$data/tinyqwen")" || fail "tinyqwen --json"   # captured first: grep -q closing the pipe early is a SIGPIPE under pipefail
fi

# A model with one trellis module (k=2, T=256, 2 rows of 256: all-zero codes are a valid
# tail-biting path) and one dense tensor.
le64() { local n=$1 i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(( (n >> (8*i)) & 255 )))"; done; }
hdr='{"m.scales":{"dtype":"F16","shape":[2],"data_offsets":[128,132]},"m.weight":{"dtype":"U32","shape":[2,16],"data_offsets":[0,128]},"n.weight":{"dtype":"F32","shape":[3],"data_offsets":[136,148]}}'
while [ $(( (${#hdr}) % 8 )) -ne 0 ]; do hdr="$hdr "; done
mkdir "$tmp/m"
{ le64 ${#hdr}; printf '%s' "$hdr"; head -c 148 /dev/zero; } > "$tmp/m/model.safetensors"
cat > "$tmp/m/config.json" <<'JSON'
{"model_type": "llama",
 "quantization_config": {"language_model.m": {"bits": 2, "group_size": 256, "mode": "trellis",
                                              "trellis": {"L": 12, "code": "1mad", "axis": 1}}}}
JSON
out=$("$tcq" inspect "$tmp/m") || fail "inspect of the trellis model failed: $out"
grep -q "trellis L=12 k=2 T=256 axis=1 interleave=0  W \[2, 256\]  2.0625 bpw" <<<"$out" || fail "trellis line: $out"
grep -q "(scales of m)" <<<"$out" || fail "scales line"
grep -q "trellis: 1 modules, 512 weights, 2.0625 bits per weight" <<<"$out" || fail "trellis totals"
grep -q "515 parameters (3 dense)" <<<"$out" || fail "parameter totals: $out"
json=$("$tcq" inspect --json "$tmp/m")
grep -q '"trellis_bpw": 2.0625' <<<"$json" || fail "json trellis_bpw: $json"
grep -q '"interleave": false' <<<"$json" || fail "json interleave"

# The entry says k=3: the stored shape does not fit, inspect says so and exits 1.
sed -i 's/"bits": 2/"bits": 3/' "$tmp/m/config.json"
if out=$("$tcq" inspect "$tmp/m"); then fail "mismatched entry accepted"; fi
grep -q "INVALID trellis" <<<"$out" || fail "mismatch not reported: $out"

# Bad inputs: a message, exit status 1, no crash.
if "$tcq" inspect "$tmp/none" 2>"$tmp/err"; then fail "missing path accepted"; fi
grep -q "none" "$tmp/err" || fail "missing path message"
head -c 100 "$tmp/m/model.safetensors" > "$tmp/cut.safetensors"
if "$tcq" inspect "$tmp/cut.safetensors" 2>"$tmp/err"; then fail "truncated file accepted"; fi
grep -q "runs past the end of the file" "$tmp/err" || fail "truncated message: $(cat "$tmp/err")"
grep -q "usage: tcq inspect" <<<"$("$tcq" inspect --help)" || fail "--help"
echo "inspect: ok"
test_exit 0
