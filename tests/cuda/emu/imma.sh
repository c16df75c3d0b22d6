#!/usr/bin/env bash
# Run the CUDA integer tensor-core kernels on the host (tests/cuda/emu/imma.cpp) against float64:
#   tests/cuda/emu/imma.sh [CPU_BUILD_DIR (default build)] [quick] [SEED]   (ctest runs it quick)
# Needs g++ with C++20 (std::barrier, std::atomic_ref).  Prints one line per case and "all ok" or "FAILED".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../..
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -std=c++20 -O1 -Wall -Wno-unused-function -Wno-unknown-pragmas -I"$root/include" -I"$root/src" "$here/imma.cpp" "$build/libtcq.a" \
  -lopenblas -lm -lpthread $(pkg-config --libs jansson libpcre2-8 libutf8proc) -o "$out/emu_imma"
shift || true
"$out/emu_imma" "$@"
