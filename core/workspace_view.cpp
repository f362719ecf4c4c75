#include "core/workspace_view.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

namespace fs = std::filesystem;

std::vector<std::string> split_name_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    auto b = cur.find_first_not_of(" \t");
    auto e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',') flush();
    else cur.push_back(c);
  }
  flush();
  return out;
}

gating_result gate(const assembled_settings& merged, const workspace_options& opts,
                   const std::string& project_root, approvals_store& approvals) {
  gating_input in;
  in.servers = &merged.servers;
  in.settings_allowed = merged.allowed;
  in.settings_excluded = merged.excluded;
  in.launch_bound = opts.launch_bound;
  in.trusted = opts.trusted;
  in.approval = [&](const server_config& c) {
    return approvals.state(project_root, c.name, approval_hash(c));
  };
  return compute_gating(in);
}

workspace_view load_workspace(const workspace_options& opts, approvals_store& approvals) {
  workspace_view view;
  view.workspace = approvals_store::normalize_project_root(opts.workspace.string());
  auto paths = resolve_settings_paths(opts.home, view.workspace, opts.settings_profile);
  view.documents.reserve(4); // `layers` points into it
  view.documents.push_back(load_settings_file(paths.user, config_scope::user));
  view.documents.push_back(load_settings_file(paths.project, config_scope::project));
  view.documents.push_back(load_settings_file(paths.workspace, config_scope::workspace));
  std::vector<const settings_document*> layers;
  for (auto& d : view.documents)
    layers.push_back(&d);
  server_map overlay;
  if (opts.mcp_config) {
    auto top = load_settings_file(*opts.mcp_config, config_scope::session);
    if (top.ok() && !top.exists)
      top.error = settings_error{opts.mcp_config->string(), 0, 0, "file not found"};
    overlay = top.servers;
    view.documents.push_back(std::move(top));
  }
  for (auto& d : view.documents)
    if (d.error) view.errors.push_back(*d.error);
  view.merged = assemble(layers, overlay);
  view.gating = gate(view.merged, opts, view.workspace, approvals);
  return view;
}

namespace {

using nlohmann::ordered_json;

ordered_json optional_list(const std::optional<std::vector<std::string>>& xs) {
  return xs ? ordered_json(*xs) : ordered_json(nullptr);
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

/// Entries of a list from a settings file, escaped, comma-separated.
std::string shown_list(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + escape_for_display(x);
  return out.empty() ? "-" : out;
}

} // namespace

ordered_json explain_json(const workspace_view& v, bool trusted, const std::optional<fingerprint_key>& key) {
  ordered_json out = ordered_json::object();
  out["workspace"] = v.workspace;
  out["trusted"] = trusted;
  out["servers"] = ordered_json::array();
  for (auto& [name, cfg] : v.merged.servers) {
    ordered_json s = ordered_json::object();
    s["name"] = name;
    s["scope"] = to_string(cfg.scope);
    s["transport"] = to_string(cfg.transport());
    s["fingerprint"] = key ? ordered_json(keyed_connection_id(connection_id(cfg), *key)) : ordered_json(nullptr);
    auto adm = v.gating.servers.find(name);
    bool known = adm != v.gating.servers.end();
    s["admitted"] = known && adm->second.admitted;
    s["reason"] = known && adm->second.reason ? ordered_json(to_string(*adm->second.reason)) : ordered_json(nullptr);
    s["approval"] =
      known && adm->second.approval ? ordered_json(to_string(*adm->second.approval)) : ordered_json(nullptr);
    auto oauth = v.oauth.find(name);
    s["oauth"] = oauth != v.oauth.end() ? ordered_json(oauth->second) : ordered_json(nullptr);
    out["servers"].push_back(std::move(s));
  }
  ordered_json g = ordered_json::object();
  g["allowed"] = optional_list(v.gating.lists.allowed);
  g["excluded"] = v.gating.lists.excluded;
  g["pending"] = v.gating.lists.pending;
  g["promptable"] = v.gating.promptable;
  out["gating"] = std::move(g);
  out["errors"] = ordered_json::array();
  for (auto& e : v.errors)
    out["errors"].push_back({{"path", e.path}, {"line", e.line}, {"column", e.column}, {"message", e.message}});
  return out;
}

void write_explain_table(const workspace_view& v, bool trusted, std::ostream& os) {
  os << "workspace " << escape_for_display(v.workspace) << (trusted ? "" : " (untrusted: nothing starts)")
     << "\n\n";
  if (v.merged.servers.empty()) {
    os << "no MCP servers configured\n";
  } else {
    std::vector<std::string> shown;
    std::size_t w = 6;
    for (auto& [name, cfg] : v.merged.servers) {
      shown.push_back(escape_for_display(name));
      w = std::max(w, shown.back().size() + 2);
    }
    os << pad("NAME", w) << pad("SCOPE", 11) << pad("TRANSPORT", 11) << pad("STATE", 10) << "WHY\n";
    auto shown_name = shown.begin();
    for (auto& [name, config] : v.merged.servers) {
      auto adm = v.gating.servers.find(name);
      bool admitted = adm != v.gating.servers.end() && adm->second.admitted;
      std::string why;
      if (adm != v.gating.servers.end()) {
        if (adm->second.reason)
          why = to_string(*adm->second.reason) + ": " + escape_for_display(remedy(*adm->second.reason, name));
        else if (adm->second.approval)
          why = "approved";
      }
      if (auto oauth = v.oauth.find(name); oauth != v.oauth.end() && oauth->second == "stored")
        why += std::string(why.empty() ? "" : "; ") + "OAuth tokens stored";
      else if (oauth != v.oauth.end() && oauth->second == "needs_auth")
        why += std::string(why.empty() ? "" : "; ") + "needs_auth: run `mcprt auth " + escape_for_display(name) + "`";
      os << pad(*shown_name++, w) << pad(to_string(config.scope), 11) << pad(to_string(config.transport()), 11)
         << pad(admitted ? "admitted" : "blocked", 10) << why << "\n";
    }
  }
  os << "\nallowed:    " << (v.gating.lists.allowed ? shown_list(*v.gating.lists.allowed) : "all") << "\n"
     << "excluded:   " << shown_list(v.gating.lists.excluded) << "\n"
     << "pending:    " << shown_list(v.gating.lists.pending) << "\n"
     << "promptable: " << shown_list(v.gating.promptable) << "\n";
  if (!v.errors.empty()) {
    os << "\nsettings errors (these files are ignored until fixed):\n";
    // Messages are printable by contract (settings_error); paths are not.
    for (auto& e : v.errors)
      os << "  " << escape_for_display(e.path) << ":" << e.line << ":" << e.column << ": " << e.message << "\n";
  }
}

} // namespace mcprt
