#pragma once

// The call broker's messages (actors/call_broker.hpp). Serializable, with
// type ids of their own (a block chained after the remote hosts'), like
// every message between mcprt's actors; the host API's callbacks never
// travel in them (actors/job_inbox.hpp).

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "messages/events.hpp"
#include "messages/pool.hpp"
#include "messages/hot_reload.hpp"
#include "messages/remote.hpp"

namespace mcprt {

/// One call for the broker: a tool call when `method` is empty, else that
/// client request (resources/*, prompts/get, completion/complete).
struct call_request {
  /// Empty for the runtime's host API; a remote host's session id for its
  /// calls (its call ids are its own: another owner's never collide).
  std::string owner;
  std::string session;
  /// The session's reconciler, which names the connection the call goes to.
  reconciler_actor target;
  std::string server;
  std::string tool;
  std::string method;
  json_value arguments;
  /// The caller's id, for cancel and progress; empty for a request nobody
  /// cancels (an mcp request).
  std::string call_id;
  std::chrono::milliseconds timeout{60000};
  /// A server admitted but still connecting is asked again every 50 ms for
  /// this long (0: its errc::not_connected at once).
  std::chrono::milliseconds wait_connecting{0};
  /// Each progress step is published on the bus (event_kind::call_progress).
  bool progress_events = false;
  /// An actor caller's sink for progress (a remote host's).
  progress_sink_actor progress_sink;
};

/// What the broker knows of the calls a server's request may belong to.
/// Calls are named by their key: the caller's call id, or `SESSION/ID` for
/// a remote host's.
struct call_attribution_reply {
  bool found = false;
  std::string session, server, tool, call_id;
  std::vector<std::string> in_flight;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, call_request& x) {
  return f(caf::meta::type_name("mcprt.call_request"), x.owner, x.session, x.target, x.server, x.tool, x.method,
           x.arguments, x.call_id, x.timeout, x.wait_connecting, x.progress_events, x.progress_sink);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, call_attribution_reply& x) {
  return f(caf::meta::type_name("mcprt.call_attribution_reply"), x.found, x.session, x.server, x.tool, x.call_id,
           x.in_flight);
}

/// Registers the call broker's type ids (add_mcprt_types calls it).
void add_call_types(caf::actor_system_config& cfg);

} // namespace mcprt


namespace mcprt {

/// The CALL BROKER interface: one per runtime, it owns every call in
/// flight, whoever made it.
using call_broker_actor = caf::typed_actor<
  // An actor's call (a remote host's, through the node's facade): answered
  // with the server's result or why not.
  caf::replies_to<call_request>::with<json_value>,
  // Calls of the runtime's host API wait in the broker's inbox
  // (call_broker.hpp): take them.
  caf::reacts_to<atom::run>,
  // cancel(owner, call id): the call fails at once with errc::cancelled;
  // the server hears of it. False when no such call is in flight.
  caf::replies_to<atom::cancel, std::string, std::string>::with<bool>,
  // lookup(server, tool): the calls a server's request may belong to.
  caf::replies_to<atom::lookup, std::string, std::string>::with<call_attribution_reply>,
  // The call of that key, exactly (a connection named it): found or not.
  caf::replies_to<atom::lookup, std::string>::with<call_attribution_reply>,
  // A step of a call's progress, from its connection (call id: the key).
  caf::reacts_to<call_progress_update>,
  // drain(error): every call in flight fails with it, and so does every
  // later one. The runtime stops, or its remote node went away.
  caf::replies_to<atom::drain, caf::error>::with<bool>,
  // INTERNAL: deadlines and retries are due.
  caf::reacts_to<atom::tick>>;

} // namespace mcprt

CAF_BEGIN_TYPE_ID_BLOCK(mcprt_calls, caf::id_block::mcprt_remote::end)
  CAF_ADD_TYPE_ID(mcprt_calls, (mcprt::call_request))
  CAF_ADD_TYPE_ID(mcprt_calls, (mcprt::call_attribution_reply))
  CAF_ADD_TYPE_ID(mcprt_calls, (mcprt::call_broker_actor))
CAF_END_TYPE_ID_BLOCK(mcprt_calls)
