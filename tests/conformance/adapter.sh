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
  auth/*)
    # The suite's authorization server answers /authorize with a redirect to
    # our loopback callback, so a browser that follows redirects headlessly
    # is enough. Pre-registered credentials, keys and the IdP's token come
    # in MCP_CONFORMANCE_CONTEXT; they become the settings' `oauth` object.
    oauth=$(MCP_CONFORMANCE_SCENARIO=$scenario node -e '
      const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
      const names = {client_id: "clientId", client_secret: "clientSecret", private_key_pem: "privateKey",
                     signing_algorithm: "signingAlgorithm", idp_client_id: "idpClientId",
                     idp_id_token: "idpIdToken", idp_token_endpoint: "idpTokenEndpoint"};
      const o = {clientMetadataUrl: "https://conformance-test.local/client-metadata.json"};
      for (const [k, v] of Object.entries(ctx)) if (names[k]) o[names[k]] = v;
      if (process.env.MCP_CONFORMANCE_SCENARIO.startsWith("auth/client-credentials-")) o.grantType = "client_credentials";
      process.stdout.write(JSON.stringify(o));') || exit 2
    exec "$mcprt" call "${call_flags[@]}" --oauth "$oauth" --browser "curl -fsS -o /dev/null -L" \
      --auth-timeout-ms 15000 --http "$url" test-tool '{}' ;;
  *)
    # Any scenario this adapter does not know yet: what a plain client does,
    # connect and list.
    exec "$mcprt" inspect --timeout-ms 20000 --http "$url" ;;
esac
