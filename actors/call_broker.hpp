#pragma once

#include <cstddef>

#include <caf/fwd.hpp>

#include <memory>

#include "actors/job_inbox.hpp"
#include "messages/calls.hpp"

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


/// A call of the runtime's host API, as it waits in the broker's inbox
/// (its delivery holds the host's callbacks, which no message carries).
struct host_call {
  call_request request;
  call_delivery_ptr delivery;
};

using call_inbox = job_inbox<host_call>;

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
/// `inbox` takes the host API's calls (post_job wakes the broker); it is
/// closed when the broker ends, and what waits there is answered then.
call_broker_actor spawn_call_broker(caf::actor_system& sys, std::size_t max_per_server, event_bus_actor bus,
                                    std::shared_ptr<call_inbox> inbox, workspace_node_actor node = {});

} // namespace mcprt
