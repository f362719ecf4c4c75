#include "core/http_url.hpp"

#include <cctype>

namespace mcprt {

std::string http_url::origin() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + ":" + std::to_string(port);
}

std::optional<http_url> http_url::parse(std::string_view url, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<http_url> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (url.empty()) return fail("invalid URL: empty");
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f) return fail("invalid URL: contains spaces or control characters");
  auto sep = url.find("://");
  if (sep == std::string_view::npos) return fail("invalid URL: expected http://host[:port]/path");
  std::string scheme(url.substr(0, sep));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https")
    return fail("invalid URL: scheme '" + scheme.substr(0, 16) + "' is not http or https");
  http_url out;
  out.scheme = scheme;
  auto rest = url.substr(sep + 3);
  auto frag = rest.find('#');
  if (frag != std::string_view::npos) rest = rest.substr(0, frag);
  auto auth_end = rest.find_first_of("/?");
  auto authority = rest.substr(0, auth_end);
  auto target = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);
  if (authority.find('@') != std::string_view::npos)
    return fail("invalid URL: user info (user:password@) is not supported; use headers");
  std::string_view host, port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return fail("invalid URL: unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("invalid URL: junk after IPv6 address");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("invalid URL: empty port");
    }
  } else {
    auto colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("invalid URL: empty port");
    }
  }
  if (host.empty()) return fail("invalid URL: no host");
  // The host is handed to the resolver and, bracketed when it holds a ':',
  // rebuilt into the origin: a '[' or ':' where they do not belong (found by
  // fuzzing: "http://a[::2]:900") would make another URL of it.
  const bool bracketed = !authority.empty() && authority.front() == '[';
  const std::string_view allowed = bracketed ? ":.%-_~" : "-._~%!$&'()*+,;=";
  for (unsigned char c : host) {
    bool ok = std::isalnum(c) || (c >= 0x80 && !bracketed) || allowed.find(static_cast<char>(c)) != std::string_view::npos;
    if (!ok) return fail("invalid URL: the host has a character that does not belong there");
  }
  if (bracketed && host.find(':') == std::string_view::npos) return fail("invalid URL: not an IPv6 address in brackets");
  out.host = std::string(host);
  if (!port_text.empty()) {
    long p = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || p > 65535) return fail("invalid URL: bad port");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return fail("invalid URL: port out of range");
    out.port = static_cast<int>(p);
  } else {
    out.port = scheme == "https" ? 443 : 80;
  }
  std::string t(target);
  if (t.empty() || t.front() == '?') t.insert(0, "/");
  out.target = t;
  auto q = t.find('?');
  out.display = out.origin() + (q == std::string::npos ? t : t.substr(0, q) + "?…");
  return out;
}

std::optional<host_port> parse_host_port(std::string_view text) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size() || text.size() > 300)
    return std::nullopt;
  auto host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty() || host.find_first_of(" []/") != std::string_view::npos) return std::nullopt;
  auto port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  auto port = std::stoul(std::string(port_text));
  if (port == 0 || port > 65535) return std::nullopt;
  return host_port{std::string(host), static_cast<uint16_t>(port)};
}

} // namespace mcprt
