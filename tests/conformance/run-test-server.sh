#!/usr/bin/env bash
# Starts `mcprt-test-server --http 0 --conformance`, runs run-server.sh
# against its /mcp and stops it: the check that the test server's
# --conformance mode still offers everything the server scenarios call.
# MCPRT_CONFORMANCE_SUITE=next: the 0.2.0-alpha.12 suite, with
# expected-server-outcomes-2026.txt.
# Exit status as run-server.sh's (77: suite not installed).
#   tests/conformance/run-test-server.sh MCPRT_TEST_SERVER
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server_bin=${1:-}
if [[ -z $server_bin || ! -x $server_bin ]]; then
  echo "usage: $0 MCPRT_TEST_SERVER" >&2
  exit 2
fi
source "$here/suite.sh"
require_suite

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2> /dev/null || true
    wait "$server_pid" 2> /dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
"$server_bin" --http 0 --conformance > "$work/stdout" 2> "$work/stderr" &
server_pid=$!
# Its first stdout line names the port it picked.
url=
for _ in $(seq 100); do
  url=$(sed -n 's/^listening on \(http:.*\)$/\1/p' "$work/stdout")
  [[ -n $url ]] && break
  if ! kill -0 "$server_pid" 2> /dev/null; then break; fi
  sleep 0.1
done
if [[ -z $url ]]; then
  echo "mcprt-test-server did not start listening:" >&2
  cat "$work/stderr" >&2
  exit 1
fi
echo "mcprt-test-server --conformance at $url"
status=0
"$here/run-server.sh" "$url" || status=$?
if [[ $status -ne 0 && $status -ne 77 ]]; then
  echo "--- mcprt-test-server stderr" >&2
  cat "$work/stderr" >&2
fi
exit $status
