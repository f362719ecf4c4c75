// core/gateway_catalog merges what untrusted servers list into
// the one catalog a gateway client sees. For any input: building never
// throws, every shown tool and prompt routes back to the server and own
// name it came from (and is shown once), every shown resource routes to a
// server, lookups of arbitrary names, URIs and completion refs never throw,
// a catalog differs from nothing in itself, and what it shows dumps.
// The URI template matcher gets the input's first line as a template and
// the rest as a URI: a template without braces matches only itself, a
// valid one matches its expansion with every variable undefined and with
// every variable set, an invalid one matches nothing.
//
// Input: any bytes. As JSON (within the daemon's limits):
//   {"servers": [{"name", "prefix", "available", "capabilities", "tools",
//   "prompts", "resources", "resourceTemplates"}], "lookups": [any],
//   "max_entries": n}

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/gateway_catalog.hpp"
#include "core/tool_sets.hpp"
#include "core/untrusted_text.hpp"

namespace {

using nlohmann::json;

std::vector<json> entries(const json& s, const char* key) {
  std::vector<json> out;
  if (auto it = s.find(key); it != s.end() && it->is_array())
    for (const auto& e : *it)
      out.push_back(e);
  return out;
}

// Each expression replaced by `value` (and its operator's lead character).
std::string expand(std::string_view tpl, bool defined) {
  std::string out;
  std::size_t i = 0;
  while (i < tpl.size()) {
    if (tpl[i] != '{') {
      out += tpl[i++];
      continue;
    }
    auto close = tpl.find('}', i);
    char op = tpl[i + 1];
    if (defined) {
      if (op == '#' || op == '.' || op == '/') out += std::string(1, op) + "a";
      else if (op == ';' || op == '?' || op == '&') out += std::string(1, op) + "v=a";
      else out += "a";
    }
    i = close + 1;
  }
  return out;
}

void check_template(std::string_view text) {
  auto nl = text.find('\n');
  if (nl == std::string_view::npos) return;
  auto tpl = text.substr(0, nl);
  auto uri = text.substr(nl + 1);
  bool m = mcprt::uri_template_matches(tpl, uri);
  bool valid = mcprt::uri_template_valid(tpl);
  if (!valid && m) __builtin_trap();
  if (tpl.find_first_of("{}") == std::string_view::npos && m != (tpl == uri)) __builtin_trap();
  if (valid) {
    if (!mcprt::uri_template_matches(tpl, expand(tpl, false))) __builtin_trap();
    if (!mcprt::uri_template_matches(tpl, expand(tpl, true))) __builtin_trap();
  }
}

void check_catalog(const json& doc) {
  if (!doc.is_object()) return;
  std::vector<mcprt::gateway_server_view> views;
  std::set<std::string> names;
  if (auto it = doc.find("servers"); it != doc.end() && it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_object()) continue;
      mcprt::gateway_server_view v;
      if (auto n = s.find("name"); n != s.end() && n->is_string()) v.name = n->get<std::string>();
      auto p = s.find("prefix");
      v.prefix = p != s.end() && p->is_string() ? p->get<std::string>() : mcprt::default_gateway_prefix(v.name);
      auto a = s.find("available");
      v.available = a == s.end() || (a->is_boolean() && a->get<bool>());
      if (auto c = s.find("capabilities"); c != s.end()) v.capabilities = *c;
      v.tools = entries(s, "tools");
      v.prompts = entries(s, "prompts");
      v.resources = entries(s, "resources");
      v.resource_templates = entries(s, "resourceTemplates");
      views.push_back(std::move(v));
    }
  }
  mcprt::gateway_limits lim;
  if (auto m = doc.find("max_entries"); m != doc.end() && m->is_number_unsigned())
    lim.max_entries = m->get<std::size_t>() % 64;
  std::map<std::string, std::string> prefixes;
  for (const auto& v : views)
    prefixes.emplace(v.name, v.prefix);
  // A tool set from the input, when it parses as one.
  std::optional<mcprt::tool_set> set;
  if (auto it = doc.find("set"); it != doc.end()) {
    auto r = mcprt::parse_tool_sets(json{{"toolSets", {{"s", *it}}}}, "fuzz", "user");
    if (r.error.empty()) set = r.sets.at("s");
  }
  auto c = mcprt::gateway_catalog::build(views, lim, set ? &*set : nullptr);

  auto check_named = [&](const json& list, const char* key, bool tools) {
    std::set<std::string> shown;
    if (list.at(key).size() > lim.max_entries) __builtin_trap();
    for (const auto& e : list.at(key)) {
      const auto& exposed = e.at("name").get_ref<const std::string&>();
      if (!shown.insert(exposed).second) __builtin_trap();
      auto r = tools ? c.tool(exposed) : c.prompt(exposed);
      if (!r) __builtin_trap();
      auto full = prefixes.at(r->server) + r->name;
      if (tools) {
        // Within 64 bytes: the full name when it fits, else a shortening
        // of it that the catalog reports.
        if (exposed.size() > mcprt::max_exposed_tool_name) __builtin_trap();
        bool renamed = false;
        for (const auto& n : c.renamed())
          renamed |= n.exposed == exposed && n.full == full && n.server == r->server && n.name == r->name;
        if (full.size() <= mcprt::max_exposed_tool_name ? full != exposed : !renamed) __builtin_trap();
        if (set && mcprt::tool_out_of_set(*set, r->server, r->name)) __builtin_trap();
      } else if (full != exposed) {
        __builtin_trap();
      }
      if (tools && c.guess_server_of_tool(exposed) != r->server) __builtin_trap();
      if (!tools && !c.completion({{"type", "ref/prompt"}, {"name", exposed}})) __builtin_trap();
    }
  };
  check_named(c.tools_list(), "tools", true);
  check_named(c.prompts_list(), "prompts", false);
  auto resources = c.resources_list();
  for (const auto& e : resources.at("resources"))
    if (!c.resource_server(e.at("uri").get_ref<const std::string&>())) __builtin_trap();
  auto templates = c.resource_templates_list();
  for (const auto& e : templates.at("resourceTemplates"))
    if (!c.completion({{"type", "ref/resource"}, {"uri", e.at("uriTemplate")}})) __builtin_trap();
  if (mcprt::gateway_catalog::diff(c, c).any()) __builtin_trap();
  auto caps = c.capabilities();
  if (!caps.contains("tools") || !caps.contains("prompts") || !caps.contains("resources")) __builtin_trap();
  (void)mcprt::dump_json(c.tools_list());
  (void)mcprt::dump_json(c.prompts_list());
  (void)mcprt::dump_json(c.resources_list());
  (void)mcprt::dump_json(c.resource_templates_list());
  for (const auto& l : c.left_out())
    if (l.count == 0 || (l.reason == "name_conflict" && l.kept_by.empty())) __builtin_trap();

  if (auto it = doc.find("lookups"); it != doc.end() && it->is_array()) {
    for (const auto& q : *it) {
      (void)c.completion(q);
      if (!q.is_string()) continue;
      const auto& s = q.get_ref<const std::string&>();
      (void)c.tool(s);
      (void)c.prompt(s);
      (void)c.resource_server(s);
      (void)c.guess_server_of_tool(s);
      (void)c.servers_with(s);
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  check_template(text);
  mcprt::json_limits lim;
  lim.max_depth = 32;
  lim.replace_invalid_utf8 = true;
  auto parsed = mcprt::parse_bounded_json(text, lim);
  if (parsed.ok()) check_catalog(parsed.value);
  return 0;
}
