#include "server_core.hpp"

#include <charconv>
#include <cstdio>

namespace mcprt_test_server {

namespace {

constexpr const char* k_help = R"(usage: mcprt-test-server [flags]

A small MCP server for mcprt's tests and benchmarks. Speaks newline-delimited
JSON-RPC on stdin/stdout unless --http is given; logs go to stderr.

Transport:
  --http PORT                 streamable HTTP on 127.0.0.1:PORT, endpoint /mcp
                              (0 picks a free port; the first stdout line is
                              "listening on http://127.0.0.1:PORT/mcp")
  --sse-responses             with --http: answer POSTed requests with a
                              text/event-stream (one "message" event) instead
                              of application/json

Content:
  --tools N                   add N tools <prefix>tool_1..N that echo their
                              arguments (echo, add, sleep, pid always exist;
                              sleep reports progress 1/2 and 2/2 when the
                              call carries _meta.progressToken)
  --prompts N                 offer N prompts <prefix>prompt_1..N
  --page-size K               items per tools/list or prompts/list page (50)
  --name-prefix P             prefix every tool and prompt name with P
  --conformance               instead of the content above, exactly what the
                              official MCP conformance suite's server
                              scenarios call, as its reference
                              everything-server offers it: tools test_*
                              (text, image, audio, embedded resource, mixed,
                              logging, progress, error, sampling,
                              elicitation, SEP-1034 defaults, SEP-1330 enums)
                              and json_schema_2020_12_tool; resources
                              test://static-text, test://static-binary,
                              test://watched-resource and the template
                              test://template/{id}/data, with subscribe;
                              prompts test_simple_prompt,
                              test_prompt_with_arguments,
                              test_prompt_with_embedded_resource,
                              test_prompt_with_image; logging/setLevel;
                              completion/complete. Sampling and elicitation
                              are requests to the client made during the
                              call (stdio, or the --http session's GET
                              stream), answered within 5 s or the call fails
                              with isError. With --http, a Host or Origin
                              that is not localhost, 127.0.0.1 or [::1] gets
                              403 (DNS-rebinding protection). Not with
                              --tools, --prompts, --name-prefix or
                              --client-tool

Faults and timing:
  --startup-delay-ms D        wait D ms before reading stdin / listening
  --crash-after-ms D          exit with code 3, D ms after start
  --exit-on-initialize        exit with code 4 when initialize arrives
  --hang-on-initialize        never answer initialize (keeps serving the rest)
  --garbage                   write non-JSON lines to stdout before and between
                              messages (stdio; with --http only after the
                              "listening" line, HTTP bodies stay clean)
  --list-changed-after-ms D   D ms after notifications/initialized add tool
                              <prefix>late_tool and send
                              notifications/tools/list_changed (HTTP: on the
                              session's GET /mcp event stream)
  --stderr-lines N            write "stderr line 1..N" to stderr at start-up
  --ignore-sigterm            ignore SIGTERM and stdin EOF; only SIGKILL stops it
  --spawn-child               fork a grandchild ("sleep 100000", stdio on
                              /dev/null) in our process group; logs
                              "child pid N" on stderr
  --ping-client-after-ms D    D ms after notifications/initialized send a ping
                              request to the client and log the outcome
  --request-sampling          after notifications/initialized send
                              sampling/createMessage to the client and log
                              what came back (or that nothing did within 5 s)
  --rug-pull TEXT              add the tool rug_pull: a call of it makes
                              echo's description TEXT on that connection
                              and sends notifications/tools/list_changed
  --hostile                   add the tool attack {kind, target, ...}: it
                              tries what a hostile server would (read or
                              write a file, connect, signal, ptrace, read a
                              process's environ, fork) and says what worked
  --client-tool               add the tool ask_client {method, params}: it
                              sends that request to the client and returns
                              the client's whole reply as JSON text

Hostile output:
  --invalid-utf8 WHERE[,WHERE] write bytes that are not UTF-8 (a Latin-1
                              byte, a lone 0xff, a cut sequence) into:
                              stderr (a line at start-up), stdout (a raw
                              non-JSON line at start-up), result (echo's
                              text), description (every tool's), server-info
                              (serverInfo.name)

Containment (descendants, silence):
  --pid-file FILE             append "server PID" and, for each grandchild
                              below, "group PID" / "setsid PID" /
                              "daemon PID" to FILE (all written before
                              stdin is read)
  --grandchild-in-group       fork a grandchild ("sleep 100000") that stays
                              in our process group
  --grandchild-setsid         fork a grandchild that calls setsid (its own
                              session and group) and sleeps
  --grandchild-daemon         daemonise one: fork, setsid, fork again and let
                              the middle process exit, so the sleeper is an
                              orphan while we still run
  --close-stdout-after-ms D   D ms after answering the first tools/list,
                              close stdout and keep running (and reading)

Progress and cancel:
  --cancel-file FILE          append "cancelled <requestId>" to FILE for every
                              notifications/cancelled received
  --method-log FILE           append the method of every request received to
                              FILE, a line each

OAuth 2.1 (with --http only):
  --oauth                     /mcp (POST, GET, DELETE) demands
                              "Authorization: Bearer TOKEN" with a token this
                              server issued, else 401 with WWW-Authenticate
                              pointing at the protected-resource metadata;
                              the server is its own authorization server:
                              /.well-known/oauth-protected-resource/mcp,
                              /.well-known/oauth-authorization-server,
                              /register (RFC 7591), /authorize (no login: 302
                              to the loopback redirect_uri with a code at
                              once; PKCE S256 required), /token
                              (authorization_code, refresh_token; refresh
                              tokens rotate)
  --oauth-scope S             advertise scope(s) S (space-separated; may be
                              repeated) in the metadata and the 401's
                              WWW-Authenticate, and grant them by default
  --oauth-token-ttl-s N       access tokens expire after N s (3600)
  --oauth-revoke-file FILE    when FILE exists (looked at on every /mcp and
                              /token request), revoke every access and
                              refresh token issued so far and delete FILE
  --oauth-log FILE            append one line per OAuth event to FILE:
                              "register CLIENT", "authorize CLIENT scope=S
                              resource=R", "token GRANT", "token-error ERR",
                              "unauthorized METHOD PATH", "revoke N",
                              "elsewhere-token GRANT" (a request to
                              /other/token, a second token endpoint that
                              issues tokens like /token), "register-hang",
                              "redirect METHOD" (a request to /redirect?to=URL,
                              answered 307 to URL) (never a token)
  --oauth-metadata JSON       merge the object JSON into the authorization
                              server metadata ("{base}" in a string value
                              is this server's http://127.0.0.1:PORT): point
                              endpoints elsewhere, change the issuer, ...
  --oauth-resource-metadata JSON
                              the same for the protected-resource metadata
  --oauth-metadata-file FILE  while FILE exists, merge its JSON object into
                              the authorization server metadata too (read
                              at each request)
  --oauth-redirect-iss ISS    /authorize's redirect carries iss=ISS ("{base}"
                              replaced as above); without it, no iss
  --oauth-register-hang       /register reads the request and never answers
                              (for 120 s)

  --version                   print the version and exit
  -h, --help                  print this help and exit
)";

bool parse_int(const std::string& text, int min, int& out) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < min) return false;
  out = value;
  return true;
}

} // namespace

parse_outcome parse_options(int argc, char** argv, options& out) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      auto eq = arg.find('=');
      if (eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
    }
    auto fail = [&](const std::string& why) {
      std::fprintf(stderr, "mcprt-test-server: %s\n(see --help)\n", why.c_str());
      return parse_outcome::exit_usage;
    };
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    auto flag = [&](bool& target) {
      if (inline_value) return false;
      target = true;
      return true;
    };
    auto number = [&](int& target, int min) {
      auto v = value();
      return v && parse_int(*v, min, target);
    };

    bool ok = true;
    if (arg == "-h" || arg == "--help") {
      std::fputs(k_help, stdout);
      return parse_outcome::exit_ok;
    } else if (arg == "--version") {
      std::printf("%s %s\n", k_server_name, k_server_version);
      return parse_outcome::exit_ok;
    } else if (arg == "--http") {
      ok = number(out.http_port, 0) && out.http_port <= 65535;
    } else if (arg == "--sse-responses") {
      ok = flag(out.sse_responses);
    } else if (arg == "--tools") {
      ok = number(out.tools, 0);
    } else if (arg == "--prompts") {
      ok = number(out.prompts, 0);
    } else if (arg == "--page-size") {
      ok = number(out.page_size, 1);
    } else if (arg == "--name-prefix") {
      auto v = value();
      ok = v.has_value();
      if (ok) out.name_prefix = *v;
    } else if (arg == "--startup-delay-ms") {
      ok = number(out.startup_delay_ms, 0);
    } else if (arg == "--crash-after-ms") {
      ok = number(out.crash_after_ms, 0);
    } else if (arg == "--exit-on-initialize") {
      ok = flag(out.exit_on_initialize);
    } else if (arg == "--hang-on-initialize") {
      ok = flag(out.hang_on_initialize);
    } else if (arg == "--garbage") {
      ok = flag(out.garbage);
    } else if (arg == "--list-changed-after-ms") {
      ok = number(out.list_changed_after_ms, 0);
    } else if (arg == "--stderr-lines") {
      ok = number(out.stderr_lines, 0);
    } else if (arg == "--ignore-sigterm") {
      ok = flag(out.ignore_sigterm);
    } else if (arg == "--spawn-child") {
      ok = flag(out.spawn_child);
    } else if (arg == "--ping-client-after-ms") {
      ok = number(out.ping_client_after_ms, 0);
    } else if (arg == "--request-sampling") {
      ok = flag(out.request_sampling);
    } else if (arg == "--hostile") {
      ok = flag(out.hostile);
    } else if (arg == "--client-tool") {
      ok = flag(out.client_tool);
    } else if (arg == "--rug-pull") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) {
        out.rug_pull = true;
        out.rug_pull_text = *v;
      }
    } else if (arg == "--conformance") {
      ok = flag(out.conformance);
    } else if (arg == "--invalid-utf8") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      for (std::size_t start = 0; ok && start <= v->size();) {
        auto comma = v->find(',', start);
        auto where = v->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        ok = where == "stderr" || where == "stdout" || where == "result" || where == "description"
             || where == "server-info";
        if (ok) out.invalid_utf8.push_back(where);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--pid-file") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.pid_file = *v;
    } else if (arg == "--grandchild-in-group") {
      ok = flag(out.grandchild_in_group);
    } else if (arg == "--grandchild-setsid") {
      ok = flag(out.grandchild_setsid);
    } else if (arg == "--grandchild-daemon") {
      ok = flag(out.grandchild_daemon);
    } else if (arg == "--cancel-file") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.cancel_file = *v;
    } else if (arg == "--method-log") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.method_log = *v;
    } else if (arg == "--close-stdout-after-ms") {
      ok = number(out.close_stdout_after_ms, 0);
    } else if (arg == "--oauth") {
      ok = flag(out.oauth);
    } else if (arg == "--oauth-scope") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      for (std::size_t start = 0; ok && start < v->size();) {
        auto space = v->find(' ', start);
        auto scope = v->substr(start, space == std::string::npos ? std::string::npos : space - start);
        if (!scope.empty()) out.oauth_scopes.push_back(scope);
        if (space == std::string::npos) break;
        start = space + 1;
      }
    } else if (arg == "--oauth-token-ttl-s") {
      ok = number(out.oauth_token_ttl_s, 1);
    } else if (arg == "--oauth-revoke-file") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.oauth_revoke_file = *v;
    } else if (arg == "--oauth-log") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.oauth_log = *v;
    } else if (arg == "--oauth-metadata" || arg == "--oauth-resource-metadata") {
      auto v = value();
      ok = v.has_value() && json::parse(*v, nullptr, false).is_object();
      if (ok) (arg == "--oauth-metadata" ? out.oauth_metadata : out.oauth_resource_metadata) = *v;
    } else if (arg == "--oauth-metadata-file") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok) out.oauth_metadata_file = *v;
    } else if (arg == "--oauth-redirect-iss") {
      auto v = value();
      ok = v.has_value();
      if (ok) out.oauth_redirect_iss = *v;
    } else if (arg == "--oauth-register-hang") {
      ok = flag(out.oauth_register_hang);
    } else {
      return fail("unknown flag " + std::string(argv[i]));
    }
    if (!ok) return fail("bad or missing value for " + arg);
  }
  // OAuth lives on HTTP only; silently serving stdio without it would let
  // a test believe it exercised the flow.
  bool oauth_detail = !out.oauth_scopes.empty() || out.oauth_token_ttl_s != 3600 || !out.oauth_revoke_file.empty()
                      || !out.oauth_log.empty() || !out.oauth_metadata.empty()
                      || !out.oauth_resource_metadata.empty() || !out.oauth_metadata_file.empty()
                      || out.oauth_redirect_iss || out.oauth_register_hang;
  if (out.oauth && out.http_port < 0) {
    std::fprintf(stderr, "mcprt-test-server: --oauth needs --http PORT\n(see --help)\n");
    return parse_outcome::exit_usage;
  }
  if (oauth_detail && !out.oauth) {
    std::fprintf(stderr, "mcprt-test-server: --oauth-* flags need --oauth\n(see --help)\n");
    return parse_outcome::exit_usage;
  }
  // The conformance content replaces the usual one; mixing them would
  // offer tools the suite's scenarios never expect.
  if (out.conformance && (out.tools > 0 || out.prompts > 0 || !out.name_prefix.empty() || out.client_tool)) {
    std::fprintf(stderr, "mcprt-test-server: --conformance does not mix with --tools, --prompts, --name-prefix "
                         "or --client-tool\n(see --help)\n");
    return parse_outcome::exit_usage;
  }
  if (out.sse_responses && out.http_port < 0)
    std::fprintf(stderr, "mcprt-test-server: --sse-responses has no effect without --http\n");
  return parse_outcome::run;
}

} // namespace mcprt_test_server
