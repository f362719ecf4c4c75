#!/usr/bin/env bash
# The client command the official conformance runner starts: it appends the
# scenario server's URL and sets MCP_CONFORMANCE_SCENARIO. Each scenario maps
# to one mcprt one-shot command (a few to one per tool the scenario wants
# called); mcprt comes from $MCPRT_BIN. Both suites (0.1.16 and 0.2.0-alpha.12,
# suite.sh) use it; mcprt chooses its revision itself (server/discover
# first, then initialize), whatever MCP_CONFORMANCE_PROTOCOL_VERSION asks for.
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
  http-standard-headers)
    # SEP-2243: Mcp-Method on every POST, Mcp-Name on tools/call.
    exec "$mcprt" call "${call_flags[@]}" --http "$url" test_headers '{}' ;;
  http-custom-headers)
    # SEP-2243: x-mcp-header parameters mirrored into Mcp-Param-* headers.
    # The scenario names the calls to make in MCP_CONFORMANCE_CONTEXT.
    calls=$(node -e '
      const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
      for (const c of ctx.toolCalls || []) console.log(c.name + "\t" + JSON.stringify(c.arguments || {}));') || exit 2
    status=0
    while IFS=$'\t' read -r tool args; do
      "$mcprt" call "${call_flags[@]}" --http "$url" "$tool" "$args" || status=1
    done <<< "$calls"
    exit $status ;;
  http-invalid-tool-headers)
    # SEP-2243: a client must drop the listed tools whose x-mcp-header is
    # invalid and keep the valid one. A host offers every listed tool to its
    # model, so try them all: mcprt must call valid_tool and refuse the rest.
    "$mcprt" call "${call_flags[@]}" --http "$url" valid_tool '{"region": "us-west1"}'
    status=$?
    for tool in invalid_empty_header invalid_object_header invalid_array_header invalid_null_header \
                invalid_duplicate_same_case invalid_duplicate_diff_case invalid_space_in_name \
                invalid_colon_in_name invalid_non_ascii_name invalid_control_char_name; do
      "$mcprt" call "${call_flags[@]}" --http "$url" "$tool" '{}' > /dev/null 2>&1
    done
    exit $status ;;
  sep-2322-client-request-state)
    # SEP-2322 (multi-round-trip requests): each tool answers with an
    # InputRequiredResult the client must fulfil and retry with requestState;
    # test_mrtr_unrelated between them checks that the state does not leak.
    status=0
    for tool in test_mrtr_echo_state test_mrtr_unrelated test_mrtr_no_state test_mrtr_no_result_type; do
      "$mcprt" call "${call_flags[@]}" --on-elicitation accept-defaults --http "$url" "$tool" '{}' || status=1
    done
    exit $status ;;
  # request-metadata (SEP-2575: _meta and MCP-Protocol-Version on every
  # request), json-schema-ref-no-deref (SEP-2106: list tools, never fetch a
  # network $ref), json-schema-2020-12-preservation (list, then echo a tool's
  # inputSchema back: mcprt's one-shot commands do not print inputSchema, so
  # only the listing is exercised) and the skills scenarios sep-2640-client-*
  # (mcprt has no skills/list) are what a plain client does: below.
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
