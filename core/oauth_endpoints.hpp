#pragma once

// Where the OAuth client may send a request. Every URL it uses comes from
// someone else (the MCP server's challenge and metadata, the authorization
// server's metadata) and is fetched with mcprt's own network position: on
// the user's machine, beside the daemon's loopback API, inside the user's
// network. These rules say which of those URLs it may reach at all, and
// which answers bind it (the issuer). Pure: io/oauth_client resolves the
// names and asks here. docs/oauth.md, "OAuth endpoint rules".

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt::oauth {

/// An IPv4 or IPv6 address. An IPv4-mapped IPv6 address (::ffff:a.b.c.d)
/// is the IPv4 address: it reaches the same place.
struct ip_address {
  bool v6 = false;
  std::array<unsigned char, 16> bytes{}; // IPv4 in the first four

  bool operator==(const ip_address& o) const { return v6 == o.v6 && bytes == o.bytes; }
  bool operator!=(const ip_address& o) const { return !(*this == o); }
};

/// A numeric address exactly as inet_pton reads it (dotted quad, or IPv6,
/// with or without brackets); nullopt for a name. Forms like "127.1" or
/// "0x7f.1" are not literals here: they go to the resolver, and the address
/// it returns is what the rules look at.
std::optional<ip_address> parse_ip_literal(std::string_view text);

/// From 4 or 16 raw bytes (a sockaddr's address); nullopt for another size.
std::optional<ip_address> ip_from_bytes(const unsigned char* data, std::size_t size);

std::string to_string(const ip_address& a);

/// What part of the network an address reaches.
enum class address_scope {
  loopback,        // 127.0.0.0/8, ::1
  private_network, // 10/8, 172.16/12, 192.168/16, 169.254/16, fc00::/7, fe80::/10
  unspecified,     // 0.0.0.0, :: (connecting there reaches this host)
  public_network,  // everything else
};
address_scope scope_of(const ip_address& a);

/// A host:port this process listens on (the daemon's HTTP API). No OAuth
/// request goes there, whatever a remote party names.
struct own_listener {
  /// Its addresses (a listener on a name lists every address of it).
  std::vector<ip_address> addresses;
  int port = 0;
};

/// What the rules compare an endpoint with.
struct endpoint_context {
  /// The MCP server as configured: scheme, host (as written), port.
  std::string server_scheme;
  std::string server_host;
  int server_port = 0;
  /// Every address the server's host resolved to.
  std::vector<ip_address> server_addresses;
  std::vector<own_listener> own;
};

/// An endpoint about to be fetched: its URL as parsed, and every address
/// its host resolved to (a literal: just that one).
struct endpoint_target {
  std::string scheme;
  std::string host;
  int port = 0;
  std::string shown; // scheme://host:port/path for messages (no query)
  std::vector<ip_address> addresses;
};

/// Empty when the OAuth client may send a request to `target`, else why
/// not: one sentence naming `role` ("token endpoint", ...), the URL as
/// shown (escaped) and the rule. In order:
///  1. never one of `own` (the daemon's listener: its routes would run with
///     the daemon's authority);
///  2. never an unspecified address (0.0.0.0, ::);
///  3. a loopback address only when the MCP server is on loopback (every
///     address of it), a private or link-local one only when the MCP server
///     is on such an address too (no request into the user's network on a
///     remote party's word);
///  4. https, except http on loopback when the MCP server itself is http
///     on loopback.
/// A URL on the MCP server's own origin (scheme, host, port as configured)
/// is held to rule 1 only: the user chose to talk to that origin already.
std::string endpoint_refusal(std::string_view role, const endpoint_target& target,
                             const endpoint_context& context);

/// RFC 8414 section 3.3: the issuer in the metadata must be the issuer the
/// metadata was fetched for (a trailing slash aside). Empty when it is,
/// else why not (both names escaped and cut).
std::string issuer_mismatch(std::string_view metadata_issuer, std::string_view expected_issuer);

/// RFC 9207: the `iss` of an authorization response. When the response
/// carries one it must equal the issuer (simple string comparison); when
/// the metadata said `authorization_response_iss_parameter_supported` a
/// response without one is refused. Empty when acceptable, else why not.
std::string callback_issuer_problem(const std::optional<std::string>& iss, std::string_view issuer,
                                    bool iss_parameter_supported);

/// Stored credentials name the token endpoint their tokens came from
/// (empty in files written before that was recorded). The endpoint a
/// refresh token or client secret may be sent to: the stored one when it
/// is known and discovery names no other (`discovered` empty: discovery
/// said nothing); for an unbound record, the one discovery names for the
/// stored issuer. nullopt: send nothing, with `why` set.
std::optional<std::string> refresh_endpoint(std::string_view stored_endpoint, std::string_view discovered,
                                            std::string* why);

} // namespace mcprt::oauth
