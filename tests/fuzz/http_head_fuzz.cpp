// A remote MCP server's (or a proxy's) response head, line by line, through
// core/http_head as io/http_client reads it; the first line of the input,
// split on ' ', also goes through core/proxy_choice as NO_PROXY, proxy
// variables and a host.
//
// Whatever the bytes: nothing crashes; a complete head has a final status
// and stays within the bounds; the proxy chosen is empty or one of the
// values given.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ascii.hpp"
#include "core/http_head.hpp"
#include "core/proxy_choice.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  mcprt::http_head_reader reader;
  std::string_view rest = in;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    auto line = rest.substr(0, nl == std::string_view::npos ? rest.size() : nl + 1);
    rest.remove_prefix(line.size());
    auto s = reader.feed(line);
    if (s == mcprt::http_head_reader::step::too_large) break;
    if (s == mcprt::http_head_reader::step::complete) {
      const auto& h = reader.head();
      if (h.status < 200 || h.status > 999) __builtin_trap();
      if (h.headers.size() > mcprt::http_head_reader::max_headers) __builtin_trap();
    }
  }

  auto first = in.substr(0, in.find('\n'));
  std::vector<std::string> parts;
  for (std::size_t start = 0; start <= first.size();) {
    auto sp = first.find(' ', start);
    if (sp == std::string_view::npos) sp = first.size();
    parts.emplace_back(first.substr(start, sp - start));
    start = sp + 1;
  }
  parts.resize(5);
  std::map<std::string, std::string> vars{
    {"NO_PROXY", parts[0]}, {"HTTPS_PROXY", parts[1]}, {"http_proxy", parts[2]}};
  auto env = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  const std::string configured(mcprt::trim_space(parts[4]));
  for (const char* scheme : {"http", "https"}) {
    auto chosen = mcprt::choose_proxy(scheme, parts[3], 443, parts[4], env);
    if (!chosen.empty() && chosen != parts[1] && chosen != parts[2] && chosen != configured) __builtin_trap();
  }
  return 0;
}
