#!/usr/bin/env bash
# Where a build's time went: the slowest compiles and links (from Ninja's
# log) and the slowest tests of the last ctest run (ctest's cost data).
#   scripts/build-times.sh [BUILD_DIR] [N]    (default build/, 20 of each)
set -eu  # no pipefail: head closing the pipe early is fine here
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
n=${2:-20}
log=$build/.ninja_log
[[ -f $log ]] || { echo "build-times: no $log (a Ninja build)" >&2; exit 2; }

# .ninja_log v5: start ms, end ms, mtime, output, hash. A target built more
# than once keeps its last line; a step with several outputs (a link and its
# test list) is named by its first.
awk -F'\t' 'NR > 1 { k = $1 FS $2 FS $5; if (k in seen) next; seen[k] = 1
                      t[$4] = ($2 - $1) / 1000 }
             END { for (o in t) printf "%.1f\t%s\n", t[o], o }' "$log" >"$build/.times"
total=$(awk -F'\t' '$2 ~ /\.o$/ { s += $1; c++ } END { printf "%.0f s in %d compiles", s, c }' "$build/.times")
echo "== compiles: $total; the $n slowest (seconds)"
awk -F'\t' '$2 ~ /\.o$/' "$build/.times" | sort -rn | head -n "$n" |
  sed -E 's#CMakeFiles/[^/]+\.dir/##'
echo "== links and other steps: the $n slowest (seconds)"
awk -F'\t' '$2 !~ /\.o$/' "$build/.times" | sort -rn | head -n "$n"
rm -f "$build/.times"

cost=$build/Testing/Temporary/CTestCostData.txt
if [[ -f $cost ]]; then
  # Lines "name runs average-seconds" until the "---" of failed tests.
  echo "== tests: the $n slowest (average seconds over their runs)"
  awk '/^---/ { exit } NF == 3 { printf "%.2f\t%s\n", $3, $1 }' "$cost" | sort -rn | head -n "$n"
fi
