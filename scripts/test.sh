#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Exits non-zero on any failure.
#   scripts/test.sh             plain build (GCC) in build/
#   scripts/test.sh --sanitize  ASan+UBSan build (clang) in build-asan/; it
#                               also builds the libFuzzer targets that
#                               scripts/fuzz.sh runs
#   scripts/test.sh --tsan      TSan build (GCC, instrumented CAF) in build-tsan/
#   --only LABELS               only these parts of the suite, comma-separated
#                               (core io actors runtime cli gateway server fuzz
#                               bench conformance install tsan); only their
#                               programs are built
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mode=plain
only=
while (($#)); do
  case $1 in
    --sanitize) mode=asan; shift ;;
    --tsan) mode=tsan; shift ;;
    --only) only=${2:?--only needs a list of labels}; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

"$here/scripts/setup.sh"
source "$here/scripts/lib/build-modes.sh"
build_mode_args "$mode"

# The programs each label's tests run; a label not listed needs everything.
targets=()
labels=()
if [[ -n $only ]]; then
  IFS=, read -r -a labels <<<"$only"
  for l in "${labels[@]}"; do
    case $l in
      core) targets+=(mcprt_core_tests) ;;
      io) targets+=(mcprt_io_tests) ;;
      actors) targets+=(mcprt_actor_tests) ;;
      runtime) targets+=(mcprt_runtime_tests) ;;
      cli) targets+=(mcprt_cli_tests) ;;
      gateway) targets+=(mcprt_gateway_tests mcprt mcprt-test-server) ;;
      server) targets+=(test_server_test) ;;
      tsan) [[ $mode == tsan ]] || { echo "test.sh: the tsan label exists only with --tsan" >&2; exit 2; }
            targets+=(tsan_planted_race mcprt mcprt-test-server mcprt_actor_tests mcprt_runtime_tests) ;;
      fuzz|bench|conformance|install) targets=(all); break ;;
      *) echo "test.sh: unknown label '$l'" >&2; exit 2 ;;
    esac
  done
fi
if ((${#targets[@]})) && [[ ${targets[0]} != all ]]; then
  MCPRT_TARGET="${targets[*]}" "$here/scripts/build.sh" "$build" "${mode_args[@]}"
else
  "$here/scripts/build.sh" "$build" "${mode_args[@]}"
fi

cd "$build"
filter=()
if ((${#labels[@]})); then
  filter=(-L "^($(IFS='|'; echo "${labels[*]}"))$")
fi
# Most tests wait on child processes, pipes and sockets, not on the CPU, so
# three run at once on two cores; the conformance runs, which start Node and
# several processes, claim two slots each (PROCESSORS).
ctest --output-on-failure -j"${MCPRT_TEST_JOBS:-3}" --timeout 300 "${filter[@]}"
