#pragma once

// INTERNAL to the runtime: the host handler that connections forward
// sampling and `ask` elicitations to. An actor keeps the requests waiting
// (by a runtime-unique id), and one thread of its own, "mcprt-host", runs
// the host's callbacks, so a slow host never holds an actor thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "messages/calls.hpp"
#include "messages/messages.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt {

class host_bridge {
public:
  /// `calls` (may be invalid) names the call a server's request belongs to
  /// (server_request::call) and the calls then in flight to that server.
  host_bridge(caf::actor_system& sys, host_handlers handlers, call_broker_actor calls);
  /// stop()s.
  ~host_bridge();
  host_bridge(const host_bridge&) = delete;
  host_bridge& operator=(const host_bridge&) = delete;

  /// What connections get as `connection_config::host`.
  host_handler_actor actor() const;

  /// Ends the actor and the host thread; callbacks not yet run are dropped
  /// (their responders answer with an error if the connection still
  /// listens). Waits for the callback running now. Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mcprt
