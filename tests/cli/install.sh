#!/bin/bash
# cmake --install into a temporary prefix: libtcq (static and shared), tcq.h and tcq_kernels.h,
# the tcq binary and a pkg-config file.  A small kernel-level C program builds with `pkg-config
# --cflags --libs tcq` against it and runs (shared, and static with --static); tcq.h's quick start
# builds against tcq.h alone (an application that runs models needs no other header) and
# generates text with the installed demo model; libtcq.so exports exactly the functions the two
# headers declare, each declared with TCQ_API.
set -u
source "$(dirname "$0")/common.bash"
BUILD=$(dirname "$TCQ")
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cmake --install "$BUILD" --prefix "$t/p" >"$t/log" 2>&1 || { echo "FAIL: cmake --install:"; cat "$t/log"; exit 1; }
for f in bin/tcq include/tcq.h include/tcq_kernels.h share/tcq/models/tinyqwen-k2/model.safetensors; do
    [ -e "$t/p/$f" ] || { echo "FAIL: not installed: $f"; fail=1; }
done
pc=$(find "$t/p" -name tcq.pc)
[ -n "$pc" ] || { echo "FAIL: no tcq.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in libtcq.a libtcq.so; do [ -e "$libdir/$f" ] || { echo "FAIL: not installed: $libdir/$f"; fail=1; }; done
export PKG_CONFIG_PATH=$(dirname "$pc")

cat >"$t/hello.c" <<'C'
#include <tcq_kernels.h>
#include <stdio.h>
#include <string.h>
/* Codes one block of 256 weights at k = 2 and decodes it: the library, through its public API. */
int main(void)
{
    const tcq_block_params p = {12, 2, 256};
    float w[256], d[256];
    uint32_t codes[256 * 2 / 32];
    uint16_t scale;
    for (int i = 0; i < 256; i++) w[i] = (float)((i * 37) % 101 - 50) / 50.0f;
    double sq = 0;
    if (tcq_block_check(p) != TCQ_OK || tcq_encode_rows(p, NULL, w, NULL, 1, 256, codes, &scale, NULL, &sq) != TCQ_OK)
        return 1;
    tcq_trellis t = {p, 1, 0, 1, 256, codes, &scale};
    if (tcq_trellis_decode(&t, d) != TCQ_OK) return 1;
    double e = 0, r = 0;
    for (int i = 0; i < 256; i++) e += (w[i] - d[i]) * (double)(w[i] - d[i]), r += (double)w[i] * w[i];
    printf("tcq %s: k=2 block, relative MSE %.4f\n", tcq_version(), e / r);
    return e / r < 0.2 ? 0 : 1;
}
C
cc -std=c11 -Wall -Werror "$t/hello.c" -o "$t/hello" $(pkg-config --cflags --libs tcq) 2>"$t/cc" ||
    { echo "FAIL: building against the installed library:"; cat "$t/cc"; fail=1; }
if [ -x "$t/hello" ]; then
    LD_LIBRARY_PATH=$libdir ldd "$t/hello" | grep -q "$libdir/libtcq.so" ||
        { echo "FAIL: hello is not linked to the installed libtcq.so"; ldd "$t/hello"; fail=1; }
    out=$(LD_LIBRARY_PATH=$libdir "$t/hello") || { echo "FAIL: hello exited $?: $out"; fail=1; }
    grep -q "relative MSE" <<<"$out" || { echo "FAIL: hello printed: $out"; fail=1; }
fi
cc -std=c11 "$t/hello.c" -o "$t/hello_static" $(pkg-config --cflags tcq) "$libdir/libtcq.a" \
    $(pkg-config --static --libs tcq | sed 's/-ltcq\b//') 2>"$t/cc" ||
    { echo "FAIL: building against libtcq.a with pkg-config --static:"; cat "$t/cc"; fail=1; }
[ -x "$t/hello_static" ] && { "$t/hello_static" >/dev/null || { echo "FAIL: hello_static exited $?"; fail=1; }; }

# tcq.h's quick start, cut from its preamble (the indented lines between "Quick start" and
# "Build:"), built with only tcq.h on the include path, run on the installed demo model: it must
# print text.
sed -n '/^ \* Quick start/,/^ \* Build:/p' "$t/p/include/tcq.h" | sed -n 's/^ \*     //p' >"$t/quick.c"
mkdir -p "$t/only"; cp "$t/p/include/tcq.h" "$t/only/"
grep -q 'tcq_generate' "$t/quick.c" || { echo "FAIL: no quick start found in tcq.h"; fail=1; }
cc -std=c11 -Wall -Werror -I"$t/only" "$t/quick.c" -o "$t/quick" $(pkg-config --libs tcq) 2>"$t/cc" ||
    { echo "FAIL: tcq.h's quick start does not build against tcq.h alone:"; cat "$t/cc"; fail=1; }
if [ -x "$t/quick" ]; then
    out=$(LD_LIBRARY_PATH=$libdir "$t/quick" "$t/p/share/tcq/models/tinyqwen-k2" 2>&1) ||
        { echo "FAIL: the quick start exited $?: $out"; fail=1; }
    [ "$(printf %s "$out" | tr -d '[:space:]' | wc -c)" -ge 20 ] ||
        { echo "FAIL: the quick start printed too little: '$out'"; fail=1; }
fi

# Exported symbols = the functions the public headers declare, and every declaration carries
# TCQ_API.
nm -D --defined-only "$libdir/libtcq.so" | awk '$2 ~ /^[TtWwDdBbRrVvi]$/ {print $3}' | grep -Ev '^(_init|_fini)$' | sort >"$t/exported"
: >"$t/declared"
for h in "$t/p/include/tcq.h" "$t/p/include/tcq_kernels.h"; do
    n0=$(wc -l <"$t/declared")
    grep -E '^TCQ_API ' "$h" | sed -E 's/\(.*//; s/.*[ *]([a-z_0-9]+)$/\1/' >>"$t/declared"
    [ "$(wc -l <"$t/declared")" -gt "$n0" ] || { echo "FAIL: no TCQ_API declarations in $(basename "$h")"; fail=1; }
    grep -nE '^[a-z_].*\(' "$h" | grep -Ev '^[0-9]+:(TCQ_API|typedef|static|extern|enum|struct)' >"$t/bare" &&
        { echo "FAIL: declarations without TCQ_API in $(basename "$h"):"; head "$t/bare"; fail=1; }
done
sort -o "$t/declared" "$t/declared"
diff "$t/declared" "$t/exported" >"$t/diff" || { echo "FAIL: exported symbols != declared (< declared only, > exported only):"; head -20 "$t/diff"; fail=1; }
echo "$(wc -l <"$t/exported") exported symbols, $(wc -l <"$t/declared") declared"
[ $fail = 0 ] && echo "install.sh: ok"
exit $fail
