#pragma once

// Messages and interfaces of the workspace actors: the budget actor. The
// pool's contract is messages/pool.hpp, the event bus's messages/event_bus.hpp.
// A type-id block (with the pool's types), chained after the event bus's.

#include <cstdint>
#include <string>
#include <vector>

#include "core/server_config.hpp"
#include "messages/events.hpp"
#include "messages/messages.hpp"
#include "messages/pool.hpp"

namespace mcprt {

// -- budget ------------------------------------------------------------------------

/// What the budget actor answers a reserve with (mirrors core's
/// reserve_result; kept apart so core stays free of CAF).
enum class reserve_reply : uint8_t { reserved, already_held, refused };

std::string to_string(reserve_reply r);

/// One budget cell of the snapshot.
struct budget_snapshot {
  std::string scope;       // "workspace" | "session"
  bool limited = false;    // false: no budget (unlimited)
  uint64_t budget = 0;
  std::string mode;        // off | warn | enforce
  std::vector<std::string> reserved;
  uint64_t reserved_count = 0;
  uint64_t live_count = 0;
  std::vector<std::string> refused;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, budget_snapshot& x) {
  return f(caf::meta::type_name("mcprt.budget_snapshot"), x.scope, x.limited, x.budget, x.mode,
           x.reserved, x.reserved_count, x.live_count, x.refused);
}

} // namespace mcprt

// -- atoms ----------------------------------------------------------------------------

CAF_ADD_ATOM(mcprt, mcprt::atom, reserve, "reserve")
CAF_ADD_ATOM(mcprt, mcprt::atom, release, "release")
CAF_ADD_ATOM(mcprt, mcprt::atom, begin_pass, "begin_pass")
CAF_ADD_ATOM(mcprt, mcprt::atom, end_pass, "end_pass")
CAF_ADD_ATOM(mcprt, mcprt::atom, refused, "refused")
CAF_ADD_ATOM(mcprt, mcprt::atom, clear_refusal, "clear_ref")
CAF_ADD_ATOM(mcprt, mcprt::atom, restart, "restart")
CAF_ADD_ATOM(mcprt, mcprt::atom, live_count, "live_count")
CAF_ADD_ATOM(mcprt, mcprt::atom, detach, "detach")
// The fleet budget (messages/fleet.hpp).
CAF_ADD_ATOM(mcprt, mcprt::atom, renew, "renew")
CAF_ADD_ATOM(mcprt, mcprt::atom, fleet_free, "fleet_free")

namespace mcprt {

/// Told when a slot goes back to the budget while it has refusals on
/// record, so that sessions retry what was refused for lack of room.
struct budget_slot_freed {
  std::string name; // the server whose slot went back
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, budget_slot_freed& x) {
  return f(caf::meta::type_name("mcprt.budget_slot_freed"), x.name);
}

using budget_listener_actor = caf::typed_actor<caf::reacts_to<budget_slot_freed>>;

/// The BUDGET actor interface: slots by server name, for the workspace or
/// one session (actors/budget.hpp). Every
/// answer is computed in one handler, so concurrent reserves cannot
/// overshoot.
using budget_actor = caf::typed_actor<
  caf::replies_to<atom::reserve, std::string>::with<reserve_reply>,
  // reserve(name, transport): a reserve whose outcome also settles the
  // name's refusal record in the same handler: a refusal is recorded (with
  // the transport), a reservation clears an earlier refusal. What a pool or
  // session does after every reserve, without two more messages.
  caf::replies_to<atom::reserve, std::string, std::string>::with<reserve_reply>,
  caf::replies_to<atom::release, std::string>::with<bool>,
  // begin_bulk_pass(preserve_refusals)
  caf::reacts_to<atom::begin_pass, bool>,
  caf::reacts_to<atom::end_pass>,
  // record_refusal(name, transport)
  caf::reacts_to<atom::refused, std::string, std::string>,
  caf::reacts_to<atom::clear_refusal, std::string>,
  // The connected count reported as live_count (session budgets only).
  caf::reacts_to<atom::live_count, uint64_t>,
  // Listeners are told of every freed slot while refusals are on record;
  // they are monitored and dropped when they die.
  caf::reacts_to<atom::subscribe, budget_listener_actor>,
  // From the fleet link (--fleet-budget): a slot went back to the fleet, or
  // the fleet is reachable again; listeners are told when refusals wait.
  caf::reacts_to<atom::fleet_free>,
  caf::replies_to<atom::snapshot>::with<budget_snapshot>>;

/// Registers the workspace type ids (call after add_mcprt_types).
void add_workspace_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_workspace, caf::id_block::mcprt_event_bus::end)
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::server_config))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::reserve_reply))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_snapshot))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_slot_freed))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_listener_actor))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_acquire))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_attach))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::release_reason))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_detach))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_restart))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_lookup))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_timer_kind))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_timer))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_event))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_changed))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_holder_actor))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_handle))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_status))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_entry_info))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_snapshot))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::budget_actor))
  CAF_ADD_TYPE_ID(mcprt_workspace, (mcprt::pool_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_workspace)
