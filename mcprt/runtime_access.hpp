#pragma once

// INTERNAL: what the daemon's own parts (the workspace node, `mcprt serve`)
// and the tests reach inside a runtime that a host never does: the actors
// behind the facade. Not installed.

#include <string>

#include "messages/calls.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt {

namespace io {
class reactor;
}

struct runtime_access {
  /// The runtime's call broker: every call in flight (actors/call_broker.hpp).
  static call_broker_actor calls(const runtime& rt);
  static event_bus_actor bus(const runtime& rt);
  /// The actor that turns every connection's client_update into an event.
  /// It is supervised: when it dies it is replaced and every live
  /// connection re-subscribes to its successor (which then gets each one's
  /// current status), so this handle may change.
  static event_sink_actor event_forwarder(const runtime& rt);
  static gating_actor gating(const runtime& rt);
  static watcher_actor watcher(const runtime& rt);
  /// Invalid without the pool, and on a remote node's runtime.
  static pool_actor pool(const runtime& rt);
  /// The workspace budget; invalid without the pool, and on a remote
  /// node's runtime.
  static budget_actor budget(const runtime& rt);
  /// The reconciler of an open session; invalid for any other id.
  static reconciler_actor session(const runtime& rt, const std::string& id);
  /// The thread that serves the stdio servers' pipes, for another loop to
  /// run on (io::guest_loop); null on a remote node's runtime. Valid until
  /// shutdown().
  static io::reactor* reactor(const runtime& rt);
};

} // namespace mcprt
