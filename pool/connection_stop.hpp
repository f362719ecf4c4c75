#pragma once

// Stopping connections, as both pools do it: ask the connection to stop (it
// says goodbye to its server and reaps it), and kill the actor when it does
// not answer in time. A connection that is already gone counts as stopped.

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "messages/pool.hpp"

namespace mcprt {

/// The connections a pool is stopping, until each has gone. It belongs in
/// the pool's state: when the pool ends first, the destructor ends every
/// connection still stopping. A stopping connection waits for its server's
/// exit, which never comes once the runtime has torn its I/O down; without
/// this it would outlive its pool and keep the actor system from ending.
class connection_stopper {
public:
  connection_stopper() = default;
  connection_stopper(const connection_stopper&) = delete;
  connection_stopper& operator=(const connection_stopper&) = delete;
  ~connection_stopper();

  /// Takes `conn` into care now, for a pool that still asks it something
  /// before it stops it.
  void hold(const connection_actor& conn);

  /// Asks `conn` to stop and kills it if it has not answered within
  /// `timeout`. Nothing waits for it. An invalid handle is ignored.
  void stop(pool_actor::pointer self, connection_actor conn, caf::timespan timeout);

  /// Asks every connection to stop and answers, once each has (or has
  /// failed to), how many stopped, how many were killed and what went wrong.
  /// Each gets `timeout` (zero or less: a day); when it runs out, `force`
  /// kills the connection (counted `forced`), else it is an error naming the
  /// id. `already_stopped` is added to `drained`. Call from a handler of
  /// `self`: the result is that request's response.
  caf::typed_response_promise<drain_result>
  stop_all(pool_actor::pointer self, std::vector<std::pair<std::string, connection_actor>> conns,
           uint64_t already_stopped, bool force, caf::timespan timeout);

  /// Connections asked to stop that have not answered yet.
  std::size_t size() const {
    return stopping_.size();
  }

private:
  void forget(const connection_actor& conn);

  std::unordered_map<caf::actor_id, connection_actor> stopping_;
};

} // namespace mcprt
