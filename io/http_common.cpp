#include "io/http_common.hpp"

#include <algorithm>
#include <array>

#include "core/ascii.hpp"
#include "core/http_url.hpp"

namespace mcprt::io {

// Cut on a character boundary, so UTF-8 text stays UTF-8; the connection
// actor replaces whatever else is invalid before a reason reaches JSON.
std::string excerpt(std::string_view text, std::size_t max) {
  std::size_t cut = std::min(text.size(), max);
  for (int k = 0; k < 3 && cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80;
       ++k)
    --cut;
  std::string out;
  for (char c : text.substr(0, cut)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  if (text.size() > cut) out += "…";
  return out;
}

bool valid_header_name(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (c <= 0x20 || c >= 0x7f || c == ':') return false;
  return true;
}

bool valid_header_value(std::string_view value) {
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

bool transport_owned_header(std::string_view name) {
  static constexpr std::array<std::string_view, 9> owned = {
    "accept", "content-type",   "content-length",       "transfer-encoding", "connection",
    "host",   "mcp-session-id", "mcp-protocol-version", "last-event-id"};
  return std::any_of(owned.begin(), owned.end(), [&](std::string_view o) { return ascii_iequals(o, name); });
}

std::vector<std::string> query_values(std::string_view target) {
  std::vector<std::string> out;
  auto q = target.find('?');
  if (q == std::string_view::npos) return out;
  auto rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto pair = rest.substr(0, amp);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos) out.emplace_back(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

} // namespace mcprt::io
