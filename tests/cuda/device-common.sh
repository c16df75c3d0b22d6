# Sourced by the tests/cuda/*-on-device.sh scripts and pack-for-device.sh: the two steps every
# device pack shares, so that the library list and the decompression fallback live in one place.
#   pack_libs BIN DEST      the shared libraries tcq links that the device image lacks (jansson,
#                           pcre2, utf8proc, OpenBLAS, libedit and theirs) as DEST/lib.tar.xz
#   unpack NAME...          on the device, in the pack's folder: NAME.xz -> NAME (executable),
#                           lib.tar.xz -> lib/, and LD_LIBRARY_PATH pointed there and at CUDA's
unxz() { xz -dc "$1" 2>/dev/null || python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$1"; }
pack_libs() {
  mkdir -p "$2/lib"
  cp $(ldd "$1/tcq" | awk '/=> \//{print $3}' | grep -vE 'libc\.so|libm\.so|libstdc|libgcc|libpthread|libdl|librt|libcublas') "$2/lib/"
  (cd "$2" && tar cJf lib.tar.xz lib && rm -rf lib)
}
unpack() {
  local f
  for f in "$@"; do [ -f "$f.xz" ] && unxz "$f.xz" >"$f" && chmod +x "$f"; done
  [ -f lib.tar.xz ] && unxz lib.tar.xz | tar x
  export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
}
