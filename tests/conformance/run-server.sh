#!/usr/bin/env bash
# Runs every server scenario of the official MCP conformance suite against
# the MCP endpoint URL (streamable HTTP) and compares each outcome with
# expected-server-outcomes.txt (MCPRT_CONFORMANCE_SUITE=next: the
# 0.2.0-alpha.12 suite and expected-server-outcomes-2026.txt; suite.sh).
# Exit 0 when every outcome is as listed, 1 when any differs (a new failure,
# or a new pass whose line still says fail), 77 (skipped) when
# scripts/setup.sh has not installed the suite.
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
source "$here/suite.sh"
require_suite

expected=${EXPECTED:-$here/expected-server-outcomes$tag.txt}
check_listed "$expected" server

source "$here/scenarios.sh"
run_scenarios "$expected" "logging-set-level tools-call-with-logging tools-call-with-progress server-sse-polling server-sse-multiple-streams" \
  "$node" "$suite" server --url "$url"
exit $differ
