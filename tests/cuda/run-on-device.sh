#!/usr/bin/env bash
# Everything the CUDA backend checks on a GPU machine, in one call:
#   tests/cuda/run-on-device.sh [BIN_DIR] [OUT_DIR]
# BIN_DIR holds test_cuda and tcq (built with -DTCQ_CUDA=ON); logs and the bench JSON go to
# OUT_DIR.  Runs the full test, `tcq quantize --device cuda` against the CPU quantizer
# (quantize-cmp.sh), compute-sanitizer memcheck and racecheck on the quick test, the fast
# kernels' SASS count (bench/cuda/fast-sass.sh, if cuobjdump is there), then
# `tcq cuda-bench` (or, with TCQ_AB_BIN, an alternated A/B against a second build).  Prints a short
# summary last.
set -u
bin=${1:-build-cuda}
out=${2:-${OUT:-/tmp/tcq-cuda-out}}
mkdir -p "$out"
# BIN_DIR/lib: shared libraries tcq links that the device image lacks (jansson, pcre2, utf8proc,
# OpenBLAS, libedit and theirs), copied there beside the binaries.
export LD_LIBRARY_PATH=$bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
summary=()
step() {   # step NAME TIMEOUT CMD...
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout "$to" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-12s rc=%-3s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(grep -E 'checks|ERROR SUMMARY|RACECHECK SUMMARY|worst' "$out/$name.log" | tr '\n' ' ' | cut -c1-150)")")
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
step test "${TCQ_TEST_TIMEOUT:-300}" "$bin/test_cuda"
grep -E "CHECK|worst|device" "$out/test.log" | head -30
# tcq quantize --device cuda against the CPU quantizer, byte for byte (tiny_llama: packed beside
# the binaries by pack-for-device.sh, or the repository's tests/data)
here=$(cd "$(dirname "$0")" && pwd)
model=
for d in "$bin/data/tiny_llama" "$here/../data/tiny_llama" "$here/data/tiny_llama"; do
  if [ -f "$d/config.json" ]; then model=$d; break; fi
done
if [ -n "$model" ] && [ -f "$here/quantize-cmp.sh" ]; then
  # the eight quantized models go to a temporary folder, not OUT_DIR: the device tool brings back
  # a limited number of files (quantize-cmp.sh prints a failing run's log into quantize.log)
  qwork=$(mktemp -d)
  step quantize "${TCQ_QUANTIZE_TIMEOUT:-300}" bash "$here/quantize-cmp.sh" "$bin/tcq" "$model" "$qwork"
  rm -rf "$qwork"
  grep -E "^ok:|FAIL|differ" "$out/quantize.log" | head -20
else
  summary+=("quantize: skipped (no tiny_llama model or quantize-cmp.sh)")
fi
if command -v compute-sanitizer >/dev/null 2>&1; then
  TCQ_CUDA_TEST_QUICK=1 step memcheck "${TCQ_MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_cuda"
  TCQ_CUDA_TEST_QUICK=1 step racecheck "${TCQ_RACECHECK_TIMEOUT:-300}" compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/test_cuda"
else
  summary+=("compute-sanitizer: not found")
fi
# SASS instruction count per weight of the fast kernels (docs/PERFORMANCE.md, "CUDA fast path")
here=$(cd "$(dirname "$0")" && pwd)
sass=$here/fast-sass.sh
[ -f "$sass" ] || sass=$here/../../bench/cuda/fast-sass.sh
[ -f "$sass" ] && bash "$sass" "$bin/test_cuda" > "$out/fast-sass.log" 2>&1 && cat "$out/fast-sass.log"
if [ "${TCQ_SKIP_BENCH:-0}" = 0 ]; then
  if [ -n "${TCQ_AB_BIN:-}" ]; then
    # A/B of two builds in the same call: TCQ_AB_BIN=DIR (holding the other tcq) runs the bench with
    # BIN_DIR's tcq (a) and DIR's (b), alternated TCQ_AB_ROUNDS times (default 2): ab_<a|b>_r<round>.log
    for r in $(seq 1 "${TCQ_AB_ROUNDS:-2}"); do
      for v in a b; do
        t=$bin/tcq; [ "$v" = b ] && t=$TCQ_AB_BIN/tcq
        timeout "${TCQ_BENCH_TIMEOUT:-300}" "$t" cuda-bench ${TCQ_BENCH_ARGS:-} >"$out/ab_${v}_r$r.log" 2>&1
        summary+=("$(printf 'ab %s (%s) round %s rc=%s' "$v" "$t" "$r" "$?")")
      done
    done
  else
    step bench "${TCQ_BENCH_TIMEOUT:-300}" "$bin/tcq" cuda-bench ${TCQ_BENCH_ARGS:-}
    cat "$out/bench.log"
  fi
fi
echo "==== summary ($(date -u +%FT%TZ), $(head -2 "$out/gpu.txt" | tail -1))"
printf '%s\n' "${summary[@]}"
