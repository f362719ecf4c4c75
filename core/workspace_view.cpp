#include "core/workspace_view.hpp"

#include "core/fingerprint.hpp"

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

} // namespace mcprt
