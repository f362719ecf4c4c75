#pragma once

// The pure half of the sandbox's egress proxy (io/egress_proxy): the
// allow-list a server's `"network"` setting names, and the request head a
// sandboxed server sends its HTTP proxy. Bytes in, a decision out: no
// sockets, no resolver, so both are unit-tested and fuzzed here.
//
// Names are matched as the client wrote them (case-insensitive), never as
// they resolve: `localhost` and `127.0.0.1` are two different entries, and
// only a name that matched is ever given to the resolver.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/oauth_endpoints.hpp"

namespace mcprt::egress {

// -- the allow-list -------------------------------------------------------------

/// One entry of a server's `"network"` list:
///  - `host` (any port) or `host:port` (port 1-65535);
///  - an IPv6 literal in brackets, `[::1]` or `[::1]:8080` (compared in
///    its canonical form, so `[0:0::1]` is `[::1]`);
///  - `*.example.com` (optionally with a port): any name with at least one
///    more label below example.com (`api.example.com`, `a.b.example.com`),
///    never `example.com` itself; IP literals take no wildcard, and a bare
///    `*` is not an entry.
/// Host names are letters, digits, `-`, `_` and `.` (at most 253 bytes, one
/// trailing dot ignored); matching is case-insensitive.
struct allow_entry {
  std::string host;        // lower case, no trailing dot, IPv6 canonical without brackets;
                           // for a wildcard: the suffix without "*." (`example.com`)
  int port = 0;            // 0: any port
  bool subdomains = false; // written as `*.host`
  bool ip_literal = false;

  /// Back as an entry would be written (`*.example.com:443`, `[::1]`).
  std::string text() const;
  bool operator==(const allow_entry& o) const {
    return host == o.host && port == o.port && subdomains == o.subdomains && ip_literal == o.ip_literal;
  }
};

/// One entry, or nullopt with `error` saying why (quoting the entry only
/// escaped and shortened).
std::optional<allow_entry> parse_allow_entry(std::string_view text, std::string* error = nullptr);

/// A whole `"network"` list: every valid entry, and one error per invalid
/// one ("network[2]: ..."). A caller validating settings refuses a list
/// with errors; the proxy only ever gets the valid entries.
struct allow_list {
  std::vector<allow_entry> entries;
  std::vector<std::string> errors;
};
allow_list parse_allow_list(const std::vector<std::string>& entries);

/// The host as a request names it, made comparable with entries: lower
/// case, one trailing dot dropped, an IPv6 literal (without brackets) in
/// canonical form. Empty when it is not a valid host.
std::string normalized_host(std::string_view host);

/// Whether `entry` covers a request for `host` (normalized_host's form)
/// and `port`.
bool entry_matches(const allow_entry& entry, std::string_view host, int port);

/// Whether any entry covers it.
bool is_allowed(const std::vector<allow_entry>& entries, std::string_view host, int port);

/// Whether the proxy may connect to `address` for a request that named
/// `asked_host`: a name that is not itself loopback (`localhost`, 127/8,
/// `::1`) must not lead to a loopback or unspecified address, which is the
/// daemon's own host: an allowed public name whose DNS answer says
/// 127.0.0.1 would otherwise reach the daemon's own services.
bool address_permitted(std::string_view asked_host, const oauth::ip_address& address);

// -- the request head -----------------------------------------------------------

/// Bounds on a client's request head.
inline constexpr std::size_t max_head_bytes = 16 * 1024;
inline constexpr std::size_t max_head_fields = 100;

/// Where the head a client is sending ends: the offset just past its blank
/// line (CRLF CRLF, or bare LFs), or npos while it has not come. `from` is
/// where the previous call stopped looking (0 the first time; a caller that
/// appends bytes passes what the last call returned in `scanned`), so a head
/// that arrives a byte at a time is scanned once, not once per byte.
std::size_t find_head_end(std::string_view bytes, std::size_t from, std::size_t* scanned = nullptr);

/// A request to the proxy, parsed.
struct proxy_request {
  bool is_connect = false; // CONNECT host:port; else an absolute-URI request
  std::string method;      // as sent (methods are case-sensitive)
  std::string host;        // normalized_host's form
  int port = 0;
  /// Absolute-URI requests: the origin-form target to send upstream
  /// ("/path?query", "/" for none; a fragment dropped).
  std::string origin_target;
  /// Absolute-URI requests: the Host header to send upstream (the target's
  /// authority: host, brackets for IPv6, ":port" when the URI had one).
  std::string host_header;
  std::string version; // "HTTP/1.1" or "HTTP/1.0"
  /// In order; names as sent, values without leading and trailing
  /// spaces and tabs.
  std::vector<std::pair<std::string, std::string>> fields;
};

/// The outcome of parsing a complete head.
struct head_verdict {
  std::optional<proxy_request> request; // set: a proxy request (not yet checked against the allow-list)
  int status = 0;                       // else: 400 (malformed) or 403 (not something this proxy serves)
  std::string reason;                   // else: why, safe to show (input escaped and shortened)
  std::string host;                     // else: the host it named, if it got that far
  int port = 0;
};

/// Parses one head: `head` is the bytes up to find_head_end's offset.
/// Served: `CONNECT host:port HTTP/1.x` and `METHOD http://host[:port]/...
/// HTTP/1.x`. Refused with 403: an origin-form or asterisk-form target (a
/// request to the proxy itself), an `https://` absolute URI (https goes
/// through CONNECT), a head over max_head_bytes; with 400 everything that
/// is not HTTP/1.x: a bad request line, bare CR, obs-fold, control bytes,
/// a bad host or port, user info in the URI, more than max_head_fields.
head_verdict parse_proxy_head(std::string_view head);

/// The head to send upstream for an absolute-URI request: the request
/// line in origin form, `Host` from the URI (the client's own Host is
/// dropped, RFC 9112 3.2.2), every `Proxy-*` field dropped, and
/// `Connection: close` in place of the client's Connection and Keep-Alive
/// (the proxy gives each client connection one upstream and relays it
/// as-is, so the upstream must end it after its answer; a Connection that
/// names `upgrade` is kept as `Connection: upgrade` for WebSockets).
std::string upstream_head(const proxy_request& request);

/// A refusal as sent to the client: status line, a plain-text body of one
/// line that says why and names the host (escaped), `Connection: close`.
std::string refusal_response(int status, std::string_view reason, std::string_view host, int port);

/// "HTTP/1.1 200 Connection established" and its blank line.
std::string connect_established();

} // namespace mcprt::egress
