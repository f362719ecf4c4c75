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

variable_context variables_of(const workspace_options& opts, const std::string& project_root,
                              input_store* inputs) {
  variable_context ctx;
  ctx.env = opts.environment ? opts.environment : process_environment();
  if (inputs)
    ctx.input = [inputs, project_root](const std::string& id) { return inputs->get(project_root, id); };
  ctx.workspace_folder = project_root;
  ctx.user_home = opts.home.string();
  return ctx;
}

gating_input gating_input_of(const assembled_settings& merged, const workspace_options& opts,
                             const std::string& project_root, approvals_store& approvals,
                             const variable_context& variables) {
  gating_input in;
  in.variables = &variables;
  in.servers = &merged.servers;
  in.settings_allowed = merged.allowed;
  in.settings_excluded = merged.excluded;
  in.launch_bound = opts.launch_bound;
  in.trusted = opts.trusted;
  in.approval = [&approvals, &project_root](const server_config& c) {
    return approvals.state(project_root, c.name, approval_hash(c));
  };
  return in;
}

gating_result gate(const assembled_settings& merged, const workspace_options& opts,
                   const std::string& project_root, approvals_store& approvals, input_store* inputs) {
  auto variables = variables_of(opts, project_root, inputs);
  return compute_gating(gating_input_of(merged, opts, project_root, approvals, variables));
}

workspace_view load_workspace(const workspace_options& opts, approvals_store& approvals, input_store* inputs) {
  workspace_view view;
  view.workspace = approvals_store::normalize_project_root(opts.workspace.string());
  view.home = opts.home.string();
  view.profile = opts.settings_profile.name;
  auto sources = settings_sources(opts.home, view.workspace, opts.settings_profile);
  view.documents.reserve(sources.size() + 1); // `layers` points into it
  for (auto& s : sources)
    view.documents.push_back(load_settings_file(s.path, s.scope, s.format));
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
  view.file_errors = view.errors.size();
  view.merged = assemble(layers, overlay);
  view.gating = gate(view.merged, opts, view.workspace, approvals, inputs);
  for (auto& [name, e] : variable_errors_of(view.gating, view.merged.servers, view.documents))
    view.errors.push_back(std::move(e));
  return view;
}

std::vector<std::pair<std::string, settings_error>>
variable_errors_of(const gating_result& g, const server_map& merged, const std::vector<settings_document>& docs) {
  std::vector<std::pair<std::string, settings_error>> out;
  for (auto& [name, adm] : g.servers) {
    if (!adm.problem || adm.problem->what == expansion_problem::kind::missing_input) continue;
    auto s = merged.find(name);
    if (s == merged.end()) continue;
    settings_error e;
    e.path = s->second.source;
    std::string key = "mcpServers";
    for (auto& d : docs)
      if (d.path == e.path && d.format == settings_format::vscode) key = "servers";
    config_error where{{key, name}, ""};
    e.message = where.path_string() + "." + adm.problem->message();
    out.emplace_back(name, std::move(e));
  }
  return out;
}

namespace {

using nlohmann::ordered_json;

ordered_json optional_list(const std::optional<std::vector<std::string>>& xs) {
  return xs ? ordered_json(*xs) : ordered_json(nullptr);
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

/// A settings file's path as a person recognises it: relative to the
/// workspace inside it, `~/...` inside the home directory, else absolute.
/// Escaped for the terminal.
std::string shown_file(const std::string& path, const workspace_view& v) {
  auto under = [&](const std::string& dir) {
    return !dir.empty() && path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0
           && path[dir.size()] == '/';
  };
  if (path.empty()) return "-";
  if (under(v.workspace)) return escape_for_display(path.substr(v.workspace.size() + 1));
  auto home = v.home;
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  if (under(home)) return "~/" + escape_for_display(path.substr(home.size() + 1));
  return escape_for_display(path);
}

/// Entries of a list from a settings file, escaped, comma-separated.
std::string shown_list(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + escape_for_display(x);
  return out.empty() ? "-" : out;
}

} // namespace

void read_definition_pins(workspace_view& v, definition_pin_store& store) {
  std::optional<pin_mode> user_mode, workspace_mode;
  for (auto& d : v.documents) {
    if (!d.pin_definitions) continue;
    if (d.scope == config_scope::user) user_mode = d.pin_definitions;
    else if (is_gated(d.scope)) workspace_mode = d.pin_definitions;
  }
  for (auto& [name, cfg] : v.merged.servers) {
    workspace_view::pin_view p;
    p.policy = pinning_for(cfg.scope, cfg.pin_definitions, user_mode, workspace_mode);
    if (p.policy.on)
      if (auto r = store.get(v.workspace, name); r && r->hash == approval_hash(cfg)) {
        if (auto t = r->pins.find(pins_key(definition_kind::tool)); t != r->pins.end()) {
          p.state = r->held_digest.empty() ? "pinned" : "held_back";
          p.tools = t->second.size();
          p.held_changes = r->held_changes;
        }
      }
    v.pins[name] = std::move(p);
  }
}

namespace {

// A stdio server's sandbox for explain: the policy as settings made it
// and, when the machine is known, what would be in force and what missing.
ordered_json sandbox_explained(const server_config& cfg, const std::optional<sandbox_support>& machine) {
  if (cfg.transport() != transport_kind::stdio) return nullptr;
  auto& sb = cfg.effective_sandbox;
  auto j = ordered_json::parse(sb.to_json().dump());
  if (sb.enabled && machine) {
    sandbox_plan p;
    p.network = sb.network;
    auto l = plan_launch(p, *machine);
    j["inForce"] = l.in_force;
    j["missing"] = l.missing;
  }
  return j;
}

} // namespace

ordered_json explain_json(const workspace_view& v, bool trusted, const std::optional<fingerprint_key>& key) {
  ordered_json out = ordered_json::object();
  out["workspace"] = v.workspace;
  out["profile"] = v.profile;
  out["trusted"] = trusted;
  out["files"] = ordered_json::array();
  for (auto& d : v.documents)
    out["files"].push_back({{"path", d.path},
                            {"scope", to_string(d.scope)},
                            {"format", to_string(d.format)},
                            {"exists", d.exists},
                            {"ok", d.ok()}});
  out["servers"] = ordered_json::array();
  for (auto& [name, cfg] : v.merged.servers) {
    ordered_json s = ordered_json::object();
    s["name"] = name;
    s["scope"] = to_string(cfg.scope);
    s["source"] = cfg.source.empty() ? ordered_json(nullptr) : ordered_json(cfg.source);
    s["transport"] = to_string(cfg.transport());
    auto x = v.gating.expanded.find(name);
    auto& runs = x != v.gating.expanded.end() ? x->second : cfg;
    s["fingerprint"] = key ? ordered_json(keyed_connection_id(connection_id(runs), *key)) : ordered_json(nullptr);
    auto adm = v.gating.servers.find(name);
    bool known = adm != v.gating.servers.end();
    s["problem"] = known && adm->second.problem ? ordered_json(adm->second.problem->message()) : ordered_json(nullptr);
    s["admitted"] = known && adm->second.admitted;
    s["reason"] = known && adm->second.reason ? ordered_json(to_string(*adm->second.reason)) : ordered_json(nullptr);
    s["approval"] =
      known && adm->second.approval ? ordered_json(to_string(*adm->second.approval)) : ordered_json(nullptr);
    auto oauth = v.oauth.find(name);
    s["oauth"] = oauth != v.oauth.end() ? ordered_json(oauth->second) : ordered_json(nullptr);
    if (auto p = v.pins.find(name); p != v.pins.end()) {
      ordered_json d = ordered_json::object();
      d["pinned"] = p->second.policy.on;
      d["why"] = p->second.policy.why;
      d["warning"] = p->second.policy.warning.empty() ? ordered_json(nullptr) : ordered_json(p->second.policy.warning);
      d["state"] = p->second.state;
      d["tools"] = p->second.tools;
      d["held_back"] = p->second.held_changes.empty() ? ordered_json(nullptr) : ordered_json(p->second.held_changes);
      s["definitions"] = std::move(d);
    }
    s["sandbox"] = sandbox_explained(cfg, v.sandbox);
    out["servers"].push_back(std::move(s));
  }
  ordered_json g = ordered_json::object();
  g["allowed"] = optional_list(v.gating.lists.allowed);
  g["excluded"] = v.gating.lists.excluded;
  g["pending"] = v.gating.lists.pending;
  g["promptable"] = v.gating.promptable;
  out["gating"] = std::move(g);
  // Tools are known only once servers list them (the daemon's snapshot,
  // gateway.sets, names them); here each set's servers, and why not others.
  out["tool_sets"] = ordered_json::array();
  for (auto& [name, set] : v.merged.tool_sets) {
    ordered_json t = ordered_json::object();
    t["name"] = name;
    t["path"] = "/mcp/" + name;
    t["description"] = set.description;
    t["source"] = set.source;
    t["scope"] = set.scope;
    t["servers_patterns"] = set.servers;
    t["tools_patterns"] = set.tools;
    t["exclude"] = set.exclude;
    t["servers"] = ordered_json::array();
    t["left_out"] = ordered_json::array();
    for (auto& [server, cfg] : v.merged.servers) {
      if (auto why = server_out_of_set(set, server)) {
        ordered_json l = {{"server", server}, {"reason", why->reason}};
        if (!why->detail.empty()) l["rule"] = why->detail;
        t["left_out"].push_back(std::move(l));
      } else {
        t["servers"].push_back(server);
      }
    }
    out["tool_sets"].push_back(std::move(t));
  }
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
    std::vector<std::string> shown, files;
    std::size_t w = 6, fw = 6;
    for (auto& [name, cfg] : v.merged.servers) {
      shown.push_back(escape_for_display(name));
      w = std::max(w, shown.back().size() + 2);
      files.push_back(shown_file(cfg.source, v));
      fw = std::max(fw, files.back().size() + 2);
    }
    os << pad("NAME", w) << pad("SCOPE", 11) << pad("TRANSPORT", 11) << pad("FILE", fw) << pad("STATE", 10)
       << "WHY\n";
    auto shown_name = shown.begin();
    auto shown_source = files.begin();
    for (auto& [name, config] : v.merged.servers) {
      auto adm = v.gating.servers.find(name);
      bool admitted = adm != v.gating.servers.end() && adm->second.admitted;
      std::string why;
      if (adm != v.gating.servers.end()) {
        if (adm->second.problem) // names the variable or input, which the remedy cannot
          why = to_string(*adm->second.reason) + ": " + adm->second.problem->message();
        else if (adm->second.reason)
          why = to_string(*adm->second.reason) + ": " + escape_for_display(remedy(*adm->second.reason, name));
        else if (adm->second.approval)
          why = "approved";
      }
      if (auto oauth = v.oauth.find(name); oauth != v.oauth.end() && oauth->second == "stored")
        why += std::string(why.empty() ? "" : "; ") + "OAuth tokens stored";
      else if (oauth != v.oauth.end() && oauth->second == "needs_auth")
        why += std::string(why.empty() ? "" : "; ") + "needs_auth: run `mcprt auth " + escape_for_display(name) + "`";
      if (auto p = v.pins.find(name); p != v.pins.end()) {
        auto& pin = p->second;
        auto add = [&why](const std::string& x) { why += (why.empty() ? "" : "; ") + x; };
        if (pin.state == "held_back")
          add("definitions changed since the approval, held back: " + escape_for_display(pin.held_changes)
              + " (run `mcprt approve " + escape_for_display(name) + "`)");
        else if (pin.state == "pinned")
          add("definitions pinned (" + std::to_string(pin.tools) + " tools)");
        else if (pin.policy.on && admitted)
          add("definitions pinned at the first listing");
        if (!pin.policy.warning.empty()) add(escape_for_display(pin.policy.warning));
      }
      if (config.transport() == transport_kind::stdio) {
        auto add = [&why](const std::string& x) { why += (why.empty() ? "" : "; ") + x; };
        auto sb = sandbox_explained(config, v.sandbox);
        if (!sb.value("enabled", false)) {
          add("no sandbox");
        } else {
          std::string line = sb.value("required", false) ? "sandbox required" : "sandboxed";
          if (sb.contains("missing") && !sb["missing"].empty()) {
            line += ", missing:";
            for (auto& m : sb["missing"])
              line += " " + escape_for_display(m.get<std::string>()) + ";";
            line.pop_back();
          }
          add(line);
        }
        for (auto& n : sb["notes"])
          add(escape_for_display(n.get<std::string>()));
      }
      os << pad(*shown_name++, w) << pad(to_string(config.scope), 11) << pad(to_string(config.transport()), 11)
         << pad(*shown_source++, fw) << pad(admitted ? "admitted" : "blocked", 10) << why << "\n";
    }
  }
  os << "\nallowed:    " << (v.gating.lists.allowed ? shown_list(*v.gating.lists.allowed) : "all") << "\n"
     << "excluded:   " << shown_list(v.gating.lists.excluded) << "\n"
     << "pending:    " << shown_list(v.gating.lists.pending) << "\n"
     << "promptable: " << shown_list(v.gating.promptable) << "\n";
  if (!v.merged.tool_sets.empty()) {
    os << "\ntool sets (gateway /mcp/<set>, mcprt gateway --set NAME; their tools: mcprt status --json, "
          "gateway.sets):\n";
    for (auto& [name, set] : v.merged.tool_sets) {
      std::vector<std::string> in, out;
      for (auto& [server, cfg] : v.merged.servers) {
        auto why = server_out_of_set(set, server);
        if (!why) in.push_back(server);
        else
          out.push_back(server + " (" + why->reason + (why->detail.empty() ? "" : ": " + why->detail) + ")");
      }
      os << "  " << escape_for_display(name) << "  [" << escape_for_display(set.scope) << "]\n"
         << "    servers:  " << shown_list(in) << "\n"
         << "    tools:    " << (set.tools.empty() ? std::string("all") : shown_list(set.tools)) << "\n"
         << "    exclude:  " << shown_list(set.exclude) << "\n"
         << "    left out: " << shown_list(out) << "\n";
    }
  }
  os << "\nfiles read (profile " << escape_for_display(v.profile) << "):\n";
  for (auto& d : v.documents)
    os << "  " << pad(to_string(d.scope), 11) << shown_file(d.path, v)
       << (!d.exists ? "  (not found)" : d.ok() ? "" : "  (error, see below)") << "\n";
  auto file_errors = std::min(v.file_errors, v.errors.size());
  if (file_errors > 0) {
    os << "\nsettings errors (these files are ignored until fixed):\n";
    // Messages are printable by contract (settings_error); paths are not.
    for (std::size_t i = 0; i < file_errors; ++i) {
      auto& e = v.errors[i];
      os << "  " << escape_for_display(e.path) << ":" << e.line << ":" << e.column << ": " << e.message << "\n";
    }
  }
  if (file_errors < v.errors.size()) {
    os << "\nvariables (these servers do not start until fixed):\n";
    for (std::size_t i = file_errors; i < v.errors.size(); ++i)
      os << "  " << shown_file(v.errors[i].path, v) << ": " << v.errors[i].message << "\n";
  }
}

} // namespace mcprt
