#!/usr/bin/env bash
# Configures and builds mcprt. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# MCPRT_TARGET=T (or "T1 T2 ...") builds only those targets; MCPRT_JOBS=N sets the
# parallelism (default 2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
shift || true
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${MCPRT_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
# Unquoted on purpose: a list of targets splits into one argument each.
# shellcheck disable=SC2086
cmake --build "$build" -j"${MCPRT_JOBS:-2}" ${MCPRT_TARGET:+--target $MCPRT_TARGET}
