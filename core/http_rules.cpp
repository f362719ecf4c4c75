#include "core/http_rules.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/ascii.hpp"
#include "core/oauth_endpoints.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt::http {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

refusal bad_path(std::string_view target, const std::string& why) {
  return {400, "bad_path", "the request path " + shown(target) + " " + why};
}

/// C1 controls (U+0080–U+009F), line and paragraph separators and the
/// bidirectional controls: valid UTF-8 (`text` is), but no part of a name.
bool has_hidden_characters(std::string_view text) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (b(i) == 0xC2 && b(i + 1) >= 0x80 && b(i + 1) <= 0x9F) return true;
    if (b(i) == 0xD8 && b(i + 1) == 0x9C) return true; // U+061C arabic letter mark
    if (i + 2 < text.size() && b(i) == 0xE2) {
      auto c1 = b(i + 1), c2 = b(i + 2);
      if (c1 == 0x80 && ((c2 >= 0x8E && c2 <= 0x8F) || (c2 >= 0xA8 && c2 <= 0xAE))) return true;
      if (c1 == 0x81 && c2 >= 0xA6 && c2 <= 0xA9) return true;
    }
  }
  return false;
}

/// A method name as received (any token), for a message.
std::string method_shown(std::string_view method) {
  return escape_for_display(method.substr(0, 16));
}

struct route_pattern {
  const char* method;
  std::size_t count;
  const char* segments[5]; // "*" matches one server name
  route_id id;
};

// Constant data, nothing to destroy: a daemon's threads may still route
// while statics are torn down at exit.
constexpr route_pattern patterns[] = {
  {"GET", 1, {"healthz"}, route_id::healthz},
  {"GET", 2, {"workspace", "mcp"}, route_id::snapshot},
  {"GET", 3, {"workspace", "mcp", "events"}, route_id::events},
  {"POST", 3, {"workspace", "mcp", "reload"}, route_id::reload},
  {"POST", 4, {"workspace", "mcp", "tools", "call"}, route_id::call},
  {"POST", 4, {"workspace", "mcp", "*", "approve"}, route_id::approve},
  {"POST", 4, {"workspace", "mcp", "*", "reject"}, route_id::reject},
  {"POST", 4, {"workspace", "mcp", "*", "restart"}, route_id::restart},
  // resources, prompts and completion
  {"GET", 4, {"workspace", "mcp", "*", "resources"}, route_id::resources},
  {"GET", 4, {"workspace", "mcp", "*", "resource-templates"}, route_id::resource_templates},
  {"POST", 5, {"workspace", "mcp", "*", "resources", "read"}, route_id::resource_read},
  {"POST", 5, {"workspace", "mcp", "*", "resources", "subscribe"}, route_id::resource_subscribe},
  {"POST", 5, {"workspace", "mcp", "*", "resources", "unsubscribe"}, route_id::resource_unsubscribe},
  {"POST", 5, {"workspace", "mcp", "*", "prompts", "get"}, route_id::prompt_get},
  {"POST", 4, {"workspace", "mcp", "*", "complete"}, route_id::complete},
  // answers to servers' requests for the host; ids are hex, never
  // a word of the per-server routes above, which match first
  {"POST", 4, {"workspace", "mcp", "elicitations", "*"}, route_id::elicitation_answer},
  {"POST", 4, {"workspace", "mcp", "sampling", "*"}, route_id::sampling_answer},
  {"GET", 4, {"workspace", "mcp", "*", "prompts"}, route_id::prompts},
  // cancel of a tool call
  {"POST", 5, {"workspace", "mcp", "calls", "*", "cancel"}, route_id::call_cancel},
  // OAuth
  {"POST", 4, {"workspace", "mcp", "*", "auth"}, route_id::auth},
  {"DELETE", 4, {"workspace", "mcp", "*", "auth"}, route_id::auth_logout},
  // the gateway
  {"POST", 1, {"mcp"}, route_id::mcp_post},
  {"GET", 1, {"mcp"}, route_id::mcp_get},
  {"DELETE", 1, {"mcp"}, route_id::mcp_delete},
  // a tool set's endpoint (settings mcp.toolSets): the set in `server`
  {"POST", 2, {"mcp", "*"}, route_id::mcp_post},
  {"GET", 2, {"mcp", "*"}, route_id::mcp_get},
  {"DELETE", 2, {"mcp", "*"}, route_id::mcp_delete},
  {"GET", 1, {"sse"}, route_id::legacy_sse},
  {"POST", 1, {"messages"}, route_id::legacy_messages},
};

bool matches(const route_pattern& p, const std::vector<std::string>& segs, std::string& server) {
  if (p.count != segs.size()) return false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    std::string_view want = p.segments[i];
    if (want == "*") {
      if (segs[i].empty()) return false;
      server = segs[i];
    } else if (segs[i] != want) {
      return false;
    }
  }
  return true;
}

} // namespace

std::vector<std::string_view> header_values(const header_list& headers, std::string_view name) {
  std::vector<std::string_view> out;
  for (auto& h : headers)
    if (h.name == name) out.push_back(h.value);
  return out;
}

std::string shown(std::string_view text, std::size_t max) {
  if (text.size() <= max) return "'" + escape_for_display(text) + "'";
  return "'" + escape_for_display(text.substr(0, max)) + "…' (" + std::to_string(text.size()) + " bytes)";
}

// -- who may ask -------------------------------------------------------------------------

bool is_loopback_host(std::string_view host) {
  if (ascii_iequals(host, "localhost")) return true;
  auto ip = oauth::parse_ip_literal(host);
  return ip && oauth::scope_of(*ip) == oauth::address_scope::loopback;
}

std::vector<std::string> allowed_hosts(const listener& l) {
  std::vector<std::string> out;
  if (!is_loopback_host(l.host)) return out;
  auto port = std::to_string(l.port);
  auto own = l.host.find(':') != std::string::npos ? "[" + ascii_lower(l.host) + "]" : ascii_lower(l.host);
  for (const auto& h : {own, std::string("localhost"), std::string("127.0.0.1"), std::string("[::1]")}) {
    auto with_port = h + ":" + port;
    if (std::find(out.begin(), out.end(), with_port) == out.end()) out.push_back(with_port);
    // A browser leaves out the default port.
    if (l.port == 80 && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  return out;
}

std::optional<refusal> check_host(const header_list& headers, const listener& l) {
  return check_host(headers, l, allowed_hosts(l));
}

std::optional<refusal> check_host(const header_list& headers, const listener& l,
                                  const std::vector<std::string>& allowed) {
  auto values = header_values(headers, "host");
  if (values.empty()) return refusal{400, "bad_request", "the request has no Host header"};
  if (values.size() > 1) return refusal{400, "bad_request", "the request has more than one Host header"};
  if (allowed.empty()) return std::nullopt;
  auto host = ascii_lower(trim(values.front()));
  if (std::find(allowed.begin(), allowed.end(), host) != allowed.end()) return std::nullopt;
  return refusal{403, "host_not_allowed",
                 "Host " + shown(values.front()) + " is not this daemon's address (it answers to "
                   + allowed.front() + ", localhost, 127.0.0.1 or [::1] with port " + std::to_string(l.port) + ")"};
}

bool is_origin(std::string_view text) {
  std::string_view rest;
  if (text.rfind("http://", 0) == 0) rest = text.substr(7);
  else if (text.rfind("https://", 0) == 0) rest = text.substr(8);
  else return false;
  if (rest.empty()) return false;
  std::string_view host = rest, port;
  if (rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : rest.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    host = rest.substr(0, close + 1);
    auto after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
      if (port.empty()) return false;
    }
  } else {
    auto colon = rest.find(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

origin_verdict check_origin(const header_list& headers, const std::vector<std::string>& allowed) {
  origin_verdict out;
  auto values = header_values(headers, "origin");
  if (values.empty()) return out;
  if (values.size() > 1) {
    out.refused = refusal{403, "origin_not_allowed", "the request has more than one Origin header"};
    return out;
  }
  auto origin = ascii_lower(trim(values.front()));
  for (auto& a : allowed)
    if (ascii_lower(a) == origin) {
      out.allowed_origin = origin;
      return out;
    }
  out.refused = refusal{403, "origin_not_allowed",
                        "requests from web pages of origin " + shown(values.front())
                          + " are refused (allow one with `mcprt serve --allow-origin ORIGIN`)"};
  return out;
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::optional<refusal> check_bearer(const header_list& headers, std::string_view token) {
  if (token.empty()) return std::nullopt;
  auto values = header_values(headers, "authorization");
  std::string why = "no bearer token";
  if (values.size() == 1) {
    auto v = trim(values.front());
    if (v.size() > 7 && ascii_iequals(v.substr(0, 7), "bearer ")) {
      if (same_secret(trim(v.substr(7)), token)) return std::nullopt;
      why = "a wrong bearer token";
    } else {
      why = "no bearer token";
    }
  } else if (values.size() > 1) {
    why = "more than one Authorization header";
  }
  return refusal{401, "unauthorized",
                 "this daemon answers only its owner: send Authorization: Bearer <token> with the token in the "
                 "owner's ~/.mcprt/token (or in the --token-file it was started with); the request has "
                   + why};
}

// -- what it names -----------------------------------------------------------------------

bool is_plain_name(std::string_view name) {
  if (name.empty() || name.size() > 512 || first_invalid_utf8(name)) return false;
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7F) return false;
  return !has_hidden_characters(name);
}

bool is_json_media_type(std::string_view content_type) {
  auto semi = content_type.find(';');
  auto type = trim(content_type.substr(0, semi));
  if (!ascii_iequals(type, "application/json")) return false;
  while (semi != std::string_view::npos) {
    auto rest = content_type.substr(semi + 1);
    auto next = rest.find(';');
    auto param = trim(rest.substr(0, next));
    semi = next == std::string_view::npos ? next : semi + 1 + next;
    if (param.empty()) continue;
    auto eq = param.find('=');
    if (eq == std::string_view::npos) return false;
    if (ascii_iequals(trim(param.substr(0, eq)), "charset")) {
      auto value = trim(param.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      if (!ascii_iequals(value, "utf-8")) return false;
    }
  }
  return true;
}

std::optional<refusal> check_json_content_type(const header_list& headers) {
  auto values = header_values(headers, "content-type");
  if (values.size() == 1 && is_json_media_type(values.front())) return std::nullopt;
  std::string got = values.empty() ? std::string("none") : values.size() > 1 ? "several" : shown(values.front());
  return refusal{415, "unsupported_media_type",
                 "a POST must carry Content-Type: application/json (got " + got + ")"};
}

decoded_path decode_path(std::string_view target) {
  decoded_path out;
  auto end = target.find_first_of("?#");
  auto path = target.substr(0, end);
  if (path.empty() || path.front() != '/') {
    out.refused = bad_path(target, "is not an absolute path");
    return out;
  }
  std::string seg;
  auto finish = [&]() -> bool {
    if (auto bad = first_invalid_utf8(seg)) {
      out.refused = bad_path(target, "is not UTF-8 once decoded");
      return false;
    }
    out.segments.push_back(std::move(seg));
    seg.clear();
    return true;
  };
  for (std::size_t i = 1; i < path.size(); ++i) {
    char c = path[i];
    if (c == '/') {
      if (!finish()) return out;
      continue;
    }
    unsigned char byte = static_cast<unsigned char>(c);
    if (c == '%') {
      int hi = i + 2 < path.size() ? hex_value(path[i + 1]) : -1;
      int lo = hi >= 0 ? hex_value(path[i + 2]) : -1;
      if (lo < 0) {
        out.refused = bad_path(target, "has a bad percent escape");
        return out;
      }
      byte = static_cast<unsigned char>(hi * 16 + lo);
      i += 2;
    }
    if (byte < 0x20 || byte == 0x7F) {
      out.refused = bad_path(target, "holds a control character");
      return out;
    }
    seg.push_back(static_cast<char>(byte));
  }
  if (!finish()) return out;
  for (auto& s : out.segments)
    if (has_hidden_characters(s)) {
      out.refused = bad_path(target, "holds a control or direction-changing character");
      out.segments.clear();
      return out;
    }
  return out;
}

routing resolve_route(std::string_view method, std::string_view target) {
  routing out;
  auto path = decode_path(target);
  if (path.refused) {
    out.refused = path.refused;
    return out;
  }
  std::string allow;
  auto add_allow = [&](const char* m) {
    std::string ms = m;
    if (ms == "GET") ms = "GET, HEAD";
    if (allow.find(ms) == std::string::npos) allow += (allow.empty() ? "" : ", ") + ms;
  };
  bool head = method == "HEAD";
  for (auto& p : patterns) {
    std::string server;
    if (!matches(p, path.segments, server)) continue;
    add_allow(p.method);
    if (!out.match && (method == p.method || (head && std::string_view(p.method) == "GET")))
      out.match = route_match{p.id, server};
  }
  out.allow = allow;
  if (out.match) return out;
  if (!allow.empty()) {
    out.refused = refusal{405, "method_not_allowed", method_shown(method) + " " + shown(target) + ": allowed are " + allow};
    return out;
  }
  out.refused = refusal{404, "not_found", "no route " + method_shown(method) + " " + shown(target)};
  return out;
}

std::optional<std::uint64_t> parse_event_id(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

} // namespace mcprt::http
