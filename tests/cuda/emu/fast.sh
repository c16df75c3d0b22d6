#!/usr/bin/env bash
# Run the CUDA fast-path kernels on the host (tests/cuda/emu/fast.cpp) against a CPU build:
#   tests/cuda/emu/fast.sh [CPU_BUILD_DIR (default build)] [SEED]
# Needs g++ with C++20 (std::barrier).  Prints one line per case and "all ok" or "FAILED".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../..
build=${1:-$root/build}
out=$(mktemp -d)
g++ -std=c++20 -O1 -Wall -Wno-unused-function -Wno-unknown-pragmas -I"$root/include" -I"$root/src" "$here/fast.cpp" "$build/libtcq.a" \
  -lopenblas -lm -lpthread $(pkg-config --libs jansson libpcre2-8 libutf8proc) -o "$out/emu_fast"
"$out/emu_fast" ${2:-}
