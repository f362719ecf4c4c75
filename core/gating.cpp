#include "core/gating.hpp"

#include <algorithm>

#include "core/patterns.hpp"

namespace mcprt {

std::string to_string(unavailable_reason r) {
  switch (r) {
    case unavailable_reason::disabled: return "disabled";
    case unavailable_reason::not_allowed: return "not_allowed";
    case unavailable_reason::excluded: return "excluded";
    case unavailable_reason::pending_approval: return "pending_approval";
    case unavailable_reason::rejected: return "rejected";
    case unavailable_reason::untrusted: return "untrusted";
    case unavailable_reason::removed: return "removed";
    case unavailable_reason::needs_input: return "needs_input";
    case unavailable_reason::variable_error: return "variable_error";
  }
  return "unknown";
}

std::string remedy(unavailable_reason r, const std::string& server) {
  switch (r) {
    case unavailable_reason::disabled:
      return "it is disabled in its settings (\"disabled\": true); remove that to enable it";
    case unavailable_reason::not_allowed:
      return "it is not in the allow-list (mcp.allowed or --allowed-mcp-server-names); add it there";
    case unavailable_reason::excluded:
      return "it matches mcp.excluded; remove it from that list";
    case unavailable_reason::pending_approval:
      return "pending approval — run `mcprt approve " + server + "`";
    case unavailable_reason::rejected:
      return "it was rejected — run `mcprt approve " + server
             + "` to allow it, or change its config to be asked again";
    case unavailable_reason::untrusted:
      return "the workspace folder is not trusted; no MCP server starts there";
    case unavailable_reason::removed:
      return "it was removed from the settings during this session; add it back to use it";
    case unavailable_reason::needs_input:
      return "it uses an ${input:ID} with no stored value — run `mcprt input set ID` for it (`mcprt explain` "
             "names the input)";
    case unavailable_reason::variable_error:
      return "a variable it uses cannot be expanded — set it in mcprt's environment or give it a default "
             "(${VAR:-default}), then restart mcprt (`mcprt explain` names the variable)";
  }
  return {};
}

namespace {

std::vector<std::string> sorted_unique(std::vector<std::string> xs) {
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  return xs;
}

} // namespace

bool gating_equal(const gating_lists& a, const gating_lists& b) {
  if (a.allowed.has_value() != b.allowed.has_value()) return false;
  if (a.allowed && sorted_unique(*a.allowed) != sorted_unique(*b.allowed)) return false;
  return sorted_unique(a.excluded) == sorted_unique(b.excluded)
         && sorted_unique(a.pending) == sorted_unique(b.pending);
}

std::optional<std::vector<std::string>>
effective_allowed(const std::optional<std::vector<std::string>>& settings,
                  const std::optional<std::vector<std::string>>& bound,
                  const std::vector<std::string>& names) {
  if (!bound) return settings;
  if (!settings) return sorted_unique(*bound);
  return intersect_allow_lists(*settings, *bound, names);
}

namespace {

/// One server's admission under `out.lists`, appended to `out` (its names
/// in pending and promptable follow the order of the calls).
void gate_server(const std::string& name, const server_config& cfg, const gating_input& in, gating_result& out) {
  server_admission adm;
  if (is_gated(cfg.scope)) {
    adm.approval = in.approval ? in.approval(cfg) : approval_state::pending;
    if (*adm.approval != approval_state::approved) out.lists.pending.push_back(name);
    if (*adm.approval == approval_state::pending) out.promptable.push_back(name);
  }
  // First matching gate names the reason; the order puts the broadest
  // gate first so the remedy addresses the real obstacle.
  if (!in.trusted) adm.reason = unavailable_reason::untrusted;
  else if (cfg.disabled) adm.reason = unavailable_reason::disabled;
  else if (out.lists.allowed && !matches_any(*out.lists.allowed, name))
    adm.reason = unavailable_reason::not_allowed;
  else if (matches_any(out.lists.excluded, name)) adm.reason = unavailable_reason::excluded;
  else if (adm.approval == approval_state::pending)
    adm.reason = unavailable_reason::pending_approval;
  else if (adm.approval == approval_state::rejected) adm.reason = unavailable_reason::rejected;
  if (!adm.reason && in.variables) {
    // Only what may run is expanded: a server waiting for approval names
    // no variable it would read.
    auto x = expand_server(cfg, *in.variables);
    if (x.problem) {
      adm.reason = x.needs_input() ? unavailable_reason::needs_input : unavailable_reason::variable_error;
      adm.problem = std::move(x.problem);
    } else if (x.config) {
      out.expanded.emplace(name, std::move(*x.config));
    }
  }
  adm.admitted = !adm.reason;
  out.servers.emplace(name, adm);
}

/// Removes `name` from a sorted list, or inserts it in order.
void set_listed(std::vector<std::string>& sorted, const std::string& name, bool listed) {
  auto i = std::lower_bound(sorted.begin(), sorted.end(), name);
  bool there = i != sorted.end() && *i == name;
  if (listed && !there) sorted.insert(i, name);
  if (!listed && there) sorted.erase(i);
}

} // namespace

gating_result compute_gating(const gating_input& in) {
  gating_result out;
  static const server_map empty;
  const server_map& servers = in.servers ? *in.servers : empty;
  std::vector<std::string> names;
  for (auto& [name, cfg] : servers)
    names.push_back(name);
  out.lists.allowed = effective_allowed(in.settings_allowed, in.launch_bound, names);
  out.lists.excluded = sorted_unique(in.settings_excluded);
  for (auto& [name, cfg] : servers)
    gate_server(name, cfg, in, out);
  return out;
}

void regate_server(gating_result& g, const std::string& name, const server_config* cfg, const gating_input& in) {
  g.servers.erase(name);
  g.expanded.erase(name);
  gating_result one;
  one.lists.allowed = g.lists.allowed;
  one.lists.excluded = g.lists.excluded;
  if (cfg) gate_server(name, *cfg, in, one);
  set_listed(g.lists.pending, name, !one.lists.pending.empty());
  set_listed(g.promptable, name, !one.promptable.empty());
  g.servers.merge(one.servers);
  g.expanded.merge(one.expanded);
}

server_expansion expand_server(const server_config& cfg, const variable_context& ctx) {
  server_expansion out;
  if (!spec_has_variables(cfg.spec)) return out; // the common case: nothing copied
  std::vector<std::pair<std::string, std::string>> secrets;
  auto recording = ctx;
  recording.substitutions = &secrets;
  auto x = expand_server_spec(cfg.spec, recording);
  if (x.problem) {
    out.problem = std::move(x.problem);
    return out;
  }
  if (x.spec == cfg.spec) return out; // nothing to expand: the config runs as written
  auto parsed = parse_server_config(cfg.name, x.spec, cfg.scope);
  if (parsed.error) {
    // A value that arrived through a variable broke a rule the file obeys
    // (a line break in a header, a NUL): said without the value.
    expansion_problem p;
    p.what = expansion_problem::kind::invalid_value;
    p.key_path = parsed.error->path_string();
    p.detail = parsed.error->message;
    out.problem = std::move(p);
    return out;
  }
  out.config = std::move(parsed.config);
  out.config->source = cfg.source;
  // Longest first, so that a value inside another is not replaced in it.
  // Values of under 4 bytes are no secret anyone could use, and replacing
  // them would garble every message ("HTTP 40${N}").
  secrets.erase(std::remove_if(secrets.begin(), secrets.end(), [](const auto& s) { return s.first.size() < 4; }),
                secrets.end());
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) {
    return a.first.size() != b.first.size() ? a.first.size() > b.first.size() : a < b;
  });
  secrets.erase(std::unique(secrets.begin(), secrets.end()), secrets.end());
  out.config->secrets = std::move(secrets);
  return out;
}

server_map gating_result::admitted(const server_map& all) const {
  server_map out;
  for (auto& [name, cfg] : all) {
    auto i = servers.find(name);
    if (i == servers.end() || !i->second.admitted) continue;
    auto x = expanded.find(name);
    out.emplace(name, x != expanded.end() ? x->second : cfg);
  }
  return out;
}

void removal_tracker::update_one(const std::string& name, bool configured) {
  if (configured) {
    current_.insert(name);
    removed_.erase(name);
  } else if (current_.erase(name)) {
    removed_.insert(name);
  }
}

void removal_tracker::update(const server_map& merged) {
  for (auto& name : current_)
    if (!merged.count(name)) removed_.insert(name);
  current_.clear();
  for (auto& [name, cfg] : merged) {
    current_.insert(name);
    removed_.erase(name); // re-added: heals
  }
}

std::optional<unavailable_reason> unavailable_reason_for(const gating_result& g,
                                                         const removal_tracker& removals,
                                                         const std::string& name) {
  auto i = g.servers.find(name);
  if (i == g.servers.end())
    return removals.was_removed(name) ? std::optional{unavailable_reason::removed} : std::nullopt;
  return i->second.reason;
}

} // namespace mcprt
