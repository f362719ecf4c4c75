#pragma once

// INTERNAL: what the daemon's own parts (the workspace node) reach inside a
// runtime that a host never does. Not installed.

#include "messages/calls.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt {

struct runtime_access {
  /// The runtime's call broker: every call in flight (actors/call_broker.hpp).
  static call_broker_actor calls(const runtime& rt);
};

} // namespace mcprt
