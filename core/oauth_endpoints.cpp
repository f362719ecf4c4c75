#include "core/oauth_endpoints.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "core/ascii.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::oauth {

namespace {

// A name or URL from a remote party, for a message: escaped and cut.
std::string shown_endpoint_text(std::string_view s) {
  return escape_for_display(s.substr(0, 300)) + (s.size() > 300 ? "..." : "");
}

std::string without_trailing_slash(std::string_view s) {
  while (!s.empty() && s.back() == '/')
    s.remove_suffix(1);
  return std::string(s);
}

bool in_v4(const ip_address& a, unsigned char b0, unsigned char b1, int prefix) {
  std::uint32_t addr = (std::uint32_t(a.bytes[0]) << 24) | (std::uint32_t(a.bytes[1]) << 16)
                       | (std::uint32_t(a.bytes[2]) << 8) | a.bytes[3];
  std::uint32_t net = (std::uint32_t(b0) << 24) | (std::uint32_t(b1) << 16);
  std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t(0) << (32 - prefix);
  return (addr & mask) == (net & mask);
}

bool all_of_scope(const std::vector<ip_address>& v, address_scope s) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [&](const ip_address& a) { return scope_of(a) == s; });
}

// A private network reached through the server: every address of it is
// private (or loopback, which a name may list beside a private address).
bool on_private_network(const std::vector<ip_address>& v) {
  bool any_private = false;
  for (const auto& a : v) {
    auto s = scope_of(a);
    if (s == address_scope::private_network) any_private = true;
    else if (s != address_scope::loopback) return false;
  }
  return any_private;
}

} // namespace

std::optional<ip_address> ip_from_bytes(const unsigned char* data, std::size_t size) {
  ip_address a;
  if (size == 4) {
    std::memcpy(a.bytes.data(), data, 4);
    return a;
  }
  if (size != 16) return std::nullopt;
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(data, mapped, 12) == 0) {
    std::memcpy(a.bytes.data(), data + 12, 4);
    return a;
  }
  a.v6 = true;
  std::memcpy(a.bytes.data(), data, 16);
  return a;
}

std::optional<ip_address> parse_ip_literal(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  unsigned char buf[16];
  if (::inet_pton(AF_INET, s.c_str(), buf) == 1) return ip_from_bytes(buf, 4);
  if (::inet_pton(AF_INET6, s.c_str(), buf) == 1) return ip_from_bytes(buf, 16);
  return std::nullopt;
}

std::string to_string(const ip_address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(a.v6 ? AF_INET6 : AF_INET, a.bytes.data(), buf, sizeof buf);
  return a.v6 ? "[" + std::string(buf) + "]" : std::string(buf);
}

address_scope scope_of(const ip_address& a) {
  if (!a.v6) {
    if (in_v4(a, 127, 0, 8)) return address_scope::loopback;
    if (in_v4(a, 0, 0, 8)) return address_scope::unspecified; // 0.0.0.0/8: "this network"
    if (in_v4(a, 10, 0, 8) || in_v4(a, 172, 16, 12) || in_v4(a, 192, 168, 16) || in_v4(a, 169, 254, 16))
      return address_scope::private_network;
    return address_scope::public_network;
  }
  static const std::array<unsigned char, 16> zero{};
  auto loop = zero;
  loop[15] = 1;
  if (a.bytes == zero) return address_scope::unspecified;
  if (a.bytes == loop) return address_scope::loopback;
  if ((a.bytes[0] & 0xfe) == 0xfc) return address_scope::private_network;                       // fc00::/7
  if (a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80) return address_scope::private_network; // fe80::/10
  return address_scope::public_network;
}

std::string endpoint_refusal(std::string_view role, const endpoint_target& t, const endpoint_context& c) {
  const std::string head = "refusing the " + std::string(role) + " " + shown_endpoint_text(t.shown) + ": ";
  for (const auto& own : c.own) {
    if (own.port != t.port) continue;
    for (const auto& a : t.addresses)
      for (const auto& o : own.addresses)
        if (a == o || scope_of(o) == address_scope::unspecified)
          return head + "it is mcprt's own HTTP listener (" + to_string(a) + ":" + std::to_string(t.port)
                 + "), which no remote party may send requests to";
  }
  if (t.addresses.empty()) return head + "its host has no address";
  const bool same_origin = ascii_lower(t.scheme) == ascii_lower(c.server_scheme)
                           && ascii_lower(t.host) == ascii_lower(c.server_host) && t.port == c.server_port;
  if (same_origin) return {};
  const bool server_loopback = all_of_scope(c.server_addresses, address_scope::loopback);
  const bool server_private = on_private_network(c.server_addresses);
  for (const auto& a : t.addresses) {
    switch (scope_of(a)) {
      case address_scope::unspecified:
        return head + "it resolves to the unspecified address " + to_string(a) + ", which reaches this machine";
      case address_scope::loopback:
        if (!server_loopback)
          return head + "it resolves to the loopback address " + to_string(a)
                 + " and the MCP server is not on loopback (a remote party may not reach this machine's services)";
        break;
      case address_scope::private_network:
        if (!server_private)
          return head + "it resolves to the private or link-local address " + to_string(a)
                 + " and the MCP server is not on a private network (a remote party may not reach into it)";
        break;
      case address_scope::public_network: break;
    }
  }
  if (ascii_lower(t.scheme) == "https") return {};
  if (ascii_lower(c.server_scheme) == "http" && server_loopback
      && all_of_scope(t.addresses, address_scope::loopback))
    return {};
  return head + "it is not https (plain http is allowed only on loopback, for an MCP server that is itself http on loopback)";
}

std::string issuer_mismatch(std::string_view metadata_issuer, std::string_view expected_issuer) {
  if (!metadata_issuer.empty()
      && without_trailing_slash(metadata_issuer) == without_trailing_slash(expected_issuer))
    return {};
  return "the authorization server metadata names issuer '" + shown_endpoint_text(metadata_issuer)
         + "', but it was fetched for issuer '" + shown_endpoint_text(expected_issuer)
         + "' (RFC 8414 section 3.3); not using it";
}

std::string callback_issuer_problem(const std::optional<std::string>& iss, std::string_view issuer,
                                    bool iss_parameter_supported) {
  if (iss) {
    if (*iss == issuer) return {};
    return "the authorization response came from issuer '" + shown_endpoint_text(*iss) + "', not from '"
           + shown_endpoint_text(issuer) + "' (RFC 9207 mix-up protection); ignored";
  }
  if (iss_parameter_supported)
    return "the authorization response carries no 'iss' although the authorization server '"
           + shown_endpoint_text(issuer) + "' says it sends one (RFC 9207); ignored";
  return {};
}

std::optional<std::string> refresh_endpoint(std::string_view stored, std::string_view discovered,
                                            std::string* why) {
  auto fail = [&](std::string s) -> std::optional<std::string> {
    if (why) *why = std::move(s);
    return std::nullopt;
  };
  if (!stored.empty()) {
    if (discovered.empty() || discovered == stored) return std::string(stored);
    return fail("the authorization server now names the token endpoint " + shown_endpoint_text(discovered)
                + ", not " + shown_endpoint_text(stored)
                + " where the stored tokens were issued; the refresh token and client secret are not sent there");
  }
  if (discovered.empty())
    return fail(
      "the stored tokens do not say which token endpoint issued them and discovery names none; "
      "the refresh token is not sent anywhere");
  return std::string(discovered);
}

} // namespace mcprt::oauth
