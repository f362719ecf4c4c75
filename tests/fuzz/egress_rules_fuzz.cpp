// What a sandboxed server sends the egress proxy, and what a settings file
// names as its allow-list, through core/egress_rules: the first line of the
// input, split at ',', is a `"network"` list; the rest is a request head,
// its end looked for in pieces as the proxy reads it.
//
// Whatever the bytes: nothing crashes; an entry reads back as itself; the
// head's end is the same found whole or a byte at a time; a parsed request
// names a valid host and port that an entry written from them allows; the
// head sent upstream is lines without CR or LF inside, one Host, no Proxy-*
// field; a refusal is 400 or 403 with a reason that can be shown as it is,
// and its response has no line its reason or host could add.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/ascii.hpp"
#include "core/egress_rules.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

using mcprt::fuzz::printable;
using mcprt::fuzz::require;
namespace egress = mcprt::egress;

namespace {

void check_entries(std::string_view line) {
  std::vector<std::string> texts;
  for (std::size_t start = 0; start <= line.size();) {
    auto comma = line.find(',', start);
    if (comma == std::string_view::npos) comma = line.size();
    texts.emplace_back(line.substr(start, comma - start));
    start = comma + 1;
  }
  auto list = egress::parse_allow_list(texts);
  require(list.entries.size() + list.errors.size() <= texts.size());
  for (const auto& e : list.errors)
    require(!e.empty() && printable(e));
  for (const auto& e : list.entries) {
    std::string why;
    auto again = egress::parse_allow_entry(e.text(), &why);
    require(again && *again == e);
    require(!e.host.empty());
    require(e.port >= 0 && e.port <= 65535);
    if (!e.subdomains) require(egress::entry_matches(e, e.host, e.port ? e.port : 1));
  }
}

void check_upstream_head(const egress::proxy_request& r) {
  auto head = egress::upstream_head(r);
  require(head.size() >= 4 && head.compare(head.size() - 4, 4, "\r\n\r\n") == 0);
  require(head.rfind(r.method + " /", 0) == 0);
  int hosts = 0;
  std::string_view rest(head);
  rest.remove_suffix(2);                     // the blank line's CR LF
  rest.remove_prefix(rest.find("\r\n") + 2); // the request line (a method may be `Proxy-X`)
  while (!rest.empty()) {
    auto end = rest.find("\r\n");
    require(end != std::string_view::npos);
    auto line = rest.substr(0, end);
    require(line.find('\r') == std::string_view::npos && line.find('\n') == std::string_view::npos);
    auto lower = mcprt::ascii_lower(line);
    if (lower.rfind("host:", 0) == 0) ++hosts;
    require(lower.rfind("proxy-", 0) != 0);
    rest.remove_prefix(end + 2);
  }
  require(hosts == 1);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  check_entries(in.substr(0, nl));
  auto bytes = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);

  // The end, whole and a byte at a time as the proxy resumes.
  auto whole = egress::find_head_end(bytes, 0);
  std::size_t scanned = 0, piecewise = std::string_view::npos;
  for (std::size_t n = 1; n <= bytes.size() && piecewise == std::string_view::npos; ++n) {
    auto from = scanned;
    piecewise = egress::find_head_end(bytes.substr(0, n), from, &scanned);
    require(scanned <= n && scanned >= from);
  }
  require(whole == piecewise);
  if (whole == std::string_view::npos) return 0;
  require(whole <= bytes.size());

  auto v = egress::parse_proxy_head(bytes.substr(0, whole));
  if (!v.request) {
    require(v.status == 400 || v.status == 403);
    require(!v.reason.empty() && printable(v.reason));
    auto response = egress::refusal_response(v.status, v.reason, v.host, v.port);
    auto blank = response.find("\r\n\r\n");
    require(blank != std::string::npos);
    auto body = std::string_view(response).substr(blank + 4);
    require(!body.empty() && body.back() == '\n' && body.find('\r') == std::string_view::npos);
    require(body.find('\n') == body.size() - 1);
    return 0;
  }
  const auto& r = *v.request;
  require(r.port >= 1 && r.port <= 65535);
  require(!r.host.empty() && egress::normalized_host(r.host) == r.host);
  auto authority = r.host.find(':') != std::string::npos ? "[" + r.host + "]" : r.host;
  auto entry = egress::parse_allow_entry(authority + ":" + std::to_string(r.port));
  require(entry && egress::is_allowed({*entry}, r.host, r.port));
  if (!r.is_connect) check_upstream_head(r);
  return 0;
}
