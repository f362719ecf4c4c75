#pragma once

// The workspace snapshot (`GET /workspace/mcp`, runtime::snapshot) as one
// typed value with one to_json, as the events are. The runtime gathers its
// parts from the actors (gating, the first session, the pool, the budgets,
// the fleet link) and `assemble` puts them together. Secrets never appear
// in it: connection ids are shown keyed (`show_id`), and nothing of a
// server's env or headers is a field.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/fleet.hpp"
#include "messages/hot_reload.hpp"
#include "messages/pool.hpp"

namespace mcprt {

struct workspace_snapshot {
  std::string version;
  std::string workspace;
  bool trusted = true;
  std::vector<std::string> capabilities;

  struct reconcile_view {
    uint64_t generation = 0;
    bool in_progress = false;
    std::string last_error;
  } reconcile;

  struct server_row {
    std::string name, scope, transport;
    std::string fingerprint; // shown (keyed)
    std::string status;
    std::optional<int32_t> pid;
    uint32_t tools = 0;
    uint32_t prompts = 0;
    std::string last_error;
    uint64_t restarts = 0;
    std::string reason;
    std::string approval;
    std::string sandbox; // JSON object text; "" for none
  };
  std::vector<server_row> servers; // by name

  struct pool_row {
    std::string id; // shown (keyed)
    std::string name;
    uint64_t refs = 0;
    std::string status;
    std::optional<int32_t> pid;
    uint64_t restarts = 0;
  };
  struct pool_view {
    std::vector<pool_row> entries;
    uint64_t subprocess_count = 0;
  };
  std::optional<pool_view> pool; // none without the pool

  std::vector<budget_snapshot> budgets; // the workspace's first, then the sessions'
  std::optional<fleet_status> fleet;
  std::vector<std::string> errors; // settings files failing to parse
};

/// What the runtime gathered; each part may be missing (its actor did not
/// answer in time, or does not exist in this mode).
struct snapshot_parts {
  std::string version;
  std::string workspace;
  bool trusted = true;
  std::vector<std::string> capabilities;
  std::optional<gating_snapshot> gating;
  std::optional<session_snapshot> session; // the first open session's
  std::optional<pool_snapshot> pool;
  std::vector<budget_snapshot> budgets;
  std::optional<fleet_status> fleet;
};

workspace_snapshot assemble(snapshot_parts parts, const std::function<std::string(const std::string&)>& show_id);

/// The snapshot's JSON ("v": 1); text that came from servers or settings
/// files is made valid UTF-8.
void to_json(nlohmann::json& j, const workspace_snapshot& x);

} // namespace mcprt
