#include "core/daemon_identity.hpp"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

parsed_daemon_record parse_daemon_record(std::string_view text) {
  parsed_daemon_record out;
  json_limits lim;
  lim.max_bytes = 64 * 1024;
  lim.max_depth = 8;
  auto parsed = parse_bounded_json(text, lim);
  if (!parsed.ok()) {
    out.error = "it is not valid JSON: " + parsed.error->message;
    return out;
  }
  auto& j = parsed.value;
  if (!j.is_object()) {
    out.error = "it is not a JSON object";
    return out;
  }
  auto text_field = [&](const char* key, bool required, std::string& into) {
    if (!j.contains(key)) return !required;
    if (!j[key].is_string()) return false;
    into = j[key].get<std::string>();
    return !required || !into.empty();
  };
  daemon_record r;
  if (!text_field("url", true, r.url)) {
    out.error = "it has no \"url\" string";
    return out;
  }
  if (!j.contains("pid") || !j["pid"].is_number_integer() || j["pid"].get<long long>() <= 0
      || j["pid"].get<long long>() > 0x7fffffff) {
    out.error = "it has no \"pid\" (a positive integer)";
    return out;
  }
  r.pid = static_cast<long>(j["pid"].get<long long>());
  if (!text_field("instance", false, r.instance) || !text_field("workspace", false, r.workspace)
      || !text_field("approvals", false, r.approvals) || !text_field("token_file", false, r.token_file)) {
    out.error = "\"instance\", \"workspace\", \"approvals\" and \"token_file\" must be strings";
    return out;
  }
  out.record = std::move(r);
  return out;
}

std::optional<http_endpoint> parse_http_url(std::string_view url) {
  const std::string_view scheme = "http://";
  if (url.substr(0, scheme.size()) != scheme) return std::nullopt;
  auto rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  http_endpoint out;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') return std::nullopt;
    out.host = std::string(rest.substr(1, close - 1));
    port = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    out.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
  }
  if (out.host.empty() || port.empty() || port.size() > 5) return std::nullopt;
  for (char c : out.host)
    if (c == '/' || c == '@' || c == '?' || c == '#' || c == ' ' || static_cast<unsigned char>(c) < 0x21)
      return std::nullopt;
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    p = p * 10 + (c - '0');
  }
  if (p < 1 || p > 65535) return std::nullopt;
  out.port = p;
  return out;
}

std::vector<listening_socket> parse_proc_net_tcp(std::string_view text, bool v6) {
  std::vector<listening_socket> out;
  std::size_t pos = 0;
  bool header = true;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    auto line = std::string(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (header) {
      header = false;
      continue;
    }
    // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
    char local[64] = {0}, remote[64] = {0};
    unsigned state = 0;
    unsigned long inode = 0;
    unsigned uid = 0, tr = 0, retr = 0, timeout = 0;
    int slot = 0;
    char queues[64] = {0}, timer[64] = {0};
    if (std::sscanf(line.c_str(), " %d: %63s %63s %x %63s %x:%63s %x %u %u %lu", &slot, local, remote, &state,
                    queues, &tr, timer, &retr, &uid, &timeout, &inode)
        != 11)
      continue;
    if (state != 0x0A) continue; // TCP_LISTEN
    std::string loc = local;
    auto colon = loc.find(':');
    if (colon == std::string::npos) continue;
    auto addr_hex = loc.substr(0, colon);
    unsigned port = 0;
    if (std::sscanf(loc.c_str() + colon + 1, "%x", &port) != 1) continue;
    // The kernel prints the address as host-order 32-bit words in hex.
    std::size_t words = v6 ? 4 : 1;
    if (addr_hex.size() != words * 8) continue;
    unsigned char bytes[16];
    bool ok = true;
    for (std::size_t w = 0; w < words && ok; ++w) {
      unsigned int word = 0;
      ok = std::sscanf(addr_hex.substr(w * 8, 8).c_str(), "%8x", &word) == 1;
      std::memcpy(bytes + w * 4, &word, 4);
    }
    if (!ok) continue;
    char buf[INET6_ADDRSTRLEN] = {0};
    if (!::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, buf, sizeof buf)) continue;
    out.push_back({buf, static_cast<int>(port), inode});
  }
  return out;
}

std::string connect_address(const std::string& address) {
  if (address == "0.0.0.0") return "127.0.0.1";
  if (address == "::") return "::1";
  return address;
}

std::vector<std::string> split_cmdline(std::string_view raw) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < raw.size()) {
    auto nul = raw.find('\0', pos);
    if (nul == std::string_view::npos) nul = raw.size();
    out.emplace_back(raw.substr(pos, nul - pos));
    pos = nul + 1;
  }
  return out;
}

std::optional<std::string> serve_workspace_arg(const std::vector<std::string>& argv) {
  if (argv.size() < 2 || argv[1] != "serve") return std::nullopt;
  std::string ws = ".";
  for (std::size_t i = 2; i < argv.size(); ++i) {
    const auto& a = argv[i];
    if (a == "--") break;
    if ((a == "--workspace" || a == "-w") && i + 1 < argv.size()) ws = argv[++i];
    else if (a.rfind("--workspace=", 0) == 0) ws = a.substr(12);
    else if (a.rfind("-w", 0) == 0 && a.size() > 2 && a[2] != '-') ws = a.substr(a[2] == '=' ? 3 : 2);
  }
  return ws;
}

std::string weak_token_reason(std::string_view token) {
  auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  auto is_base64 = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '+'
           || c == '/';
  };
  auto body = token;
  std::size_t padding = 0;
  while (!body.empty() && body.back() == '=' && padding < 2) {
    body.remove_suffix(1);
    ++padding;
  }
  // A line of hex digits alone is read as hex (4 bits a digit), even
  // though every hex digit is a base64 character too.
  bool hex = padding == 0;
  bool base64 = body.size() >= 22;
  bool seen[256] = {};
  std::size_t distinct = 0;
  for (char c : body) {
    hex = hex && is_hex(c);
    base64 = base64 && is_base64(c);
    auto& s = seen[static_cast<unsigned char>(c)];
    if (!s) ++distinct;
    s = true;
  }
  bool enough = hex ? token.size() >= 32 : base64;
  if (enough && distinct >= 8) return {};
  return "its first line is no token: a token holds at least 128 random bits, as 32 or more hex digits or 22 or "
         "more base64url characters and nothing else (make one with `openssl rand -hex 32 > FILE; chmod 600 FILE`)";
}

} // namespace mcprt
