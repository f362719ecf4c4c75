#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Exits non-zero on any failure.
#   scripts/test.sh             plain build in build/
#   scripts/test.sh --sanitize  ASan+UBSan build in build-asan/
#   scripts/test.sh --tsan      TSan build in build-tsan/
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mode=plain
for a in "$@"; do
  case $a in
    --sanitize) mode=asan ;;
    --tsan) mode=tsan ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done

"$here/scripts/setup.sh"

case $mode in
  plain) build="$here/build"; args=() ;;
  asan)  build="$here/build-asan"; args=(-DMCPRT_SANITIZE=address,undefined)
         export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
  tsan)  build="$here/build-tsan"
         # CAF and cpp-httplib built with TSan, once per machine, so that
         # TSan sees the hand-overs between actors and threads.
         caf_root=$("$here/scripts/build-caf-tsan.sh")
         httplib_root=$("$here/scripts/build-httplib-tsan.sh")
         args=(-DMCPRT_SANITIZE=thread "-DCAF_ROOT=$caf_root" "-DHTTPLIB_ROOT=$httplib_root")
         # history_size=7: the longest history, so that the other stack of a
         # report is restored, not "failed to restore".
         export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=7 suppressions=$here/tests/tsan.supp" ;;
esac

"$here/scripts/build.sh" "$build" "${args[@]}"
cd "$build"
ctest --output-on-failure -j2 --timeout 300
