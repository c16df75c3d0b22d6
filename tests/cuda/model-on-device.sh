#!/usr/bin/env bash
# The whole model on the GPU, checked and timed in one device call (issue 25).
#   tests/cuda/model-on-device.sh pack BUILD_DIR DEST [MODEL_DIR|FILE ...]
#       binaries (xz), the shared libraries the device image lacks, and the models (copied
#       to DEST/data/<name>) into DEST, under the device tool's 64 MiB carry limit
#   tests/cuda/model-on-device.sh run DEST [OUT_DIR]
#       on the device: test_cuda_model over the packed models, greedy generation and perplexity
#       CPU vs CUDA (data/tq3, tq2 or tq4: 64 tokens, data/valid.txt), compute-sanitizer memcheck on a full
#       generation, then `tcq bench model --device cuda` on the synthetic Qwen3-14B geometry
#       (TCQ_BENCH_LAYERS, default 40; TCQ_BENCH_BITS, default "2 3 4"); with TCQ_NCU=1 first the
#       device time of every kernel of a 2-layer model's run (ncu.log, CSV).  Summary last.
set -u
mode=$1
shift
if [ "$mode" = pack ]; then
  bin=$1 dest=$2
  shift 2
  mkdir -p "$dest/data"
  for f in tcq test_cuda_model; do cp "$bin/$f" "$dest/$f" && strip "$dest/$f" && xz -9 -f -T2 "$dest/$f"; done
  . "$(dirname "$0")/device-common.sh"
  pack_libs "$bin" "$dest"
  cp "$0" "$dest/model-on-device.sh"
  cp "$(dirname "$0")/device-common.sh" "$dest/"
  cp "$(dirname "$0")/../../bench/cuda/ncu-last.py" "$dest/"
  for m in "$@"; do cp -r "$m" "$dest/data/"; done
  du -sh "$dest"
  exit 0
fi
dir=$1
out=${2:-${OUT:-/tmp/tcq-model-out}}
mkdir -p "$out"
cd "$dir" || exit 1
. ./device-common.sh
unpack tcq test_cuda_model
summary=()
step() {   # step NAME TIMEOUT CMD...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout "$to" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-10s rc=%-3s %4ss' "$name" "$rc" "$(( $(date +%s) - t0 ))")")
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$out/gpu.txt" 2>&1
models=()
for m in data/tq3 data/tq2 data/tq4 data/tinyqwen data/stories260K.bin data/tiny_llama; do [ -e "$m" ] && models+=("$m"); done
step test "${TCQ_TEST_TIMEOUT:-240}" ./test_cuda_model "${models[@]}"
grep -E "max\||graphs|device 99|too large|checks" "$out/test.log"
tq=
for m in data/tq3 data/tq2 data/tq4; do [ -d $m ] && { tq=$m; break; }; done
if [ -n "$tq" ]; then
  tokq=$tq
  for dev in cpu cuda; do
    ./tcq run $tq --tokenizer $tokq -p "Once upon a time" --temp 0 -n 64 --kpath exact --device $dev \
      >"$out/greedy_$dev.txt" 2>"$out/greedy_$dev.err"
  done
  if cmp -s "$out/greedy_cpu.txt" "$out/greedy_cuda.txt"; then g=identical; else g=DIFFER; fi
  summary+=("greedy 64 tokens $tq exact cpu vs cuda: $g")
  echo "greedy: $g"; head -c 300 "$out/greedy_cuda.txt"; echo
  if [ -f data/valid.txt ]; then
    for dev in cpu cuda; do
      ./tcq perplexity $tq data/valid.txt --tokenizer $tokq --ctx 256 --windows 16 --kpath exact --device $dev --json \
        >"$out/ppl_$dev.json" 2>"$out/ppl_$dev.err"
    done
    summary+=("ppl cpu $(cat "$out/ppl_cpu.json" | tr -d '\n' | cut -c1-160)")
    summary+=("ppl cuda $(cat "$out/ppl_cuda.json" | tr -d '\n' | cut -c1-160)")
  fi
  if command -v compute-sanitizer >/dev/null 2>&1 && [ "${TCQ_SKIP_SANITIZER:-0}" = 0 ]; then
    step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 ./tcq run $tq --tokenizer $tokq \
      -p "Once upon a time" --temp 0 -n 24 --device cuda
    summary+=("memcheck: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | head -1)")
  fi
fi
if [ "${TCQ_NCU:-0}" = 1 ] && command -v ncu >/dev/null 2>&1; then
  # every kernel's device time in a 2-layer model's run (prefill, then decode steps as graphs)
  step ncu 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum ./tcq bench model --device cuda \
    --bits "${TCQ_NCU_BITS:-2}" --layers 2 --prompt 4 --gen 3 --batch 0
  [ -f ncu-last.py ] && python3 ncu-last.py "$out/ncu.log" "${TCQ_NCU_LAST:-40}" | tee "$out/ncu-last.txt"
fi
if [ "${TCQ_SKIP_BENCH:-0}" = 0 ]; then
  for k in ${TCQ_BENCH_BITS:-2 3 4}; do
    step bench_k$k 150 ./tcq bench model --device cuda --bits $k --layers "${TCQ_BENCH_LAYERS:-40}" \
      --prompt "${TCQ_BENCH_PROMPTS:-128,512,4096}" --gen "${TCQ_BENCH_GEN:-32}" --batch "${TCQ_BENCH_BATCH:-4,16}" --json
    cat "$out/bench_k$k.log"
  done
fi
# the device tool brings back at most 8 files: the logs go back as one archive
(cd "$out" && tar czf logs.tgz --exclude=logs.tgz *.log *.txt *.json *.err 2>/dev/null && rm -f *.log *.err *.json greedy_*.txt)
echo "==== summary ($(date -u +%FT%TZ), $(tail -1 "$out/gpu.txt"))"
printf '%s\n' "${summary[@]}"
