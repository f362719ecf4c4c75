#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "core/budget_ledger.hpp"
#include "messages/workspace.hpp"

namespace mcprt {

/// Spawns a budget actor, which holds the workspace's (or one session's)
/// server slots, keyed by server name: a thin shell around
/// core/budget_ledger. Each handler is one ledger call; the events the
/// ledger returns are published on `bus` as `event_kind::budget_warning` /
/// `event_kind::child_refused_batch` (JSON payloads below). An invalid `bus`
/// means the events are dropped.
///
/// Every answer is computed inside one message handler, so concurrent
/// reserves from many clients can never overshoot the budget.
///
/// `scope` is "workspace" or "session"; it is carried in every event and the
/// snapshot. `live_count(n)` sets the live count the events and the snapshot
/// report (session budgets report their connected count; a workspace budget
/// that never receives it reports the reserved count).
///
/// Payloads:
///   budget_warning:      {"scope", "budget", "mode", "reserved_count",
///                         "live_count", "threshold_ratio": 0.75}
///   child_refused_batch: {"scope", "budget", "mode", "reserved_count",
///                         "live_count", "refused": [{"name", "transport",
///                         "reason": "budget_exhausted"}]}
budget_actor spawn_budget(caf::actor_system& sys, std::optional<std::size_t> budget,
                          budget_mode mode, std::string scope, event_bus_actor bus);

/// The bus payload of a ledger event (exposed for tests and the SSE bridge).
event_kind budget_event_kind(const budget_event& ev);
nlohmann::json budget_event_json(const budget_event& ev);

} // namespace mcprt
