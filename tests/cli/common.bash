# Sourced by every tests/cli/*.sh (ctest passes: the tcq binary, the repository's test data
# unpacked in the build folder, the default folder of the larger test data).
#   TCQ        the binary
#   REPO_DATA  small test data shipped with the repository, in the layout of ../shared/data
#   BIG_DATA   larger data (the bf16 tinyqwen model): $TCQ_TEST_DATA, default ../shared/data
#   SRC        the source folder (models/, tests/data/)
# A test that lacks big data says what it misses and exits 77, which ctest reports as skipped:
# require_data skips the whole test, have_data the part it guards (test_exit then returns 77).
TCQ=$1
REPO_DATA=$2
BIG_DATA=${TCQ_TEST_DATA:-${3:-}}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TEST_SKIPPED=0
have_data() {
    [ -n "$BIG_DATA" ] && [ -e "$BIG_DATA/$1" ] && return 0
    echo "SKIP: needs $BIG_DATA/$1 (set TCQ_TEST_DATA)"
    TEST_SKIPPED=1
    return 1
}
require_data() { have_data "$1" || exit 77; }
# exit with 1 when $1 (the failure flag) is set, 77 when a part was skipped, else 0
test_exit() {
    [ "${1:-0}" != 0 ] && exit 1
    [ "$TEST_SKIPPED" != 0 ] && exit 77
    exit 0
}
