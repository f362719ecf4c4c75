#pragma once

// Stopping connections, as both pools do it: ask the connection to stop (it
// says goodbye to its server and reaps it), and kill the actor when it does
// not answer in time. A connection that is already gone counts as stopped.

#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "messages/pool.hpp"

namespace mcprt {

/// Asks `conn` to stop and kills it if it has not answered within `timeout`.
/// Nothing waits for it. An invalid handle is ignored.
void stop_connection(pool_actor::pointer self, connection_actor conn, caf::timespan timeout);

/// Asks every connection to stop and answers, once each has (or has failed
/// to), how many stopped, how many were killed and what went wrong. Each
/// gets `timeout` (zero or less: a day); when it runs out, `force` kills the
/// connection (counted `forced`), else it is an error naming the id.
/// `already_stopped` is added to `drained`. Call from a handler of `self`:
/// the result is that request's response.
caf::typed_response_promise<drain_result>
stop_connections(pool_actor::pointer self, std::vector<std::pair<std::string, connection_actor>> conns,
                 uint64_t already_stopped, bool force, caf::timespan timeout);

} // namespace mcprt
