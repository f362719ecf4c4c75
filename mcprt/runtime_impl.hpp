#pragma once

// INTERNAL: what the runtime facade is made of. runtime.cpp is the facade
// and what both kinds of runtime share (sessions, calls, the asker);
// runtime_local.cpp starts the actors of a workspace of its own
// (`runtime::start`), runtime_remote.cpp links to a remote node's
// (`runtime::connect`). Each fills in a `runtime::impl::side`: the one place
// where the two differ, decided once.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/call_broker.hpp"
#include "actors/io_thread_jobs.hpp"
#include "actors/job_inbox.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_client.hpp"
#include "io/reactor.hpp"
#include "mcprt/host_bridge.hpp"
#include "mcprt/oauth_broker.hpp"
#include "mcprt/runtime.hpp"
#include "messages/connection.hpp"
#include "messages/fleet.hpp"
#include "messages/hot_reload.hpp"
#include "messages/pool.hpp"
#include "messages/workspace.hpp"

namespace mcprt {

/// Work for the runtime's asker, the one actor the non-blocking operations
/// issue their requests from: it runs on the asker's thread, as the asker.
using runtime_asker_job = std::function<void(caf::event_based_actor*)>;
using asker_inbox = job_inbox<runtime_asker_job>;

caf::behavior runtime_asker(caf::event_based_actor* self, std::shared_ptr<asker_inbox> inbox);

/// Restart results as shown outside the runtime.
void show_restarts(std::vector<restart_result>& rs, const std::function<std::string(const std::string&)>& show_id);

/// What a use of CAF's middleman (`what`) needs of the host's actor system.
caf::error check_middleman(caf::actor_system& sys, bool tls, const std::string& what);

/// Calls `done` exactly once: with the answer, or, when the last copy goes
/// unanswered (the asker ended before the job ran), with `fallback()`.
template <class T>
class answer_once {
public:
  answer_once(std::function<void(T)> done, std::function<T()> fallback)
    : state_(std::make_shared<state>(std::move(done), std::move(fallback))) {}

  void operator()(T x) const {
    auto done = std::move(state_->done);
    state_->done = nullptr;
    if (!done) return;
    try {
      done(std::move(x));
    } catch (...) {
      // A host's callback must not take the asker down.
    }
  }

private:
  struct state {
    state(std::function<void(T)> d, std::function<T()> f) : done(std::move(d)), fallback(std::move(f)) {}
    ~state() {
      if (done) done(fallback());
    }
    std::function<void(T)> done;
    std::function<T()> fallback;
  };
  std::shared_ptr<state> state_;
};

/// The forwarder in force. The connection factory (running in pool and
/// reconciler actors) reads it for each new connection; the generation
/// tells the supervisor whether that forwarder was replaced meanwhile.
struct forwarder_cell {
  mutable std::mutex mtx;
  event_sink_actor current;
  uint64_t generation = 0;

  std::pair<event_sink_actor, uint64_t> get() const {
    std::lock_guard<std::mutex> guard{mtx};
    return {current, generation};
  }
  void set(event_sink_actor f) {
    std::lock_guard<std::mutex> guard{mtx};
    current = std::move(f);
    ++generation;
  }
};

/// Every connection actor the runtime started, until it has ended. A
/// connection's last act touches the reactor and the HTTP workers (it kills
/// its server, closes its socket), so shutdown ends the ones still there
/// and waits for them before it tears those down.
struct connection_registry : std::enable_shared_from_this<connection_registry> {
  std::mutex mtx;
  std::condition_variable cv;
  std::map<caf::actor_id, caf::actor> live;

  void add(const connection_actor& conn) {
    if (!conn) return;
    auto handle = caf::actor_cast<caf::actor>(conn);
    {
      std::lock_guard<std::mutex> guard{mtx};
      live.emplace(handle.id(), handle);
    }
    // Runs at once, on this thread, for an actor that already ended.
    handle->attach_functor([self = shared_from_this(), id = handle.id()] {
      std::lock_guard<std::mutex> guard{self->mtx};
      self->live.erase(id);
      self->cv.notify_all();
    });
  }

  /// Kills every connection still there and waits until all have ended;
  /// false when some are left after `timeout`.
  bool end_all(std::chrono::milliseconds timeout) {
    std::vector<caf::actor> left;
    {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto& [id, a] : live)
        left.push_back(a);
    }
    for (auto& a : left)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [this] { return live.empty(); });
  }
};

/// The calls the host API has in flight, by call id: what `cancel_call`
/// and `wire_id` answer at once, without asking the broker. The broker
/// owns the calls; this only remembers which ids are out.
struct host_call_ids {
  std::mutex mtx;
  std::set<std::string> live;
  uint64_t next = 1;

  bool contains(const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx};
    return live.count(id) > 0;
  }
  void erase(const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx};
    live.erase(id);
  }
};

struct runtime::impl {
  struct session_entry {
    reconciler_actor reconciler;
    budget_actor budget; // kill switch: the session budget
    pool_actor pool;     // kill switch: the session's private pool
  };

  /// What a runtime on a workspace of its own and one on a remote node's
  /// do differently: chosen once, by `start` (a local_side) or `connect` (a
  /// remote_side); nothing else asks which one it is. Every member but
  /// `remote` and `lost` runs on the facade's calling thread.
  struct side {
    virtual ~side() = default;
    virtual bool remote() const = 0;
    /// Set once nothing reaches the workspace any more (its node went
    /// away): what every operation answers from then on.
    virtual std::optional<caf::error> lost() const = 0;
    virtual void open_session(impl& p, std::vector<server_config> servers, std::function<void(std::string)> done) = 0;
    /// `s` is out of the books already; `done` runs once it is closed.
    virtual void close_session(impl& p, const std::string& id, const session_entry& s,
                               std::function<void()> done) = 0;
    virtual void snapshot(impl& p, std::function<void(nlohmann::json)> done) = 0;
    virtual void restart(impl& p, const std::string& server,
                         std::function<void(caf::expected<std::vector<restart_result>>)> done) = 0;
    virtual void authorize(impl& p, const std::string& server, authorize_options options,
                           std::function<void(caf::expected<std::string>)> done) = 0;
    virtual void forget_authorization(impl& p, const std::string& server,
                                      std::function<void(caf::expected<bool>)> done) = 0;
    virtual void set_own_listeners(impl& p, std::vector<listen_endpoint> listeners) = 0;
    virtual void set_roots(impl& p, std::vector<mcp_root> roots) = 0;
    /// A subscriber joined or left (a remote node's last event goes to each).
    virtual void subscribed(const event_subscriber_actor& sink) = 0;
    virtual void unsubscribed(const event_subscriber_actor& sink) = 0;
    /// After the calls in flight were answered: ends the sessions and every
    /// actor; nothing of the runtime runs when it returns.
    virtual drain_result shutdown(impl& p, std::chrono::milliseconds timeout) = 0;
  };

  caf::actor_system& sys;
  runtime_options opts;
  std::unique_ptr<side> ws;
  // -- a workspace of its own (empty on a remote node's runtime) --
  std::unique_ptr<io::reactor> reactor;
  std::unique_ptr<io::http_client> http;
  // Before the actors in destruction order: connections hold its clients.
  std::shared_ptr<oauth_broker> oauth;
  std::shared_ptr<forwarder_cell> forwarders = std::make_shared<forwarder_cell>();
  caf::actor forwarding; // supervises the forwarder
  budget_actor budget; // workspace budget (pool mode)
  fleet_link_actor fleet; // with --fleet-budget
  pool_actor pool;
  connection_factory make;
  std::shared_ptr<connection_registry> connections = std::make_shared<connection_registry>();
  // Requests for the host: null without host handlers.
  std::unique_ptr<host_bridge> host;
  // The roots connections started from now on offer (nullopt: none).
  std::shared_ptr<std::pair<std::mutex, std::optional<std::vector<mcp_root>>>> roots =
    std::make_shared<std::pair<std::mutex, std::optional<std::vector<mcp_root>>>>();
  // -- both: on a remote node's runtime, bus, gating, watcher and the
  // sessions' reconcilers are local views of its facade (remote_link.hpp) --
  event_bus_actor bus;
  /// The bus, for the egress proxy's thread (set once, before any server runs).
  std::shared_ptr<event_bus_actor> egress_bus = std::make_shared<event_bus_actor>();
  std::function<std::string(const std::string&)> show_id;
  gating_actor gating;
  watcher_actor watcher;
  call_broker_actor broker; // every call in flight
  std::shared_ptr<call_inbox> host_call_inbox = std::make_shared<call_inbox>();
  caf::actor asker;         // where the non-blocking operations ask from
  std::shared_ptr<asker_inbox> asker_jobs = std::make_shared<asker_inbox>();
  std::shared_ptr<host_call_ids> host_calls = std::make_shared<host_call_ids>();

  mutable std::mutex mtx;
  std::map<std::string, session_entry> sessions;
  std::vector<std::string> order; // opening order; the first open one is reported
  uint64_t next_session = 1;
  bool stopped = false;
  bool asker_gone = false;

  explicit impl(caf::actor_system& s) : sys(s) {}

  void close_asker() {
    {
      std::lock_guard<std::mutex> guard{mtx};
      asker_gone = true;
    }
    if (asker) caf::anon_send_exit(asker, caf::exit_reason::user_shutdown);
    // What waits for it answers now, and so does whatever comes later.
    asker_jobs->close();
  }

  /// Whether the asker has gone (at the end of shutdown, after the
  /// sessions closed through it).
  bool has_stopped() const {
    std::lock_guard<std::mutex> guard{mtx};
    return asker_gone;
  }

  template <class R, class Handle, class... Ts>
  caf::expected<R> ask(const Handle& h, caf::timespan timeout, Ts&&... xs) {
    if (auto err = ws->lost()) return std::move(*err);
    before_blocking_wait();
    caf::scoped_actor self{sys};
    caf::expected<R> out{caf::error{}};
    self->request(h, timeout, std::forward<Ts>(xs)...)
      .receive([&](R& x) { out = std::move(x); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  /// `ask` without blocking: `done` gets the answer on the asker's thread.
  template <class R, class Handle, class... Ts>
  void ask_async(const Handle& h, caf::timespan timeout, std::function<void(caf::expected<R>)> done, Ts... xs) {
    if (auto err = ws->lost()) {
      done(std::move(*err));
      return;
    }
    if (has_stopped()) {
      done(make_error(errc::not_connected, "the runtime stopped"));
      return;
    }
    answer_once<caf::expected<R>> once{std::move(done), [] {
                                         return caf::expected<R>{make_error(errc::not_connected, "the runtime stopped")};
                                       }};
    post_job(*asker_jobs, asker, runtime_asker_job{[h, timeout, once, xs...](caf::event_based_actor* self) {
               self->request(h, timeout, xs...)
                 .then([once](R& r) { once(std::move(r)); }, [once](caf::error& e) { once(std::move(e)); });
             }});
  }

  /// Starts one call (tools/call when `method` is empty, else that client
  /// request): limited per server, answered exactly once through `done`.
  /// Returns the call's id (tool calls: for cancel_call).
  std::string start_call(const std::string& session, const std::string& server, const std::string& tool,
                         const std::string& method, nlohmann::json arguments, call_callback done, call_options opts);

  /// Enters a session that opened into the books.
  void add_session(const std::string& id, session_entry entry) {
    std::lock_guard<std::mutex> guard{mtx};
    sessions.emplace(id, std::move(entry));
    order.push_back(id);
  }

  /// Takes a session out of the books and closes it; `done` runs once it
  /// is closed (at once for a session that is not open).
  void close_session(const std::string& id, std::function<void()> done);

  /// Closes every open session, waiting for each.
  void close_all_sessions();

  std::optional<session_entry> find_session(const std::string& id) const {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = sessions.find(id);
    if (i == sessions.end()) return std::nullopt;
    return i->second;
  }
};

} // namespace mcprt
