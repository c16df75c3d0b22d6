#!/usr/bin/env bash
# Host emulation of the GPU encoder's kernels (src/encode/encode_cuda.cu: k_row_scales, k_encode)
# against the CPU encoder, bit for bit, on a machine without a GPU:
#   tests/cuda/emu/run.sh BUILD_DIR [quick]      (BUILD_DIR: a CPU build with libtcq.a)
# The kernels' source is taken from encode_cuda.cu as it is; each CUDA thread is a std::thread,
# __syncthreads and the warp collectives are barriers, the _rn intrinsics are the host's IEEE
# operations (-ffp-contract=off).  Slow (a block of 256 threads per step): a few blocks per case.
# Catches index, layout and arithmetic-order mistakes before device time is spent; it says nothing
# about speed, occupancy or races the barriers hide.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
enc=$root/src/encode/encode_cuda.cu
{
  awk '/^constexpr int kMaxL = 12;/{on=1} /^\/\* tcq_kernels.h: inputs finite/{on=0} on' "$enc"
  awk '/^size_t enc_smem\(int L, int K, int T\)/{on=1} on{print} on&&/^}/{exit}' "$enc"
} | sed -e 's/extern __shared__ __align__(16) uint8_t smem\[\];/uint8_t *smem = g_smem;/' \
        -e 's/__shared__ float tile\[32\]\[65\];/float (\&tile)[32][65] = *reinterpret_cast<float(*)[32][65]>(g_smem);/' \
  > "$work/kern.inc"
libs=$(grep -o -- '-l[a-z0-9_]*\|/[^ ]*\.so[^ ]*\|/[^ ]*\.a' "$build/CMakeFiles/tcq.dir/link.txt" | grep -v libtcq | grep -v -- '-linux' | tr '\n' ' ')
g++ -std=c++17 -O2 -ffp-contract=off -Wno-unknown-pragmas -I"$root/include" -I"$work" "$here/emu.cpp" -o "$work/emu" \
  "$build/libtcq.a" $libs -lpthread -lm
"$work/emu" ${2:-}
