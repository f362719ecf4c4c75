#pragma once

// The workspace node: the actor `mcprt serve --caf-port`
// publishes, so that C++ hosts elsewhere get the `runtime` interface through
// `runtime::connect` (messages/remote.hpp has the interface and says what
// travels where). It tracks which host opened which session and closes a
// host's sessions when the host goes away, so the pool drains as usual.

#include <memory>

#include "messages/remote.hpp"

namespace mcprt {

class runtime;

/// The runtime as the node's actor and its worker threads reach it, until
/// the node lets go of it.
struct runtime_gate;

/// Spawns the node actor over `rt`. Closing a session, the snapshot and a
/// restart use the runtime's non-blocking forms (a helper actor of the node
/// delivers their answers); only the OAuth operations, which block on the
/// network, run on a thread of their own per request, never on a scheduler
/// worker.
class workspace_node {
public:
  workspace_node(caf::actor_system& sys, runtime& rt);
  /// Stops, if `stop()` was not called.
  ~workspace_node();
  workspace_node(const workspace_node&) = delete;
  workspace_node& operator=(const workspace_node&) = delete;

  /// What to publish.
  const workspace_node_actor& actor() const { return actor_; }

  /// Lets go of the runtime: waits for the runtime calls in progress for
  /// hosts to return or, for the non-blocking ones, to have started; fails every later
  /// request with errc::disconnected, and ends the actor. Call it before
  /// the runtime shuts down: a worker must not call into a runtime that is
  /// stopping or gone. Idempotent.
  void stop();

private:
  std::shared_ptr<runtime_gate> gate_;
  workspace_node_actor actor_;
};

} // namespace mcprt
