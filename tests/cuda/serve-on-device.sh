#!/usr/bin/env bash
# tcq serve --device cuda, checked and timed in a device call (issue 24: "--device cuda once the GPU
# runtime exists; the scheduler is the same").  Python stdlib client (serve_client.py): the device
# image has no node for the CI's openai-package tests (tests/server).
#   tests/cuda/serve-on-device.sh run DIR [OUT_DIR]
#       DIR: a pack of quantize-ldlq-on-device.sh (tcq, lib.tar.xz, device-common.sh,
#       data/qwen3-tokenizer.json.xz) plus serve_client.py, this script and data/tq3 (a small
#       Qwen3 trellis artifact with a chat template).
#       (a) the API on tq3 on the GPU (serve_client.py check), --kpath exact and auto, with the
#           count of 16 concurrent greedy streams identical to 16 sequential ones;
#       (b) aggregate tokens/s at 1, 4 and 16 clients on the synthetic Qwen3-14B geometry
#           (TCQ_SERVE_LAYERS, default 40; TCQ_SERVE_BITS, default 2) on the GPU.
#       Summary last; every log in OUT_DIR.  TCQ_SERVE_DEVICE=cpu: a dry run without a GPU.
set -u
[ "${1:-}" = run ] || { echo "usage: $0 run DIR [OUT_DIR]" >&2; exit 2; }
dir=$2
out=${3:-${OUT:-/tmp/tcq-serve-out}}
mkdir -p "$out"
cd "$dir" || exit 1
. ./device-common.sh
unpack tcq
[ -f data/qwen3-tokenizer.json.xz ] && unxz data/qwen3-tokenizer.json.xz >data/qwen3-tokenizer.json
summary=()
port=18300
serve() {   # serve LOG ARGS...: start tcq serve, wait for its address; sets pid and url
  local log=$1
  shift
  port=$((port + 1))
  ./tcq serve "$@" --port $port --quiet >"$log" 2>&1 &
  pid=$!
  url=http://127.0.0.1:$port
  for _ in $(seq 300); do grep -q "listening on" "$log" 2>/dev/null && break; sleep 0.2; done
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
for kp in exact auto; do
  serve "$out/serve_tq3_$kp.log" data/tq3 --device ${TCQ_SERVE_DEVICE:-cuda} --parallel 16 --kpath $kp
  timeout 240 python3 serve_client.py check "$url" >"$out/check_$kp.log" 2>&1
  rc=$?
  stop
  summary+=("tq3 --kpath $kp on ${TCQ_SERVE_DEVICE:-cuda}: check rc=$rc, $(grep -c '^ok' "$out/check_$kp.log") ok, $(grep -c '^FAIL' "$out/check_$kp.log") failed; $(grep -o '[0-9]*/16 identical' "$out/check_$kp.log")")
  grep '^FAIL' "$out/check_$kp.log" | head -5 | while read -r l; do echo "  $l"; done
done
L=${TCQ_SERVE_LAYERS:-40}
for k in ${TCQ_SERVE_BITS:-2}; do
  serve "$out/serve_synth_k$k.log" --synthetic "$L,$k" --tokenizer data/qwen3-tokenizer.json --device ${TCQ_SERVE_DEVICE:-cuda} --parallel 16 --ctx 512
  timeout 240 python3 serve_client.py load "$url" --clients 1,4,16,1,4,16 --gen 64 >"$out/load_k$k.log" 2>&1
  stop
  summary+=("synthetic 14B geometry, $L layers, k = $k, ${TCQ_SERVE_DEVICE:-cuda}: $(tr '\n' ' ' <"$out/load_k$k.log" | cut -c1-900)")
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
