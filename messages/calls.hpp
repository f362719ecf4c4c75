#pragma once

// The call broker's messages (actors/call_broker.hpp). Local to the
// process: the broker is never published, so these types carry no type id,
// and a host's callbacks travel in them as they are.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>

#include "messages/events.hpp"
#include "messages/pool.hpp"
#include "messages/hot_reload.hpp"
#include "messages/remote.hpp"

namespace mcprt {

/// Where the answer of a call of the runtime's host API goes: its callbacks,
/// run on the broker's thread. The answer comes exactly once: a delivery
/// dropped unanswered (the broker ended with the actor system) answers
/// errc::not_connected.
class call_delivery {
public:
  using done_fn = std::function<void(caf::expected<nlohmann::json>)>;
  using progress_fn = std::function<void(const events::call_progress&)>;

  call_delivery(done_fn done, progress_fn progress, std::string server)
    : done_(std::move(done)), progress_(std::move(progress)), server_(std::move(server)) {}
  ~call_delivery();
  call_delivery(const call_delivery&) = delete;
  call_delivery& operator=(const call_delivery&) = delete;

  /// The answer; later ones do nothing.
  void answer(caf::expected<nlohmann::json> result);
  /// One step of progress; nothing once the answer went out.
  void progress(const events::call_progress& step);
  bool wants_progress() const { return static_cast<bool>(progress_); }

private:
  std::mutex mtx_;
  done_fn done_;
  progress_fn progress_;
  std::string server_;
};

using call_delivery_ptr = std::shared_ptr<call_delivery>;

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

} // namespace mcprt

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mcprt::call_delivery_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mcprt::call_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mcprt::call_attribution_reply)

namespace mcprt {

/// The CALL BROKER interface: one per runtime, it owns every call in
/// flight, whoever made it.
using call_broker_actor = caf::typed_actor<
  // An actor's call (a remote host's, through the node's facade): answered
  // with the server's result or why not.
  caf::replies_to<call_request>::with<json_value>,
  // A call of the runtime's host API: answered through the delivery.
  caf::reacts_to<call_request, call_delivery_ptr>,
  // cancel(owner, call id): the call fails at once with errc::cancelled;
  // the server hears of it. False when no such call is in flight.
  caf::replies_to<atom::cancel, std::string, std::string>::with<bool>,
  // lookup(server, tool): the calls a server's request may belong to.
  caf::replies_to<atom::lookup, std::string, std::string>::with<call_attribution_reply>,
  // A step of a call's progress, from its connection (call id: the key).
  caf::reacts_to<call_progress_update>,
  // drain(error): every call in flight fails with it, and so does every
  // later one. The runtime stops, or its remote node went away.
  caf::replies_to<atom::drain, caf::error>::with<bool>,
  // INTERNAL: deadlines and retries are due.
  caf::reacts_to<atom::tick>>;

} // namespace mcprt
