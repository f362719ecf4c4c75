#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

#include "messages/calls.hpp"

namespace mcprt {

/// Spawns the call broker: the one actor that owns every call of a runtime
/// in flight, whoever made it (the host API, the gateway and the HTTP API
/// through it, a remote host through the node's facade). A thin shell
/// around core/call_table: the per-server limit (`max_per_server` calls,
/// all callers together; 0: none), one id per call end to end (the
/// caller's, prefixed by a remote host's session), deadlines on one 50 ms
/// tick instead of a timer per call, calls asked for again while their
/// server connects, cancellation (the session takes the call back and the
/// server hears of it), and progress from the connection to the caller's
/// callback, sink or the bus.
///
/// A call goes to the connection its session's reconciler names
/// (`atom::lookup`), which answers once a connecting server is up. With a
/// `node` (a remote runtime, runtime::connect) the broker hands each call
/// to that workspace node whole instead, and the node's broker does the rest.
call_broker_actor spawn_call_broker(caf::actor_system& sys, std::size_t max_per_server, event_bus_actor bus,
                                    workspace_node_actor node = {});

} // namespace mcprt
