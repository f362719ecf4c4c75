#include "core/proxy_choice.hpp"

#include <arpa/inet.h>

#include <cstdlib>

#include "core/ascii.hpp"

namespace mcprt {

namespace {

std::optional<std::string> first_set(const env_lookup& env, const char* lower, const char* upper) {
  if (auto v = env(lower); v && !v->empty()) return v;
  if (auto v = env(upper); v && !v->empty()) return v;
  return std::nullopt;
}

bool ends_with_label(std::string_view host, std::string_view suffix) {
  if (host.size() == suffix.size()) return host == suffix;
  if (host.size() < suffix.size() + 1) return false;
  return host.substr(host.size() - suffix.size()) == suffix && host[host.size() - suffix.size() - 1] == '.';
}

// One NO_PROXY entry against the (lower-case) host and port.
bool no_proxy_entry_matches(std::string_view entry, std::string_view host, int port) {
  entry = trim_space(entry);
  if (entry.empty()) return false;
  if (entry == "*") return true;
  std::string_view name = entry;
  std::optional<int> entry_port;
  // host:port, [v6]:port; a bare IPv6 literal has several colons.
  if (name.front() == '[') {
    auto close = name.find(']');
    if (close == std::string_view::npos) return false;
    auto rest = name.substr(close + 1);
    name = name.substr(1, close - 1);
    if (rest.size() > 1 && rest.front() == ':') entry_port = std::atoi(std::string(rest.substr(1)).c_str());
  } else if (auto colon = name.rfind(':'); colon != std::string_view::npos && name.find(':') == colon) {
    entry_port = std::atoi(std::string(name.substr(colon + 1)).c_str());
    name = name.substr(0, colon);
  }
  if (entry_port && *entry_port != port) return false;
  while (!name.empty() && name.front() == '.') name.remove_prefix(1);
  if (!name.empty() && name.front() == '*') {
    name.remove_prefix(1);
    while (!name.empty() && name.front() == '.') name.remove_prefix(1);
  }
  if (name.empty()) return false;
  auto lower = ascii_lower(name);
  in6_addr a6{};
  in_addr a4{};
  const std::string h(host);
  if (::inet_pton(AF_INET, h.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, h.c_str(), &a6) == 1) return lower == host;
  return ends_with_label(host, lower);
}

} // namespace

env_lookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name)) return std::string(v);
    return std::nullopt;
  };
}

bool is_loopback_host(std::string_view host_in) {
  auto host = ascii_lower(host_in);
  if (host == "localhost" || ends_with_label(host, "localhost")) return true;
  in_addr a4{};
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;
}

std::string choose_proxy(std::string_view scheme, std::string_view host_in, int port, std::string_view configured,
                         const env_lookup& env) {
  configured = trim_space(configured);
  if (!configured.empty()) {
    auto c = ascii_lower(configured);
    if (c == "direct" || c == "none") return {};
    return std::string(configured);
  }
  auto host = ascii_lower(host_in);
  if (is_loopback_host(host)) return {};
  std::optional<std::string> proxy;
  if (ascii_iequals(scheme, "https")) proxy = first_set(env, "https_proxy", "HTTPS_PROXY");
  else proxy = first_set(env, "http_proxy", "HTTP_PROXY");
  if (!proxy) proxy = first_set(env, "all_proxy", "ALL_PROXY");
  if (!proxy) return {};
  if (auto no = first_set(env, "no_proxy", "NO_PROXY")) {
    std::string_view list = *no;
    while (!list.empty()) {
      auto comma = list.find(',');
      auto entry = list.substr(0, comma);
      if (no_proxy_entry_matches(entry, host, port)) return {};
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return *proxy;
}

} // namespace mcprt
