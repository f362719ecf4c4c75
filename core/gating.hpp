#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/approvals_store.hpp"
#include "core/server_config.hpp"
#include "core/variables.hpp"

namespace mcprt {

/// Why a configured server is not connected.
enum class unavailable_reason {
  disabled,
  not_allowed,
  excluded,
  pending_approval,
  rejected,
  untrusted,
  removed,
  /// Admitted, but an `${input:ID}` it uses has no stored value.
  needs_input,
  /// Admitted, but a variable it uses cannot be expanded (not set and no
  /// default, unsupported, or its value is not valid where it goes).
  variable_error,
};

std::string to_string(unavailable_reason r);

/// What the user can do about it, phrased for a person at a terminal.
std::string remedy(unavailable_reason r, const std::string& server);

/// The three lists that decide admission, as pushed to the reconciler.
struct gating_lists {
  std::optional<std::vector<std::string>> allowed; // nullopt: allow all; []: deny all
  std::vector<std::string> excluded;
  std::vector<std::string> pending; // gated servers not approved (pending or rejected)
};

/// Compared as sets. For `excluded` and `pending` absent ≡ empty; for
/// `allowed` absent (allow all) differs from [] (deny all).
bool gating_equal(const gating_lists& a, const gating_lists& b);

/// Combines the settings allow-list with the launch bound
/// (--allowed-mcp-server-names), which settings may narrow but never widen:
/// both → their intersection, bound only → the bound, neither → nullopt.
/// Patterns on either side are honoured (see intersect_allow_lists); `names`
/// are the configured servers, so two overlapping globs admit what both match.
std::optional<std::vector<std::string>>
effective_allowed(const std::optional<std::vector<std::string>>& settings_allowed,
                  const std::optional<std::vector<std::string>>& launch_bound,
                  const std::vector<std::string>& names = {});

struct gating_input {
  const server_map* servers = nullptr; // merged, before any filtering
  std::optional<std::vector<std::string>> settings_allowed;
  std::vector<std::string> settings_excluded;
  std::optional<std::vector<std::string>> launch_bound;
  bool trusted = true;
  /// Decision for a gated server's current config (hash-bound).
  std::function<approval_state(const server_config&)> approval;
  /// Expands `${...}` in the servers that pass every other gate; without
  /// it, values are taken as written.
  const variable_context* variables = nullptr;
};

struct server_admission {
  bool admitted = false;
  std::optional<unavailable_reason> reason;
  std::optional<approval_state> approval; // gated servers only
  /// needs_input / variable_error: which variable, where (never a value).
  std::optional<expansion_problem> problem;
};

struct gating_result {
  gating_lists lists;
  std::vector<std::string> promptable; // gated servers strictly pending
  std::map<std::string, server_admission> servers;
  /// Admitted servers whose config uses variables, as they run: expanded,
  /// re-validated, with their own connection id. Their values are secrets
  /// like `env`; the approval hash is over the config as written.
  server_map expanded;

  /// The servers that may connect now, expanded.
  server_map admitted(const server_map& all) const;
};

/// `cfg` with its variables expanded and validated again, or the problem.
struct server_expansion {
  std::optional<server_config> config;
  std::optional<expansion_problem> problem;
  bool needs_input() const { return problem && problem->what == expansion_problem::kind::missing_input; }
};
server_expansion expand_server(const server_config& cfg, const variable_context& ctx);

/// Gates `name` again in `g`, under `g`'s lists: what compute_gating gives
/// for it when the lists do not depend on which servers exist. A null `cfg`
/// takes the server out. For an edit that touched a few servers of many.
void regate_server(gating_result& g, const std::string& name, const server_config* cfg, const gating_input& in);

gating_result compute_gating(const gating_input& in);

/// Remembers which servers this process has seen configured, so that a
/// server that left the config reads `removed` rather than "never heard of".
class removal_tracker {
 public:
  /// Feed the merged map (before allow-list filtering) after every load.
  void update(const server_map& merged);
  /// The same for one server that came (`configured`) or went.
  void update_one(const std::string& name, bool configured);
  bool was_removed(const std::string& name) const { return removed_.count(name) > 0; }
  const std::set<std::string>& removed() const { return removed_; }

 private:
  std::set<std::string> current_;
  std::set<std::string> removed_;
};

/// The reason a tool call to `name` cannot be served: `removed` for a server
/// that left the config, nullopt for an admitted or never-configured one.
std::optional<unavailable_reason> unavailable_reason_for(const gating_result& g,
                                                         const removal_tracker& removals,
                                                         const std::string& name);

} // namespace mcprt
