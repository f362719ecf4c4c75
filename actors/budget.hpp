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
/// ledger returns are published on `bus` as `events::budget_warning` /
/// `events::child_refused_batch` (messages/events.hpp; JSON payloads below).
/// An invalid `bus` means the events are dropped.
///
/// Every answer is computed inside one message handler, so concurrent
/// reserves from many clients can never overshoot the budget.
///
/// Listeners subscribed with `(subscribe, listener)` get
/// `budget_slot_freed{name}` whenever a release frees a slot while the
/// ledger has refusals on record (pending, or in the last batches and not
/// cleared), so that sessions retry what was refused for lack of room.
/// Listeners are monitored and dropped when they die.
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

} // namespace mcprt
