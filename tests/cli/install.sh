#!/bin/bash
# cmake --install into a temporary prefix: libtcq (static and shared), tcq.h, the tcq binary and a
# pkg-config file.  A small C program builds with `pkg-config --cflags --libs tcq` against it and
# runs (shared, and static with --static); libtcq.so exports exactly the functions tcq.h
# declares, each declared with TCQ_API.
set -u
source "$(dirname "$0")/common.bash"
BUILD=$(dirname "$TCQ")
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cmake --install "$BUILD" --prefix "$t/p" >"$t/log" 2>&1 || { echo "FAIL: cmake --install:"; cat "$t/log"; exit 1; }
for f in bin/tcq include/tcq.h share/tcq/models/tinyqwen-k2/model.safetensors; do
    [ -e "$t/p/$f" ] || { echo "FAIL: not installed: $f"; fail=1; }
done
pc=$(find "$t/p" -name tcq.pc)
[ -n "$pc" ] || { echo "FAIL: no tcq.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
for f in libtcq.a libtcq.so; do [ -e "$libdir/$f" ] || { echo "FAIL: not installed: $libdir/$f"; fail=1; }; done
export PKG_CONFIG_PATH=$(dirname "$pc")

cat >"$t/hello.c" <<'C'
#include <tcq.h>
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

# Exported symbols = the functions tcq.h declares, and every declaration carries TCQ_API.
h=$t/p/include/tcq.h
nm -D --defined-only "$libdir/libtcq.so" | awk '$2 ~ /^[TtWwDdBbRrVvi]$/ {print $3}' | grep -Ev '^(_init|_fini)$' | sort >"$t/exported"
grep -E '^TCQ_API ' "$h" | sed -E 's/\(.*//; s/.*[ *]([a-z_0-9]+)$/\1/' | sort >"$t/declared"
[ -s "$t/declared" ] || { echo "FAIL: no TCQ_API declarations in tcq.h"; fail=1; }
diff "$t/declared" "$t/exported" >"$t/diff" || { echo "FAIL: exported symbols != declared (< declared only, > exported only):"; head -20 "$t/diff"; fail=1; }
grep -nE '^[a-z_].*\(' "$h" | grep -Ev '^[0-9]+:(TCQ_API|typedef|static|extern|enum|struct)' >"$t/bare" &&
    { echo "FAIL: declarations without TCQ_API:"; head "$t/bare"; fail=1; }
echo "$(wc -l <"$t/exported") exported symbols, $(wc -l <"$t/declared") declared"
[ $fail = 0 ] && echo "install.sh: ok"
exit $fail
