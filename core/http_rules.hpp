#pragma once

// The rules the daemon's HTTP API applies to every request before a handler
// runs: who may ask (Host, Origin, bearer token), what the request names (a
// path of percent-decoded segments, one of a fixed set of routes) and what
// it carries (a JSON body). Pure: header lists and the raw request target
// in, a route or a refusal out. A refusal's message is safe to show: the
// request's own bytes appear in it only escaped and shortened.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt::http {

/// One request header; `name` in lower case, `value` as received.
struct header {
  std::string name;
  std::string value;
};
using header_list = std::vector<header>;

/// Every value of header `name` (lower case), in order.
std::vector<std::string_view> header_values(const header_list& headers, std::string_view name);

/// Why a request is refused: the HTTP status, a stable code for the JSON
/// error body and a message for people.
struct refusal {
  int status = 400;
  std::string code;
  std::string message;
};

/// `text` escaped for a message or a log line (escape_for_display) and cut
/// to about `max` bytes, so a client cannot make an error message large.
std::string shown(std::string_view text, std::size_t max = 160);

// -- who may ask ---------------------------------------------------------------------

/// The address the daemon listens on, as given to --listen (host without
/// brackets).
struct listener {
  std::string host;
  int port = 0;
};

/// A loopback address literal (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) or
/// the name `localhost`. Text, never resolved: `127.evil.example` is not
/// one (a caller that must know where a name leads resolves it).
bool is_loopback_host(std::string_view host);

/// The `Host` values a listener answers to (lower case). On a loopback
/// listener: its own address, `localhost`, `127.0.0.1` and `[::1]`, each
/// with its port (and also without it on port 80). Off loopback: empty, and
/// any Host is accepted (the bearer token, required there, protects it).
std::vector<std::string> allowed_hosts(const listener& l);

/// Exactly one Host header naming the listener (DNS rebinding: a page of
/// another name that resolves to 127.0.0.1 is refused here).
std::optional<refusal> check_host(const header_list& headers, const listener& l);
/// The same with `allowed_hosts(l)` worked out once, by a caller that
/// checks many requests.
std::optional<refusal> check_host(const header_list& headers, const listener& l,
                                  const std::vector<std::string>& allowed);

/// A serialized origin: `http` or `https`, `://`, a host, an optional
/// `:port`, nothing else (no path, no user info).
bool is_origin(std::string_view text);

/// The Origin verdict: no Origin header (not a browser's cross-origin
/// request), an allowed one (`allowed_origin` set, answered with CORS
/// headers) or a refusal.
struct origin_verdict {
  std::optional<std::string> allowed_origin;
  std::optional<refusal> refused;
};
origin_verdict check_origin(const header_list& headers, const std::vector<std::string>& allowed);

/// `Authorization: Bearer <token>`, compared in constant time. An empty
/// `token` accepts every request.
std::optional<refusal> check_bearer(const header_list& headers, std::string_view token);

/// Constant-time comparison, so a token cannot be guessed byte by byte.
bool same_secret(std::string_view a, std::string_view b);

// -- what it names -----------------------------------------------------------------

/// `application/json`, parameters allowed (`; charset=utf-8`; another
/// charset is not), case-insensitive.
bool is_json_media_type(std::string_view content_type);

/// A POST carries `Content-Type: application/json`, body or not: an HTML
/// form or a "simple" cross-origin request (text/plain) gets 415.
std::optional<refusal> check_json_content_type(const header_list& headers);

/// A name a request may carry (a server or a tool): 1 to 512 bytes of
/// valid UTF-8 without control characters (C0, DEL, C1), line separators or
/// bidirectional controls, so it can be shown as it is.
bool is_plain_name(std::string_view name);

/// The path of a request target split at `/` into percent-decoded
/// segments. Refused (400): a target that is not a path, a bad escape,
/// NUL or another control character, invalid UTF-8 (overlong forms too).
struct decoded_path {
  std::vector<std::string> segments;
  std::optional<refusal> refused;
};
decoded_path decode_path(std::string_view target);

enum class route_id {
  healthz, snapshot, events, reload, call, approve, reject, restart,
  // resources, prompts and completion: `server` is set
  resources, resource_templates, resource_read, resource_subscribe, resource_unsubscribe, prompt_get, complete,
  // answers to servers' requests for the host: `server` holds the request's id
  elicitation_answer, sampling_answer,
  prompts, // GET .../{server}/prompts: prompts/list, every page
  // cancel of a tool call: `server` holds the decoded call id
  call_cancel,
  // OAuth: POST starts an authorization, DELETE forgets the tokens
  auth, auth_logout,
  // the gateway: streamable HTTP at /mcp, the 2024-11-05 pair
  mcp_post, mcp_get, mcp_delete, legacy_sse, legacy_messages,
};

struct route_match {
  route_id id = route_id::healthz;
  std::string server; // approve / reject / restart and the per-server routes: the decoded name
                      // (elicitation_answer / sampling_answer: the request's id; the
                      // gateway's routes: the tool set, "" for /mcp itself)
};

/// A request's route, or its refusal: 400 for a bad path, 404 for an
/// unknown path, 405 (with `allow`) for a known path and a wrong method.
/// HEAD is served like GET.
struct routing {
  std::optional<route_match> match;
  std::optional<refusal> refused;
  std::string allow; // the methods of the path, for 405 and preflights
};
routing resolve_route(std::string_view method, std::string_view target);

/// A `Last-Event-ID`: decimal digits only, at most 19 of them.
std::optional<std::uint64_t> parse_event_id(std::string_view text);

} // namespace mcprt::http
