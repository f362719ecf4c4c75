#!/usr/bin/env bash
# Fuzzes each libFuzzer target (tests/fuzz/) for a bounded time. The targets
# come from the ASan+UBSan build of scripts/test.sh --sanitize (build-asan/,
# clang), built here if needed. Exits non-zero when a target crashes; the
# input is left in build-asan/fuzz/crashes/<name>/.
#   scripts/fuzz.sh [--seconds N] [--jobs J] [NAME...]
#     --seconds N  per target (default 60)
#     --jobs J     targets fuzzed at once (default 1)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
jobs=1
names=()
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds takes a positive number" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --jobs takes a positive number" >&2; exit 2; }

"$here/scripts/setup.sh"
source "$here/scripts/lib/build-modes.sh"
build_mode_args asan
MCPRT_TARGET=fuzz_all "$here/scripts/build.sh" "$build" "${mode_args[@]}"
# The sanitizers' options for a fuzzer: leaks are findings too.
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if ((${#names[@]} == 0)); then
  for f in "$here"/tests/fuzz/*_fuzz.cpp; do
    names+=("$(basename "$f" _fuzz.cpp)")
  done
fi
for n in "${names[@]}"; do
  [[ -x $build/bin/fuzz_$n ]] || { echo "fuzz.sh: no target $n ($build/bin/fuzz_$n)" >&2; exit 2; }
done

out="$build/fuzz"
# One target: its scratch corpus first (libFuzzer adds what it finds there
# and only reads the seeds), its result line written whole when it ends.
fuzz_one() {
  local n=$1 work="$out/corpus/$1" crashes="$out/crashes/$1" log="$out/fuzz-$1.log"
  mkdir -p "$work" "$crashes"
  if "$build/bin/fuzz_$n" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$crashes/" "$work" "$here/tests/fuzz/corpus/$n" >"$log" 2>&1; then
    echo "== fuzz $n ${seconds}s: $(grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" | tr '\n' ' ')"
  else
    { echo "fuzz.sh: $n crashed; input in $crashes/, log in $log"; tail -40 "$log"; } >&2
    return 1
  fi
}

failed=()
running=()
for n in "${names[@]}"; do
  fuzz_one "$n" &
  running+=("$!:$n")
  # At most $jobs at once: wait for the oldest before starting another.
  if ((${#running[@]} >= jobs)); then
    if ! wait "${running[0]%%:*}"; then failed+=("${running[0]#*:}"); fi
    running=("${running[@]:1}")
  fi
done
for r in "${running[@]}"; do
  if ! wait "${r%%:*}"; then failed+=("${r#*:}"); fi
done
((${#failed[@]} == 0)) || { echo "fuzz.sh: crashed: ${failed[*]}" >&2; exit 1; }
echo "fuzz.sh: ${#names[@]} targets, ${seconds}s each, no crash"
