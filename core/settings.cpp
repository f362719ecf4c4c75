#include "core/settings.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/json_locate.hpp"
#include "core/patterns.hpp"

namespace mcprt {

using nlohmann::json;
namespace fs = std::filesystem;

std::optional<profile> profile::parse(std::string_view name) {
  if (name == "mcprt") return profile{".mcprt"};
  if (name == "qwen") return profile{".qwen"};
  if (name == "gemini") return profile{".gemini"};
  return std::nullopt;
}

settings_paths resolve_settings_paths(const fs::path& home, const fs::path& workspace,
                                      const profile& p) {
  return {home / p.dir_name / "settings.json", workspace / ".mcp.json",
          workspace / p.dir_name / "settings.json"};
}

namespace {

settings_error error_at(const std::string& path, std::string_view text, std::size_t offset,
                        std::string message) {
  auto pos = position_of(text, offset);
  return {path, pos.line, pos.column, std::move(message)};
}

settings_document failed(settings_document doc, settings_error err) {
  doc.content = json::object();
  doc.servers.clear();
  doc.allowed.reset();
  doc.excluded.reset();
  doc.error = std::move(err);
  return doc;
}

// Reads an array of strings at `mcp.<key>`; returns false (and fills `err`)
// when present with the wrong type.
bool read_list(const json& mcp, const char* key, std::optional<std::vector<std::string>>& out,
               std::string& err, std::vector<std::string>& err_path) {
  auto i = mcp.find(key);
  if (i == mcp.end() || i->is_null()) return true;
  if (!i->is_array()) {
    err = std::string("mcp.") + key + ": expected an array of strings";
    err_path = {"mcp", key};
    return false;
  }
  std::vector<std::string> xs;
  for (std::size_t n = 0; n < i->size(); ++n) {
    auto& v = (*i)[n];
    if (!v.is_string()) {
      err = std::string("mcp.") + key + "[" + std::to_string(n) + "]: expected a string";
      err_path = {"mcp", key, std::to_string(n)};
      return false;
    }
    // Empty entries would match nothing and only confuse the lists.
    if (!v.get<std::string>().empty()) xs.push_back(v.get<std::string>());
  }
  out = std::move(xs);
  return true;
}

/// The half of parsing that works on the JSON value: the servers and the
/// `mcp` lists. `error_at(path, message)` places an error.
template <class ErrorAt>
settings_document fill_document(settings_document doc, json parsed, const settings_document* previous,
                                ErrorAt error_at_path) {
  auto scope = doc.scope;
  auto fail = [&](const std::vector<std::string>& where, std::string msg) {
    auto err = error_at_path(where, std::move(msg));
    return failed(std::move(doc), std::move(err));
  };
  if (auto servers = parsed.find("mcpServers"); servers != parsed.end() && !servers->is_null()) {
    if (!servers->is_object())
      return fail({"mcpServers"}, "mcpServers: expected an object");
    for (auto& [name, value] : servers->items()) {
      if (name.empty())
        return fail({"mcpServers"}, "mcpServers: a server name must not be empty");
      if (previous) {
        // An entry whose JSON did not change keeps its parse (and its
        // fingerprint): re-parsing 10,000 servers for one edit is waste.
        auto p = previous->servers.find(name);
        if (p != previous->servers.end() && p->second.scope == scope && p->second.spec == value) {
          auto c = p->second;
          c.source = doc.path;
          doc.servers.emplace(name, std::move(c));
          continue;
        }
      }
      auto r = parse_server_config(name, value, scope, {"mcpServers", name});
      if (r.error)
        return fail(r.error->path, r.error->path_string() + ": " + r.error->message);
      r.config->source = doc.path;
      doc.servers.emplace(name, std::move(*r.config));
    }
  }

  // `.mcp.json` and --mcp-config files only define servers.
  bool settings_file = scope == config_scope::user || scope == config_scope::workspace;
  if (settings_file) {
    if (auto mcp = parsed.find("mcp"); mcp != parsed.end() && !mcp->is_null()) {
      if (!mcp->is_object())
        return fail({"mcp"}, "mcp: expected an object");
      std::string err;
      std::vector<std::string> err_path;
      if (!read_list(*mcp, "allowed", doc.allowed, err, err_path)
          || !read_list(*mcp, "excluded", doc.excluded, err, err_path))
        return fail(err_path, err);
    }
  }
  doc.content = std::move(parsed);
  return doc;
}


} // namespace

settings_document parse_settings_text(std::string path, config_scope scope, std::string_view text) {
  settings_document doc;
  doc.path = std::move(path);
  doc.scope = scope;
  doc.exists = true;
  auto fail = [&](std::size_t offset, std::string msg) {
    auto err = error_at(doc.path, text, offset, std::move(msg));
    return failed(std::move(doc), std::move(err));
  };
  std::string_view body = text;
  std::size_t bom = 0;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") {
    body.remove_prefix(3);
    bom = 3;
  }
  // An empty file is what a truncating save looks like halfway through; it
  // is reported, not taken as "no servers".
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end(), nullptr, true, true);
  } catch (const json::parse_error& e) {
    std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    std::string msg = e.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line
    // L, column C: "; the position is reported separately.
    if (auto colon = msg.find(": ", msg.find("parse error")); colon != std::string::npos)
      msg = msg.substr(colon + 2);
    return fail(bom + offset, "invalid JSON: " + msg);
  }
  if (!parsed.is_object())
    return fail(bom, "expected a JSON object at the top level");

  auto locate = [&](const std::vector<std::string>& p) {
    auto off = locate_json_value(text, p);
    return off ? *off : bom;
  };
  auto where = doc.path;
  return fill_document(std::move(doc), std::move(parsed), nullptr,
                       [&](const std::vector<std::string>& p, std::string msg) {
                         return error_at(where, text, locate(p), std::move(msg));
                       });
}

settings_document parse_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                       const settings_document* previous) {
  settings_document doc;
  doc.path = std::move(path);
  doc.scope = scope;
  doc.exists = true;
  if (!content.is_object())
    return failed(std::move(doc), settings_error{doc.path, 0, 0, "expected a JSON object at the top level"});
  auto where = doc.path;
  return fill_document(std::move(doc), std::move(content), previous,
                       [&](const std::vector<std::string>&, std::string msg) {
                         return settings_error{where, 0, 0, std::move(msg)};
                       });
}

settings_document load_settings_file(const fs::path& path, config_scope scope) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    settings_document doc;
    doc.path = path.string();
    doc.scope = scope;
    return doc;
  }
  if (fs::is_directory(path, ec)) {
    settings_document doc;
    doc.path = path.string();
    doc.scope = scope;
    doc.exists = true;
    return failed(std::move(doc), settings_error{path.string(), 0, 0, "is a directory, expected a JSON file"});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    settings_document doc;
    doc.path = path.string();
    doc.scope = scope;
    doc.exists = true;
    return failed(std::move(doc), settings_error{path.string(), 0, 0,
                                                 std::string("cannot read: ") + std::strerror(errno)});
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_settings_text(path.string(), scope, buf.str());
}

namespace {

void append_unique(std::vector<std::string>& into, const std::vector<std::string>& xs) {
  for (auto& x : xs)
    if (std::find(into.begin(), into.end(), x) == into.end()) into.push_back(x);
}

} // namespace

assembled_settings assemble(const std::vector<const settings_document*>& layers,
                            const server_map& overlay) {
  assembled_settings out;
  std::vector<const std::vector<std::string>*> allowed_layers;
  for (auto* doc : layers) {
    if (!doc) continue;
    for (auto& [name, cfg] : doc->servers)
      out.servers.insert_or_assign(name, cfg);
    if (doc->allowed) allowed_layers.push_back(&*doc->allowed);
    if (doc->excluded) append_unique(out.excluded, *doc->excluded);
  }
  for (auto& [name, cfg] : overlay)
    out.servers.insert_or_assign(name, cfg);
  // Every scope that sets an allow-list narrows admission; none widens it,
  // so a workspace file cannot admit a server the user's own list keeps out.
  std::vector<std::string> names;
  for (auto& [name, cfg] : out.servers)
    names.push_back(name);
  for (auto* list : allowed_layers) {
    if (!out.allowed) {
      out.allowed.emplace();
      append_unique(*out.allowed, *list);
    } else {
      out.allowed = intersect_allow_lists(*out.allowed, *list, names);
    }
  }
  return out;
}

} // namespace mcprt
