#pragma once

// The fleet budget: one budget server holds the server slots of
// many workspace nodes, over CAF's middleman. Its messages and the two
// interfaces: the budget server's (actors/fleet_budget.hpp) and the node's
// link to it (actors/fleet_link.hpp). A type-id block of its own, chained
// after the session types; both ends register it (add_fleet_types).

#include <cstdint>
#include <string>
#include <vector>

#include "messages/hot_reload.hpp"
#include "messages/workspace.hpp"

namespace mcprt {

/// The budget server's answer to a node's reserve.
enum class fleet_grant : uint8_t {
  reserved,
  already_held,
  /// The fleet is full (enforce).
  refused,
  /// The budget server has just started and waits for the nodes to claim
  /// what they already run before it grants anything new.
  recovering,
  /// Only from the node's link: the budget server cannot be reached.
  unreachable,
};

std::string to_string(fleet_grant g);

/// What the budget server tells a node with every renewal.
struct fleet_info {
  bool limited = false;
  uint64_t budget = 0;
  std::string mode;            // off | warn | enforce
  uint64_t reserved_count = 0; // slots held across the fleet
  uint64_t nodes = 0;          // nodes holding a lease
  uint64_t lease_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fleet_info& x) {
  return f(caf::meta::type_name("mcprt.fleet_info"), x.limited, x.budget, x.mode, x.reserved_count, x.nodes,
           x.lease_ms);
}

/// The node's side, for its snapshot.
struct fleet_status {
  std::string address; // HOST:PORT of the budget server
  std::string node;    // this node's id at the budget server
  /// connecting | connected | unreachable
  std::string state;
  /// Slots this node holds at the fleet.
  uint64_t held = 0;
  /// The last renewal's answer (zeros before the first one).
  fleet_info fleet;
  /// Why the last connect or renewal failed (empty when connected).
  std::string error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fleet_status& x) {
  return f(caf::meta::type_name("mcprt.fleet_status"), x.address, x.node, x.state, x.held, x.fleet, x.error);
}

} // namespace mcprt

namespace mcprt {

/// What the budget server tells a node's link, and the link its budget
/// actor: a slot went back to the fleet (or the fleet is reachable again),
/// so servers refused for lack of room may try again.
using fleet_listener_actor = caf::typed_actor<caf::reacts_to<atom::fleet_free>>;

/// The budget server. Nodes name themselves (`node`): ids are unique per
/// process start.
using fleet_budget_actor = caf::typed_actor<
  // reserve(node, server name)
  caf::replies_to<atom::reserve, std::string, std::string>::with<fleet_grant>,
  // release(node, server name)
  caf::reacts_to<atom::release, std::string, std::string>,
  // renew(node, every name the node holds, the names it is still asking
  // for, its link): the lease is renewed and the node's holding becomes
  // exactly the held names (claims adopted even over the budget: they
  // already run); names still asked for are left as their reserves made them.
  caf::replies_to<atom::renew, std::string, std::vector<std::string>, std::vector<std::string>,
                  fleet_listener_actor>::with<fleet_info>,
  // The ledger as JSON text: budget, mode, nodes and what each holds.
  caf::replies_to<atom::snapshot>::with<std::string>>;

/// A workspace node's link to the budget server (actors/fleet_link.hpp).
using fleet_link_actor = caf::typed_actor<
  caf::replies_to<atom::reserve, std::string>::with<fleet_grant>,
  caf::reacts_to<atom::release, std::string>,
  // From the budget server.
  caf::reacts_to<atom::fleet_free>,
  // Who is told of fleet_free (the workspace budget actor).
  caf::reacts_to<atom::subscribe, fleet_listener_actor>,
  // The runtime stops: every slot goes back to the fleet at once (true
  // when the budget server confirmed it).
  caf::replies_to<atom::drain>::with<bool>,
  caf::replies_to<atom::snapshot>::with<fleet_status>>;

/// Registers the fleet type ids (call after add_mcprt_types; both ends).
void add_fleet_types(caf::actor_system_config& cfg);

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_fleet, caf::id_block::mcprt_hot_reload::end)
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_grant))
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_info))
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_status))
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_listener_actor))
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_budget_actor))
  CAF_ADD_TYPE_ID(mcprt_fleet, (mcprt::fleet_link_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_fleet)
