#include "core/egress_rules.hpp"

#include <algorithm>

#include "core/ascii.hpp"
#include "core/http_rules.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::egress {

namespace {

constexpr std::size_t egress_max_name = 253;

bool egress_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'
         || c == '.';
}

// A DNS-style name: labels of name characters, no empty label (one
// trailing dot excepted, dropped here). Lower case, or empty when invalid.
std::string egress_plain_name(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  if (s.empty() || s.size() > egress_max_name || s.front() == '.' || s.back() == '.') return {};
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!egress_name_char(s[i])) return {};
    if (s[i] == '.' && i + 1 < s.size() && s[i + 1] == '.') return {};
  }
  return ascii_lower(s);
}

// `127.0.0.1.` is the address, as `example.com.` is the name: one final
// dot is dropped before deciding which a host is.
std::string_view egress_without_final_dot(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  return s;
}

// The canonical text of an IP literal (no brackets), or empty.
std::string egress_ip_text(std::string_view s) {
  auto ip = oauth::parse_ip_literal(s);
  if (!ip) return {};
  auto t = oauth::to_string(*ip);
  if (t.size() >= 2 && t.front() == '[') t = t.substr(1, t.size() - 2);
  return t;
}

// "1".."65535" in decimal, no sign, no leading zeros beyond one digit run
// of at most 5; 0 when it is not one.
int egress_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return 0;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  return v >= 1 && v <= 65535 ? v : 0;
}

struct egress_host_port {
  std::string host; // as written, brackets stripped
  bool bracketed = false;
  std::string_view port; // empty when absent
  bool had_colon = false;
};

// Splits `host[:port]` / `[v6][:port]`; nullopt when the shape is wrong
// (an unbracketed IPv6 address, say).
std::optional<egress_host_port> egress_split(std::string_view s) {
  egress_host_port out;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(s.substr(1, close - 1));
    out.bracketed = true;
    auto rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      out.had_colon = true;
      out.port = rest.substr(1);
    }
    return out;
  }
  auto colon = s.find(':');
  if (colon == std::string_view::npos) {
    out.host = std::string(s);
    return out;
  }
  if (s.find(':', colon + 1) != std::string_view::npos) return std::nullopt;
  out.host = std::string(s.substr(0, colon));
  out.had_colon = true;
  out.port = s.substr(colon + 1);
  return out;
}

bool egress_set_error(std::string* error, std::string text) {
  if (error) *error = std::move(text);
  return false;
}

// A token character (RFC 9110 5.6.2): what a method and a field name are.
bool egress_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

head_verdict egress_refuse(int status, std::string reason, std::string host = {}, int port = 0) {
  head_verdict v;
  v.status = status;
  v.reason = std::move(reason);
  v.host = std::move(host);
  v.port = port;
  return v;
}

// The host of a request target, normalized; in brackets only IPv6.
std::string egress_request_host(const egress_host_port& hp) {
  return normalized_host(hp.bracketed ? "[" + hp.host + "]" : hp.host);
}

} // namespace

// -- the allow-list -------------------------------------------------------------

std::string allow_entry::text() const {
  std::string h = ip_literal && host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (subdomains) h = "*." + h;
  if (port) h += ":" + std::to_string(port);
  return h;
}

std::optional<allow_entry> parse_allow_entry(std::string_view text, std::string* error) {
  auto bad = [&](const std::string& why) {
    egress_set_error(error, "network entry " + http::shown(text, 80) + ": " + why);
    return std::nullopt;
  };
  if (text.empty()) return bad("empty");
  if (trim_space(text).size() != text.size()) return bad("leading or trailing space");
  allow_entry e;
  std::string_view rest = text;
  if (rest.size() >= 2 && rest.substr(0, 2) == "*.") {
    e.subdomains = true;
    rest.remove_prefix(2);
  } else if (rest.find('*') != std::string_view::npos) {
    return bad("a wildcard is only `*.` before a domain (`*.example.com`)");
  }
  auto hp = egress_split(rest);
  if (!hp) return bad("an IPv6 address goes in brackets (`[::1]:8080`), and a port after one colon");
  if (hp->had_colon) {
    e.port = egress_port(hp->port);
    if (!e.port) return bad("the port must be a number from 1 to 65535");
  }
  if (hp->bracketed) {
    if (!oauth::parse_ip_literal(hp->host) || hp->host.find(':') == std::string::npos)
      return bad("not an IPv6 address in brackets");
    if (e.subdomains) return bad("an IP address takes no wildcard");
    e.host = egress_ip_text(hp->host);
    e.ip_literal = true;
    return e;
  }
  if (auto bare = egress_without_final_dot(hp->host); oauth::parse_ip_literal(bare)) {
    if (e.subdomains) return bad("an IP address takes no wildcard");
    e.host = egress_ip_text(bare);
    e.ip_literal = true;
    return e;
  }
  e.host = egress_plain_name(hp->host);
  if (e.host.empty())
    return bad("not a host name (letters, digits, '-', '_' and dots, at most 253 bytes, no empty label)");
  if (e.subdomains && e.host.find('.') == std::string::npos)
    return bad("a wildcard needs a domain of at least two labels (`*.example.com`)");
  return e;
}

allow_list parse_allow_list(const std::vector<std::string>& entries) {
  allow_list out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string why;
    auto e = parse_allow_entry(entries[i], &why);
    if (!e) {
      out.errors.push_back("network[" + std::to_string(i) + "]: " + why);
      continue;
    }
    if (std::find(out.entries.begin(), out.entries.end(), *e) == out.entries.end())
      out.entries.push_back(std::move(*e));
  }
  return out;
}

std::string normalized_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto inner = host.substr(1, host.size() - 2);
    if (inner.find(':') == std::string_view::npos) return {};
    return egress_ip_text(inner);
  }
  if (host.find(':') != std::string_view::npos) return egress_ip_text(host);
  if (auto bare = egress_without_final_dot(host); oauth::parse_ip_literal(bare)) return egress_ip_text(bare);
  return egress_plain_name(host);
}

bool entry_matches(const allow_entry& entry, std::string_view host, int port) {
  if (entry.port && entry.port != port) return false;
  if (host.empty()) return false;
  if (!entry.subdomains) return host == entry.host;
  // Strictly below: at least one label, and the boundary is a dot.
  if (host.size() <= entry.host.size() + 1) return false;
  auto tail = host.substr(host.size() - entry.host.size());
  return tail == entry.host && host[host.size() - entry.host.size() - 1] == '.';
}

bool is_allowed(const std::vector<allow_entry>& entries, std::string_view host, int port) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const allow_entry& e) { return entry_matches(e, host, port); });
}

bool address_permitted(std::string_view asked_host, const oauth::ip_address& address) {
  auto scope = oauth::scope_of(address);
  if (scope != oauth::address_scope::loopback && scope != oauth::address_scope::unspecified) return true;
  return scope == oauth::address_scope::loopback && http::is_loopback_host(asked_host);
}

// -- the request head -----------------------------------------------------------

std::size_t find_head_end(std::string_view bytes, std::size_t from, std::size_t* scanned) {
  // A line ends at LF; the head ends at an LF followed by an empty line
  // (LF, or CR LF).
  std::size_t i = from;
  for (; i < bytes.size(); ++i) {
    if (bytes[i] != '\n') continue;
    if (i + 1 >= bytes.size()) break;
    if (bytes[i + 1] == '\n') {
      if (scanned) *scanned = i + 2;
      return i + 2;
    }
    if (bytes[i + 1] == '\r') {
      if (i + 2 >= bytes.size()) break;
      if (bytes[i + 2] == '\n') {
        if (scanned) *scanned = i + 3;
        return i + 3;
      }
    }
  }
  // Resume at the last LF seen or before: its follower may still come.
  if (scanned) *scanned = i;
  return std::string_view::npos;
}

head_verdict parse_proxy_head(std::string_view head) {
  if (head.size() > max_head_bytes)
    return egress_refuse(403, "request head over " + std::to_string(max_head_bytes) + " bytes");
  // Lines, each without its LF and an optional CR before it.
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (pos < head.size()) {
    auto nl = head.find('\n', pos);
    if (nl == std::string_view::npos) nl = head.size();
    auto line = head.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return egress_refuse(400, "malformed request: a bare CR");
    if (line.find('\0') != std::string_view::npos) return egress_refuse(400, "malformed request: a NUL byte");
    if (line.empty()) break;
    lines.push_back(line);
    if (lines.size() > max_head_fields + 1)
      return egress_refuse(400,
                           "malformed request: more than " + std::to_string(max_head_fields) + " header fields");
    pos = nl + 1;
  }
  if (lines.empty()) return egress_refuse(400, "malformed request: no request line");

  // The request line: METHOD SP target SP HTTP/1.x
  auto line = lines.front();
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return egress_refuse(400, "malformed request line " + http::shown(line, 80));
  auto method = line.substr(0, sp1);
  auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), egress_tchar))
    return egress_refuse(400, "malformed request: bad method " + http::shown(method, 32));
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return egress_refuse(400, "malformed request: not HTTP/1.0 or HTTP/1.1 (" + http::shown(version, 32) + ")");
  if (target.empty()) return egress_refuse(400, "malformed request: empty target");
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f)
      return egress_refuse(400, "malformed request: a control, space or non-ASCII byte in the target");

  proxy_request req;
  req.method = std::string(method);
  req.version = std::string(version);
  req.is_connect = method == "CONNECT";
  if (req.is_connect) {
    // authority-form: host:port, the port required.
    auto hp = egress_split(target);
    if (!hp || !hp->had_colon)
      return egress_refuse(400, "malformed CONNECT target " + http::shown(target, 80) + " (want host:port)");
    req.port = egress_port(hp->port);
    req.host = egress_request_host(*hp);
    if (req.host.empty())
      return egress_refuse(400, "malformed CONNECT target: bad host " + http::shown(hp->host, 80));
    if (!req.port)
      return egress_refuse(400, "malformed CONNECT target: bad port " + http::shown(hp->port, 16), req.host);
  } else {
    if (target.front() == '/' || target == "*")
      return egress_refuse(403, "not a proxy request: the target " + http::shown(target, 80)
                                  + " names no host (send an absolute URI, or CONNECT for https)");
    auto colon = target.find("://");
    if (colon == std::string_view::npos)
      return egress_refuse(400, "malformed request target " + http::shown(target, 80));
    auto scheme = ascii_lower(target.substr(0, colon));
    auto rest = target.substr(colon + 3);
    auto end = rest.find_first_of("/?#");
    auto authority = rest.substr(0, end);
    auto tail = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
    if (authority.find('@') != std::string_view::npos)
      return egress_refuse(400, "malformed request: user info in the URI");
    auto hp = egress_split(authority);
    std::string host = hp ? egress_request_host(*hp) : std::string{};
    if (scheme == "https")
      return egress_refuse(403, "an https:// URI must go through CONNECT, not an absolute-URI request", host);
    if (scheme != "http")
      return egress_refuse(400, "malformed request: scheme " + http::shown(scheme, 16) + " is not http", host);
    if (host.empty()) return egress_refuse(400, "malformed request: bad host in " + http::shown(target, 80));
    req.host = host;
    if (hp->had_colon && !hp->port.empty()) {
      req.port = egress_port(hp->port);
      if (!req.port) return egress_refuse(400, "malformed request: bad port " + http::shown(hp->port, 16), host);
    } else {
      req.port = 80;
    }
    auto hash = tail.find('#');
    if (hash != std::string_view::npos) tail = tail.substr(0, hash);
    if (tail.empty()) req.origin_target = "/";
    else if (tail.front() == '?') req.origin_target = "/" + std::string(tail);
    else req.origin_target = std::string(tail);
    req.host_header = hp->bracketed ? "[" + hp->host + "]" : hp->host;
    if (hp->had_colon && !hp->port.empty()) req.host_header += ":" + std::string(hp->port);
  }

  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto f = lines[i];
    if (f.front() == ' ' || f.front() == '\t')
      return egress_refuse(400, "malformed request: a folded header line", req.host, req.port);
    auto c = f.find(':');
    if (c == std::string_view::npos || c == 0)
      return egress_refuse(400, "malformed request: header line without a name " + http::shown(f, 60), req.host,
                           req.port);
    auto name = f.substr(0, c);
    if (!std::all_of(name.begin(), name.end(), egress_tchar))
      return egress_refuse(400, "malformed request: bad header name " + http::shown(name, 60), req.host, req.port);
    auto value = f.substr(c + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
      value.remove_suffix(1);
    for (unsigned char ch : value)
      if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
        return egress_refuse(400, "malformed request: a control byte in header " + http::shown(name, 60), req.host,
                             req.port);
    req.fields.emplace_back(std::string(name), std::string(value));
  }
  head_verdict v;
  v.request = std::move(req);
  return v;
}

std::string upstream_head(const proxy_request& request) {
  std::string out = request.method + " " + request.origin_target + " " + request.version + "\r\n";
  out += "Host: " + request.host_header + "\r\n";
  bool upgrade = false;
  for (const auto& [name, value] : request.fields) {
    auto lower = ascii_lower(name);
    if (lower == "connection") {
      // A list of tokens: keep only whether it asks for an upgrade.
      std::string_view v = value;
      while (!v.empty()) {
        auto comma = v.find(',');
        if (ascii_iequals(trim_space(v.substr(0, comma)), "upgrade")) upgrade = true;
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
      }
      continue;
    }
    if (lower == "host" || lower == "keep-alive" || lower.rfind("proxy-", 0) == 0) continue;
    out += name + ": " + value + "\r\n";
  }
  out += upgrade ? "Connection: upgrade\r\n" : "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string refusal_response(int status, std::string_view reason, std::string_view host, int port) {
  const char* phrase = status == 400   ? "Bad Request"
                       : status == 403 ? "Forbidden"
                       : status == 502 ? "Bad Gateway"
                       : status == 503 ? "Service Unavailable"
                       : status == 504 ? "Gateway Timeout"
                                       : "Error";
  std::string body = "mcprt egress proxy: ";
  if (!host.empty()) {
    // The host as the request named it, escaped: a name is plain ASCII
    // once it parsed, but a refusal may come before that.
    auto h = escape_for_display(host.substr(0, 260));
    if (h.find(':') != std::string::npos) h = "[" + h + "]";
    body += h;
    if (port) body += ":" + std::to_string(port);
    body += ": ";
  }
  body += reason;
  body += "\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + phrase + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

std::string connect_established() {
  return "HTTP/1.1 200 Connection established\r\n\r\n";
}

} // namespace mcprt::egress
