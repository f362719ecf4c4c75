#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include "messages/fleet.hpp"

namespace mcprt {

struct fleet_link_options {
  /// The budget server (`--fleet-budget HOST:PORT`).
  std::string host;
  uint16_t port = 0;
  /// This node's id at the budget server: unique per process start.
  std::string node;
  /// How often a lost budget server is tried again.
  std::chrono::milliseconds retry{250};
  /// Through CAF::openssl (the actor system loaded caf::openssl::manager
  /// with this node's certificate, key and CA): mutual authentication.
  bool tls = false;
  /// How long one connect, reserve or renewal may take.
  std::chrono::milliseconds timeout{5000};
};

/// Makes a node id: host name, process id and random bytes.
std::string make_fleet_node_id();

/// Spawns a workspace node's link to the fleet budget server, over CAF's
/// middleman (the actor system must have loaded caf::io::middleman). It
/// connects at once and keeps trying every `retry` while the server is
/// away; it renews its lease (sending every name it holds, so that a
/// restarted server re-learns them, and the names whose reserves are still
/// unanswered) every third of the lease.
///
/// Reserves made while the first connection is still being set up wait
/// for it (a node that just started asks for its servers at once). After
/// that, `reserve` answers `unreachable` while the server is away, except under a
/// fleet in `warn` mode (as last heard), where the slot is taken on the
/// node's word, counted at the next renewal, and a warning logged. Before
/// the first renewal answer the mode is unknown and `enforce` is assumed.
/// Subscribers get `fleet_free` from the server, and once more whenever
/// the server is reachable again.
fleet_link_actor spawn_fleet_link(caf::actor_system& sys, fleet_link_options opts);

} // namespace mcprt
