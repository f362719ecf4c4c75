// core/gateway_session takes a downstream client's JSON-RPC messages (issue
// 17): for any bytes, parsed as the gateway's HTTP side parses a body, the
// session never throws, answers a request at most once and never both
// answers and dispatches it, a dispatch names a server of the catalog (or is
// a stale tool call) and dumps without throwing. Each input is a sequence of
// messages (newline-separated) on one session, so initialize and what
// follows it are reached.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/gateway_session.hpp"
#include "core/untrusted_text.hpp"

namespace {

const mcprt::gateway_catalog& catalog() {
  static const auto c = [] {
    mcprt::gateway_server_view fs;
    fs.name = "fs";
    fs.prefix = "fs__";
    fs.available = true;
    fs.capabilities = {{"tools", nlohmann::json::object()}, {"prompts", nlohmann::json::object()},
                       {"resources", {{"subscribe", true}}}, {"completions", nlohmann::json::object()}};
    fs.tools.push_back({{"name", "read"}, {"inputSchema", {{"type", "object"}}}});
    fs.prompts.push_back({{"name", "p"}});
    fs.resources.push_back({{"uri", "file:///a"}});
    fs.resource_templates.push_back({{"uriTemplate", "file:///{x}"}});
    mcprt::gateway_server_view off;
    off.name = "off";
    off.prefix = "";
    return mcprt::gateway_catalog::build({fs, off});
  }();
  return c;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  mcprt::gateway_session s({});
  // A request of ours the client may answer.
  s.request("sampling/createMessage", {{"messages", nlohmann::json::array()}});
  mcprt::json_limits lim;
  lim.max_depth = 64;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto parsed = mcprt::parse_bounded_json(line, lim);
    if (!parsed.ok()) continue;
    // A line that names 2026-07-28 in its _meta goes the stateless way,
    // with headers taken from the body (or, every third byte, none).
    bool modern = parsed.value.is_object() && parsed.value.contains("params") && parsed.value["params"].is_object() &&
                  parsed.value["params"].contains("_meta");
    mcprt::gateway_effects fx;
    if (modern) {
      mcprt::modern_headers h;
      h.http = line.size() % 3 != 0;
      h.protocol = "2026-07-28";
      if (parsed.value.contains("method") && parsed.value["method"].is_string())
        h.method = parsed.value["method"].get<std::string>();
      mcprt::gateway_session fresh({});
      fx = fresh.on_modern_message(parsed.value, h, catalog());
      if (fx.status != 200 && fx.status != 202 && fx.status != 400 && fx.status != 404) __builtin_trap();
      if (fx.retry && (!fx.dispatch.empty() || !fx.send.empty())) __builtin_trap();
      if (fx.listen && (!fx.dispatch.empty() || !fx.send.empty())) __builtin_trap();
    } else {
      fx = s.on_message(parsed.value, catalog());
    }
    bool request = parsed.value.is_object() && parsed.value.contains("method") && parsed.value.contains("id");
    if (fx.send.size() + fx.dispatch.size() > 1) __builtin_trap();
    if (!request && !fx.dispatch.empty()) __builtin_trap();
    for (auto& m : fx.send)
      (void)mcprt::dump_json(m);
    for (auto& d : fx.dispatch) {
      if (!d.stale && d.server != "fs") __builtin_trap();
      if (d.stale && d.method != "tools/call") __builtin_trap();
      (void)mcprt::dump_json(d.params);
    }
    if (fx.answers.size() > 1) __builtin_trap();
  }
  return 0;
}
