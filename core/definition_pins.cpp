#include "core/definition_pins.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"

using nlohmann::json;

namespace mcprt {

std::string to_string(definition_kind k) {
  switch (k) {
    case definition_kind::tool: return "tool";
    case definition_kind::prompt: return "prompt";
    case definition_kind::resource: return "resource";
  }
  return "tool";
}

std::string pins_key(definition_kind k) {
  return to_string(k) + "s";
}

const std::vector<std::string>& pinned_fields(definition_kind k) {
  static const std::vector<std::string> tool{"name",         "title",       "description",
                                             "inputSchema",  "outputSchema", "annotations"};
  static const std::vector<std::string> prompt{"name", "title", "description", "arguments"};
  static const std::vector<std::string> resource{"uri",         "name",     "title",
                                                 "description", "mimeType", "annotations"};
  switch (k) {
    case definition_kind::tool: return tool;
    case definition_kind::prompt: return prompt;
    case definition_kind::resource: return resource;
  }
  return tool;
}

std::string definition_name(definition_kind k, const json& def) {
  if (!def.is_object()) return {};
  auto i = def.find(k == definition_kind::resource ? "uri" : "name");
  if (i == def.end() || !i->is_string()) return {};
  return i->get<std::string>();
}

definition_pin pin_of(definition_kind k, const json& def) {
  definition_pin pin;
  if (!def.is_object()) return pin;
  // nlohmann's objects keep their keys sorted: a dump is canonical.
  for (auto& field : pinned_fields(k))
    if (auto i = def.find(field); i != def.end() && !i->is_null()) pin[field] = sha256_hex(dump_json(*i));
  return pin;
}

kind_pins pin_listing(definition_kind k, const std::vector<json>& defs) {
  kind_pins out;
  for (auto& d : defs) {
    auto name = definition_name(k, d);
    if (!name.empty()) out.try_emplace(std::move(name), pin_of(k, d));
  }
  return out;
}

std::string listing_digest(const kind_pins& pins) {
  json j = json::object();
  for (auto& [name, pin] : pins)
    j[name] = pin;
  return sha256_hex(dump_json(j));
}

definitions_check check_definitions(definition_kind k, const kind_pins& pinned, const std::vector<json>& offered) {
  definitions_check out;
  std::set<std::string> seen;
  for (auto& d : offered) {
    auto name = definition_name(k, d);
    if (name.empty() || !seen.insert(name).second) continue;
    auto now = pin_of(k, d);
    auto p = pinned.find(name);
    if (p == pinned.end()) {
      out.held.insert(name);
      out.changes.push_back({k, name, definition_change::what::added, {}, d});
      continue;
    }
    if (p->second == now) continue;
    definition_change c{k, name, definition_change::what::changed, {}, d};
    for (auto& field : pinned_fields(k)) {
      auto a = p->second.find(field);
      auto b = now.find(field);
      bool differs = (a == p->second.end()) != (b == now.end()) || (a != p->second.end() && a->second != b->second);
      if (differs) c.fields.push_back(field);
    }
    out.held.insert(name);
    out.changes.push_back(std::move(c));
  }
  for (auto& [name, pin] : pinned)
    if (!seen.count(name)) out.changes.push_back({k, name, definition_change::what::removed, {}, nullptr});
  std::sort(out.changes.begin(), out.changes.end(),
            [](const definition_change& a, const definition_change& b) { return a.name < b.name; });
  return out;
}

namespace {

// Text a server wrote, as a change description quotes it.
std::string quoted_definition_text(std::string_view text, std::size_t max_bytes) {
  bool cut = text.size() > max_bytes;
  if (cut) {
    std::size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
      --n;
    text = text.substr(0, n);
  }
  return "\"" + escape_for_display(text) + (cut ? "...\"" : "\"");
}

} // namespace

std::string describe_changes(const std::vector<definition_change>& changes, std::size_t max_bytes,
                             std::size_t max_quote_bytes) {
  std::string out;
  for (auto& c : changes) {
    std::string part = to_string(c.kind) + " '" + escape_for_display(c.name.substr(0, max_quote_bytes)) + "' ";
    switch (c.change) {
      case definition_change::what::added: part += "added"; break;
      case definition_change::what::removed: part += "removed"; break;
      case definition_change::what::changed: {
        part += "changed (";
        for (std::size_t i = 0; i < c.fields.size(); ++i)
          part += (i ? ", " : "") + c.fields[i];
        part += ")";
        break;
      }
    }
    // The text a model reads is what an attack changes: quote it.
    if (c.change != definition_change::what::removed && c.now.is_object())
      for (const char* field : {"description", "title"}) {
        bool listed = c.change == definition_change::what::added
                      || std::find(c.fields.begin(), c.fields.end(), field) != c.fields.end();
        auto i = c.now.find(field);
        if (listed && i != c.now.end() && i->is_string())
          part += std::string{", "} + field + " now " + quoted_definition_text(i->get<std::string>(), max_quote_bytes);
      }
    if (!out.empty()) part = "; " + part;
    if (out.size() + part.size() > max_bytes) {
      out += out.empty() ? "" : "; ";
      out += "...";
      break;
    }
    out += part;
  }
  return out;
}

std::string held_back_call_message(const std::string& server, const std::string& tool, bool added) {
  auto s = escape_for_display(server);
  return "tool '" + escape_for_display(tool.substr(0, 256)) + "' of server '" + s + "' "
         + (added ? "was added" : "changed") + " since it was approved; run 'mcprt approve " + s
         + "' to approve the definitions it offers now";
}

// -- which servers are pinned ----------------------------------------------------

std::string to_string(pin_mode m) {
  switch (m) {
    case pin_mode::project: return "project";
    case pin_mode::all: return "all";
    case pin_mode::off: return "off";
  }
  return "project";
}

std::optional<pin_mode> parse_pin_mode(std::string_view s) {
  if (s == "project") return pin_mode::project;
  if (s == "all") return pin_mode::all;
  if (s == "off") return pin_mode::off;
  return std::nullopt;
}

pin_policy pinning_for(config_scope scope, std::optional<bool> entry, std::optional<pin_mode> user_mode,
                       std::optional<pin_mode> workspace_mode) {
  pin_policy p;
  if (is_gated(scope)) {
    if (user_mode == pin_mode::off) {
      p.why = "off: the user settings' mcp.pinDefinitions is \"off\"";
      return p;
    }
    p.on = true;
    p.why = "on: a " + to_string(scope) + " server's definitions are pinned at approval";
    if (entry == false)
      p.warning = "its \"pinDefinitions\": false is not honoured: the entry comes with the repository; "
                  "mcp.pinDefinitions \"off\" in the user settings turns pinning off";
    else if (workspace_mode == pin_mode::off)
      p.warning = "the workspace settings' mcp.pinDefinitions \"off\" is not honoured for it: they come with "
                  "the repository; mcp.pinDefinitions \"off\" in the user settings turns pinning off";
    return p;
  }
  if (entry) {
    p.on = *entry;
    p.why = *entry ? "on: its entry says \"pinDefinitions\": true" : "off: its entry says \"pinDefinitions\": false";
    return p;
  }
  if (user_mode == pin_mode::all || workspace_mode == pin_mode::all) {
    p.on = true;
    p.why = std::string{"on: the "} + (user_mode == pin_mode::all ? "user" : "workspace")
            + " settings' mcp.pinDefinitions is \"all\"";
    return p;
  }
  p.why = "off: a " + to_string(scope) + " server is pinned only with \"pinDefinitions\": true or mcp.pinDefinitions \"all\"";
  return p;
}

// -- the store ---------------------------------------------------------------------

json pins_to_json(const definition_pins& pins) {
  json j = json::object();
  for (auto& [kind, entries] : pins) {
    auto& k = j[kind] = json::object();
    for (auto& [name, pin] : entries)
      k[name] = pin;
  }
  return j;
}

std::optional<definition_pins> pins_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  definition_pins out;
  for (auto& [kind, entries] : j.items()) {
    if (kind != "tools" && kind != "prompts" && kind != "resources") return std::nullopt;
    if (!entries.is_object()) return std::nullopt;
    auto& k = out[kind];
    for (auto& [name, pin] : entries.items()) {
      if (!pin.is_object()) return std::nullopt;
      definition_pin p;
      for (auto& [field, digest] : pin.items()) {
        if (!digest.is_string()) return std::nullopt;
        p[field] = digest.get<std::string>();
      }
      k[name] = std::move(p);
    }
  }
  return out;
}

} // namespace mcprt
