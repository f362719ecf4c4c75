#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "core/budget_ledger.hpp"
#include "messages/fleet.hpp"
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
///
/// With a `fleet` link (`--fleet-budget`) a reserve that the
/// workspace budget grants also asks the fleet before it answers; a fleet
/// refusal undoes the local reservation and is recorded as a refusal with
/// the fleet's reason (`budget_exhausted`, `fleet_recovering` or
/// `fleet_unreachable`). Reserves of one name in flight share one answer:
/// the first gets `reserved`, the others `already_held`. The end of a bulk
/// pass waits for the fleet's answers, so a pass's refusals still arrive as
/// one batch.
budget_actor spawn_budget(caf::actor_system& sys, std::optional<std::size_t> budget,
                          budget_mode mode, std::string scope, event_bus_actor bus,
                          fleet_link_actor fleet = {});

} // namespace mcprt
