#include "core/workspace_gating.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include "core/fingerprint.hpp"

namespace mcprt {

namespace {

bool same_sandbox_for(const std::map<std::string, sandbox_spec>& a, const std::map<std::string, sandbox_spec>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), k = b.begin(); i != a.end(); ++i, ++k)
    if (i->first != k->first || i->second.mode != k->second.mode || i->second.read != k->second.read
        || i->second.write != k->second.write || i->second.network != k->second.network)
      return false;
  return true;
}

} // namespace

workspace_gating::workspace_gating(workspace_options opts, approvals_store& approvals, input_store* inputs)
  : opts_(std::move(opts)), approvals_(&approvals), inputs_(inputs) {
  project_root_ = approvals_store::normalize_project_root(opts_.workspace.string());
  if (opts_.mcp_config) {
    auto top = load_settings_file(*opts_.mcp_config, config_scope::session);
    if (top.ok() && !top.exists)
      top.error = settings_error{opts_.mcp_config->string(), 0, 0, "file not found"};
    if (top.error) top_errors_.push_back(*top.error);
    top_tier_ = std::move(top.servers);
  }
  merged_ = assemble({}, top_tier_);
  gating_ = compute(merged_);
  removals_.update(merged_.servers);
  update_versions({}, {});
}

gating_result workspace_gating::compute(const assembled_settings& merged) const {
  return gate(merged, opts_, project_root_, *approvals_, inputs_);
}

namespace {

/// What a session would run, and how: admission, reason, and the expanded
/// config's connection id.
std::map<std::string, std::string> admission_key(const gating_result& g) {
  std::map<std::string, std::string> out;
  for (auto& [name, adm] : g.servers) {
    std::string k = adm.admitted ? "+" : "-";
    if (adm.reason) k += to_string(*adm.reason);
    if (auto x = g.expanded.find(name); x != g.expanded.end()) k += connection_id(x->second);
    out.emplace(name, std::move(k));
  }
  return out;
}

} // namespace

bool workspace_gating::set_documents(std::vector<settings_document> docs) {
  docs_ = std::move(docs);
  return recompute();
}

bool workspace_gating::set_contents(std::vector<settings_content> files) {
  // Same layers in the same order, each with the same lists and no error:
  // then only the servers whose entries changed need merging again.
  bool same_layers = files.size() == docs_.size();
  std::vector<std::string> touched;
  std::vector<settings_document> docs;
  docs.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto& f = files[i];
    settings_document* previous = nullptr;
    for (auto& d : docs_)
      if (d.path == f.path && d.scope == f.scope) previous = &d;
    same_layers = same_layers && previous == &docs_[i] && f.exists == previous->exists;
    if (!f.exists || !previous) {
      docs.push_back(document_from_json(std::move(f.path), f.scope, f.exists, std::move(f.content), nullptr,
                                        f.format));
      continue;
    }
    if (f.content.is_null()) f.content = nlohmann::json::object();
    auto doc = take_settings_value(std::move(f.path), f.scope, std::move(f.content), *previous, touched, f.format);
    same_layers = same_layers && doc.ok() && previous->ok() && doc.format == previous->format
                  && doc.allowed == previous->allowed && doc.excluded == previous->excluded
                  && doc.default_sandbox == previous->default_sandbox
                  && same_sandbox_for(doc.sandbox_for, previous->sandbox_for);
    // What was not taken over was edited or removed.
    for (auto& [name, cfg] : previous->servers)
      touched.push_back(name);
    docs.push_back(std::move(doc));
  }
  // The replaced documents hold the old content and every entry that was
  // not taken over; freeing 10,000 entries costs milliseconds the sessions
  // need not wait for.
  retired_ = std::move(docs_);
  docs_ = std::move(docs);
  if (same_layers) {
    // Tool sets gate nothing and are few: merged again whatever changed.
    merged_.tool_sets.clear();
    for (auto& d : docs_)
      for (auto& [name, set] : d.tool_sets)
        merged_.tool_sets.insert_or_assign(name, set);
    if (auto changed = recompute_touched(touched)) return *changed;
  }
  return recompute();
}

std::optional<bool> workspace_gating::recompute_touched(std::vector<std::string> touched) {
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  // The config that wins for a name: the top tier, else the highest layer.
  auto winner = [this](const std::string& name) -> const server_config* {
    if (auto t = top_tier_.find(name); t != top_tier_.end()) return &t->second;
    for (auto d = docs_.rbegin(); d != docs_.rend(); ++d)
      if (auto s = d->servers.find(name); s != d->servers.end()) return &s->second;
    return nullptr;
  };
  std::vector<const settings_document*> layers;
  for (auto& d : docs_)
    layers.push_back(&d);
  auto sandbox = sandbox_settings_of(layers);
  // A layer's own entry, with what the settings around it make of its
  // sandbox: what assemble would have merged.
  std::vector<std::unique_ptr<server_config>> effective;
  std::vector<std::pair<std::string, const server_config*>> moved;
  bool names_change = false;
  for (auto& name : touched) {
    auto* now = winner(name);
    if (now) {
      effective.push_back(std::make_unique<server_config>(*now));
      apply_sandbox(*effective.back(), sandbox);
      now = effective.back().get();
    }
    auto before = merged_.servers.find(name);
    bool was = before != merged_.servers.end();
    if (!now && !was) continue;
    if (now && was && servers_equal(*now, before->second)) continue;
    names_change = names_change || !now || !was;
    moved.emplace_back(name, now);
  }
  if (moved.empty()) return false;
  // Each server gated again moves the sorted pending list: past a quarter
  // of the servers, gating them all at once costs less.
  if (moved.size() > 64 && moved.size() * 4 > merged_.servers.size()) return std::nullopt;
  // An allow-list intersected with another (across scopes, or with the
  // launch bound) depends on which names exist: gate everything again.
  std::size_t allow_lists = opts_.launch_bound ? 1 : 0;
  for (auto& d : docs_)
    allow_lists += d.allowed ? 1 : 0;
  if (names_change && allow_lists > 1) return std::nullopt;

  auto variables = variables_of(opts_, project_root_, inputs_);
  auto in = gating_input_of(merged_, opts_, project_root_, *approvals_, variables);
  for (auto& [name, now] : moved) {
    const server_config* merged = nullptr;
    if (now) merged = &merged_.servers.insert_or_assign(name, *now).first->second;
    else merged_.servers.erase(name);
    regate_server(gating_, name, merged, in);
    removals_.update_one(name, now != nullptr);
    bump(name);
  }
  return true;
}

bool workspace_gating::recompute() {
  std::vector<const settings_document*> layers;
  for (auto& d : docs_)
    layers.push_back(&d);
  auto merged = assemble(layers, top_tier_);
  auto gating = compute(merged);
  bool changed = !servers_equal(merged.servers, merged_.servers) || !gating_equal(gating.lists, gating_.lists);
  std::swap(merged_, merged);
  std::swap(gating_, gating);
  removals_.update(merged_.servers);
  update_versions(merged.servers, gating);
  return changed;
}

bool workspace_gating::refresh() {
  auto gating = compute(merged_);
  bool changed = !gating_equal(gating.lists, gating_.lists) || admission_key(gating) != admission_key(gating_);
  std::swap(gating_, gating);
  update_versions(merged_.servers, gating);
  return changed;
}

void workspace_gating::update_versions(const server_map& old_merged, const gating_result& old_gating) {
  auto admission = [](const gating_result& g, const std::string& name) -> std::pair<bool, int> {
    auto i = g.servers.find(name);
    if (i == g.servers.end()) return {false, -1};
    return {i->second.admitted, i->second.reason ? static_cast<int>(*i->second.reason) : -1};
  };
  auto expanded = [](const gating_result& g, const std::string& name) -> const server_config* {
    auto i = g.expanded.find(name);
    return i == g.expanded.end() ? nullptr : &i->second;
  };
  for (auto& [name, cfg] : old_merged)
    if (!merged_.servers.count(name)) bump(name);
  for (auto& [name, cfg] : merged_.servers) {
    auto old = old_merged.find(name);
    bool moved = old == old_merged.end() || !servers_equal(old->second, cfg)
                 || admission(old_gating, name) != admission(gating_, name);
    if (!moved) {
      auto a = expanded(old_gating, name), b = expanded(gating_, name);
      moved = (a == nullptr) != (b == nullptr) || (a && !servers_equal(*a, *b));
    }
    if (moved) bump(name);
  }
}

void workspace_gating::bump(const std::string& name) {
  auto [last, first] = last_change_.try_emplace(name, 0);
  if (!first) changes_.erase(last->second);
  last->second = ++next_version_;
  changes_.emplace(next_version_, name);
}

const server_config* workspace_gating::admitted_config(const std::string& name) const {
  auto a = gating_.servers.find(name);
  if (a == gating_.servers.end() || !a->second.admitted) return nullptr;
  if (auto x = gating_.expanded.find(name); x != gating_.expanded.end()) return &x->second;
  auto m = merged_.servers.find(name);
  return m == merged_.servers.end() ? nullptr : &m->second;
}

session_admission workspace_gating::admit(const server_map& session_servers, bool with_configs) const {
  session_admission out;
  out.trusted = opts_.trusted;
  const assembled_settings* merged = &merged_;
  const gating_result* g = &gating_;
  assembled_settings with_session;
  gating_result session_gating;
  if (!session_servers.empty()) {
    with_session = merged_;
    for (auto& [name, cfg] : session_servers) {
      // A gated session server (a remote host's) is one more server of the
      // project: the settings' own server of that name wins.
      if (is_gated(cfg.scope)) with_session.servers.try_emplace(name, cfg);
      else with_session.servers.insert_or_assign(name, cfg);
    }
    session_gating = compute(with_session);
    merged = &with_session;
    g = &session_gating;
  }
  if (with_configs) out.admitted = g->admitted(merged->servers);
  out.promptable = g->promptable;
  out.lists = g->lists;
  for (auto& [name, adm] : g->servers)
    if (!adm.admitted && adm.reason) out.unavailable.push_back({name, *adm.reason});
  for (auto& name : removals_.removed())
    if (!merged->servers.count(name)) out.unavailable.push_back({name, unavailable_reason::removed});
  std::sort(out.unavailable.begin(), out.unavailable.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::optional<unavailable_reason> workspace_gating::reason(const std::string& name) const {
  return unavailable_reason_for(gating_, removals_, name);
}

std::vector<std::pair<std::string, settings_error>> workspace_gating::variable_errors() const {
  return variable_errors_of(gating_, merged_.servers, docs_);
}

settings_document document_from_json(std::string path, config_scope scope, bool exists,
                                     nlohmann::json content, const settings_document* previous,
                                     std::optional<settings_format> format) {
  if (!exists) {
    settings_document d;
    d.path = std::move(path);
    d.scope = scope;
    d.format = format.value_or(default_format(scope));
    return d;
  }
  if (content.is_null()) content = nlohmann::json::object();
  return parse_settings_value(std::move(path), scope, std::move(content), previous, format);
}

} // namespace mcprt
