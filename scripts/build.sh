#!/usr/bin/env bash
# Configures and builds mcprt. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# MCPRT_TARGET=T (or "T1 T2 ...") builds only those targets; MCPRT_JOBS=N sets the
# parallelism (default 2). Uses Ninja (scripts/setup.sh installs it) and ccache.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true

generator="Unix Makefiles"
command -v ninja >/dev/null && generator=Ninja
# A build directory made with another generator or compiler cannot be
# reconfigured in place (CMake refuses the one and silently drops the other
# arguments with the other): start its configuration afresh, keep nothing.
cache=$build/CMakeCache.txt
if [[ -f $cache ]]; then
  want_cxx=
  for a in "$@"; do [[ $a == -DCMAKE_CXX_COMPILER=* ]] && want_cxx=${a#-DCMAKE_CXX_COMPILER=}; done
  have_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
  have_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache")
  if [[ $have_gen != "$generator" ]] ||
     [[ -n $want_cxx && $(command -v "$want_cxx" || echo "$want_cxx") != "$have_cxx" ]]; then
    echo "build: $build was configured with $have_gen and $have_cxx; configuring it afresh"
    rm -rf "$cache" "$build/CMakeFiles"
  fi
fi

cmake -G "$generator" -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${MCPRT_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
# Unquoted on purpose: a list of targets splits into one argument each.
# shellcheck disable=SC2086
cmake --build "$build" -j"${MCPRT_JOBS:-2}" ${MCPRT_TARGET:+--target $MCPRT_TARGET}
