#!/usr/bin/env bash
# The client command the official conformance runner starts: it appends the
# scenario server's URL and sets MCP_CONFORMANCE_SCENARIO. Each scenario maps
# to one mcprt one-shot command; mcprt comes from $MCPRT_BIN.
set -u
url=${!#}
mcprt=${MCPRT_BIN:?MCPRT_BIN must name the mcprt binary}
scenario=${MCP_CONFORMANCE_SCENARIO:-}
# The runner does not stop a client that hangs; a scenario mcprt cannot
# finish yet must fail in seconds, not after the default 10-minute call timeout.
# Discovery gets more than the 5 s default for URLs: 26 scenarios start at once.
call_flags=(--timeout-ms 20000 --call-timeout-ms "${MCPRT_CONFORMANCE_CALL_TIMEOUT_MS:-15000}")

case $scenario in
  initialize)
    exec "$mcprt" inspect --timeout-ms 20000 --http "$url" ;;
  tools_call)
    exec "$mcprt" call "${call_flags[@]}" --http "$url" add_numbers '{"a": 5, "b": 3}' ;;
  elicitation-sep1034-client-defaults)
    exec "$mcprt" call "${call_flags[@]}" --on-elicitation accept-defaults --http "$url" test_client_elicitation_defaults '{}' ;;
  sse-retry)
    exec "$mcprt" call "${call_flags[@]}" --http "$url" test_reconnection '{}' ;;
  *)
    # Auth scenarios and any scenario this adapter does not know yet: what
    # a plain client does, connect and list. (OAuth is not implemented.)
    exec "$mcprt" inspect --timeout-ms 20000 --http "$url" ;;
esac
