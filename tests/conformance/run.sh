#!/usr/bin/env bash
# Runs every client scenario of the official MCP conformance suite against
# mcprt (through adapter.sh) and compares each outcome with
# expected-outcomes.txt (MCPRT_CONFORMANCE_SUITE=next: the 0.2.0-alpha.12
# suite and expected-outcomes-2026.txt; suite.sh). Exit 0 when every outcome
# is as listed, 1 when any differs (a new failure, or a new pass whose line
# still says fail), 77 (skipped) when scripts/setup.sh has not installed the
# suite.
#   tests/conformance/run.sh MCPRT_BIN
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MCPRT_BIN=${1:-${MCPRT_BIN:-}}
if [[ -z $MCPRT_BIN || ! -x $MCPRT_BIN ]]; then
  echo "usage: $0 MCPRT_BIN" >&2
  exit 2
fi
source "$here/suite.sh"
require_suite

expected="$here/expected-outcomes$tag.txt"
check_listed "$expected" client

source "$here/scenarios.sh"
run_scenarios "$expected" "sse-retry" "$node" "$suite" client --command "$here/adapter.sh"
exit $differ
