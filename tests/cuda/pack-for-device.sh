#!/usr/bin/env bash
# Pack what tests/cuda/run-on-device.sh needs on the device machine into one folder that stays
# under the device tool's 64 MiB carry limit:
#   tests/cuda/pack-for-device.sh BUILD_DIR DEST      (BUILD_DIR built with -DTCQ_CUDA=ON;
#   a dev build with -DCMAKE_CUDA_ARCHITECTURES=90a-real compiles 3x faster)
# then on the device: `cd DEST && ./go.sh` (logs under $OUT).  Binaries and the shared
# libraries tcq links that the device image lacks (jansson, pcre2, utf8proc, OpenBLAS, libedit)
# travel compressed (device-common.sh).
set -euo pipefail
bin=$1 dest=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest"
rm -rf "$dest/lib" "$dest/tcq" "$dest/test_cuda"
for f in tcq test_cuda; do
  cp "$bin/$f" "$dest/$f" && strip "$dest/$f" && gzip -f "$dest/$f"
done
. "$here/device-common.sh"
pack_libs "$bin" "$dest"
cp "$here/run-on-device.sh" "$here/device-common.sh" "$here/quantize-cmp.sh" "$here/../../bench/cuda/fast-sass.sh" "$dest/"
# the model quantize-cmp.sh codes both ways (2.9 MB)
mkdir -p "$dest/data/tiny_llama"
cp "$here/../data/tiny_llama/config.json" "$here/../data/tiny_llama/model.safetensors" "$dest/data/tiny_llama/"
cat > "$dest/go.sh" <<'GO'
#!/usr/bin/env bash
cd "$(dirname "$0")"
for f in tcq test_cuda; do gunzip -kf $f.gz && chmod +x $f; done
. ./device-common.sh
unxz lib.tar.xz | tar x
./run-on-device.sh . "${OUT:-/tmp/tcq-cuda-out}"
GO
chmod +x "$dest/go.sh" "$dest/run-on-device.sh" "$dest/quantize-cmp.sh"
du -sh "$dest"
