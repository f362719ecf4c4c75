#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang under ASan+UBSan in
# build-fuzz/ and fuzzes each for a bounded time. Exits non-zero when a
# target crashes; the input is left in build-fuzz/crashes/<name>/.
#   scripts/fuzz.sh [--seconds N] [NAME...]   (default: 60 s, every target)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
names=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done

"$here/scripts/setup.sh"
build="$here/build-fuzz"
MCPRT_TARGET=fuzz_all "$here/scripts/build.sh" "$build" -DMCPRT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++

if ((${#names[@]} == 0)); then
  for f in "$here"/tests/fuzz/*_fuzz.cpp; do
    n=$(basename "$f" _fuzz.cpp)
    names+=("$n")
  done
fi

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for n in "${names[@]}"; do
  bin="$build/bin/fuzz_$n"
  [[ -x $bin ]] || { echo "fuzz.sh: no target $n ($bin)" >&2; exit 2; }
  work="$build/corpus/$n"
  crashes="$build/crashes/$n"
  mkdir -p "$work" "$crashes"
  echo "== fuzz $n for ${seconds}s"
  # The scratch corpus first: libFuzzer adds what it finds there and only
  # reads the seeds.
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$crashes/" "$work" "$here/tests/fuzz/corpus/$n" > "$build/fuzz-$n.log" 2>&1; then
    echo "fuzz.sh: $n crashed; input in $crashes/, log in $build/fuzz-$n.log" >&2
    tail -40 "$build/fuzz-$n.log" >&2
    failed+=("$n")
  else
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$build/fuzz-$n.log" | tr '\n' ' '
    echo
  fi
done
((${#failed[@]} == 0)) || { echo "fuzz.sh: crashed: ${failed[*]}" >&2; exit 1; }
