#include "mcprt/host_bridge.hpp"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <caf/all.hpp>

namespace mcprt {

namespace {

constexpr int error_internal = -32603; // JSON-RPC "Internal error"

using host_bridge_actor = host_handler_actor::extend<caf::reacts_to<atom::host_answer, std::string, host_reply>>;

host_reply error_reply(int code, std::string message) {
  host_reply r;
  r.error_code = code;
  r.error_message = std::move(message);
  return r;
}

} // namespace

// -- the responder ------------------------------------------------------------------

struct host_responder::state {
  std::string id;
  caf::actor bridge;
  std::atomic<bool> done{false};

  void send(host_reply r) {
    if (done.exchange(true)) return;
    caf::anon_send(caf::actor_cast<host_bridge_actor>(bridge), atom::host_answer_v, id, std::move(r));
  }

  ~state() {
    if (!done) send(error_reply(error_internal, "the host dropped the request"));
  }
};

namespace {

/// Runs the host's callbacks one at a time, in order, off the actor threads.
/// The thread starts with the first callback: most servers never ask the
/// host anything (the idle footprint).
class host_thread {
public:
  host_thread() = default;
  ~host_thread() { stop(); }

  void post(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!stopping_) {
        queue_.push_back(std::move(f));
        if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
        cv_.notify_one();
        return;
      }
    }
    // Dropped outside the lock: its responder answers as it goes.
  }

  void stop() {
    std::deque<std::function<void()>> dropped;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
      dropped.swap(queue_);
      cv_.notify_all();
    }
    dropped.clear();
    if (!thread_.joinable()) return;
    // A handler that shuts the runtime down runs on this very thread.
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
  }

private:
  void run() {
    pthread_setname_np(pthread_self(), "mcprt-host");
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock{mtx_};
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        f();
      } catch (...) {
        // The host's exception drops its responder: the server gets an error.
      }
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_; // started under mtx_, never after stopping_
};

struct bridge_shared {
  host_handlers handlers;
  call_broker_actor calls;
  std::shared_ptr<host_thread> thread;
};

struct host_bridge_state {
  static inline const char* name = "mcprt.host_bridge";

  struct waiting {
    caf::typed_response_promise<host_reply> rp;
    caf::actor_addr connection;
    uint64_t token = 0;
  };

  std::shared_ptr<bridge_shared> shared;
  std::map<std::string, waiting> by_id;
  std::map<std::pair<caf::actor_addr, uint64_t>, std::string> by_token;
  std::set<caf::actor_addr> watched;
  uint64_t next_id = 1;
};

using bridge_ptr = host_bridge_actor::stateful_pointer<host_bridge_state>;

void tell_withdrawn(bridge_ptr self, const std::string& id) {
  auto& h = self->state.shared->handlers;
  if (h.actor) self->send(h.actor, atom::host_withdrawn_v, id);
  else if (h.withdrawn) self->state.shared->thread->post([w = h.withdrawn, id] { w(id); });
}

/// The host's answer reaches the connection that waits for it, if any.
void settle(bridge_ptr self, const std::string& id, host_reply&& r) {
  auto& st = self->state;
  auto i = st.by_id.find(id);
  if (i == st.by_id.end()) return; // withdrawn, or its connection ended
  i->second.rp.deliver(std::move(r));
  st.by_token.erase({i->second.connection, i->second.token});
  st.by_id.erase(i);
}

/// The actor form: the host's actor answers through its reply. No timeout
/// here: the session withdraws a request it no longer waits for.
void ask_host_actor(bridge_ptr self, const host_actor& actor, server_request out) {
  server_request_message m;
  m.id = out.id;
  m.server = std::move(out.server);
  m.method = std::move(out.method);
  m.params = json_value{std::move(out.params)};
  if (out.call) {
    m.call_session = out.call->session;
    m.call_tool = out.call->tool;
    m.call_id = out.call->call_id;
  }
  m.input_key = std::move(out.input_key);
  m.input_round = out.input_round;
  self->request(actor, caf::infinite, atom::host_request_v, std::move(m))
    .then([self, id = out.id](host_reply& r) { settle(self, id, std::move(r)); },
          [self, id = out.id](caf::error& e) {
            settle(self, id, error_reply(error_internal, "the host's actor failed: " + to_string(e)));
          });
}

/// The request goes to the host, unless it was withdrawn meanwhile.
void hand_over(bridge_ptr self, std::function<void(server_request, host_responder)> handler, server_request out) {
  auto& st = self->state;
  if (!st.by_id.count(out.id)) return;
  if (auto& actor = st.shared->handlers.actor) {
    ask_host_actor(self, actor, std::move(out));
    return;
  }
  auto rs = std::make_shared<host_responder::state>();
  rs->id = out.id;
  rs->bridge = caf::actor_cast<caf::actor>(self);
  st.shared->thread->post([handler, out = std::move(out), responder = host_responder{rs}]() mutable {
    handler(std::move(out), responder);
  });
}

host_bridge_actor::behavior_type bridge(bridge_ptr self, std::shared_ptr<bridge_shared> shared) {
  self->state.shared = std::move(shared);
  // A connection that ends answers nothing further: its requests are gone.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    st.watched.erase(dm.source);
    for (auto i = st.by_id.begin(); i != st.by_id.end();) {
      if (i->second.connection != dm.source) {
        ++i;
        continue;
      }
      st.by_token.erase({i->second.connection, i->second.token});
      auto id = i->first;
      i = st.by_id.erase(i);
      tell_withdrawn(self, id);
    }
  });
  return {
    [self](atom::host_request, uint64_t token, forwarded_host_request& req) -> caf::result<host_reply> {
      auto& st = self->state;
      auto& h = st.shared->handlers;
      std::function<void(server_request, host_responder)> handler;
      bool answered = false;
      if (req.method == "sampling/createMessage") handler = h.sampling, answered = h.answers_sampling();
      else if (req.method == "elicitation/create") handler = h.elicitation, answered = h.answers_elicitation();
      else if (req.method == "roots/list") handler = h.roots, answered = h.answers_roots();
      if (!answered) return error_reply(-32601, "no host handler for " + req.method);
      // Taken before make_response_promise, which moves the sender out.
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      auto connection = caf::actor_cast<caf::actor_addr>(sender);
      auto id = "h" + std::to_string(st.next_id++);
      auto rp = self->make_response_promise<host_reply>();
      st.by_id.emplace(id, host_bridge_state::waiting{rp, connection, token});
      st.by_token[{connection, token}] = id;
      if (connection && st.watched.insert(connection).second) self->monitor(sender);
      server_request out;
      out.id = id;
      out.server = req.server;
      out.method = req.method;
      out.params = std::move(req.params.value);
      out.input_key = std::move(req.input_key);
      out.input_round = req.round_size;
      if (!st.shared->calls) {
        hand_over(self, std::move(handler), std::move(out));
        return rp;
      }
      auto server = out.server;
      auto shared_out = std::make_shared<server_request>(std::move(out));
      // A connection that names the request's call is told exactly whose
      // it is; otherwise the broker guesses from the calls in flight.
      auto lookup = req.call_key.empty()
                      ? self->request(st.shared->calls, std::chrono::seconds(5), atom::lookup_v, server, req.tool)
                      : self->request(st.shared->calls, std::chrono::seconds(5), atom::lookup_v, req.call_key);
      lookup
        .then(
          [self, handler, shared_out](call_attribution_reply& a) mutable {
            shared_out->in_flight_calls = std::move(a.in_flight);
            if (a.found) shared_out->call = host_call_ref{a.session, a.server, a.tool, a.call_id};
            hand_over(self, std::move(handler), std::move(*shared_out));
          },
          [self, handler, shared_out](caf::error&) mutable {
            hand_over(self, std::move(handler), std::move(*shared_out));
          });
      return rp;
    },
    [self](atom::host_withdrawn, uint64_t token) {
      auto& st = self->state;
      auto j = st.by_token.find({caf::actor_cast<caf::actor_addr>(self->current_sender()), token});
      if (j == st.by_token.end()) return;
      auto id = j->second;
      st.by_token.erase(j);
      if (auto i = st.by_id.find(id); i != st.by_id.end()) {
        // The connection no longer waits for it; this only settles the request.
        i->second.rp.deliver(error_reply(error_internal, "withdrawn"));
        st.by_id.erase(i);
      }
      tell_withdrawn(self, id);
    },
    [self](atom::host_answer, const std::string& id, host_reply& r) { settle(self, id, std::move(r)); },
  };
}

} // namespace

void host_responder::answer(nlohmann::json result) const {
  host_reply r;
  r.result = json_value{std::move(result)};
  state_->send(std::move(r));
}

void host_responder::fail(int code, std::string message) const {
  state_->send(error_reply(code == 0 ? error_internal : code, std::move(message)));
}

bool host_responder::answered() const {
  return state_->done;
}

// -- the bridge -----------------------------------------------------------------------

struct host_bridge::impl {
  std::shared_ptr<host_thread> thread;
  host_bridge_actor actor;
};

host_bridge::host_bridge(caf::actor_system& sys, host_handlers handlers, call_broker_actor calls)
    : impl_(std::make_unique<impl>()) {
  // The actor form needs no thread of its own.
  if (!handlers.actor) impl_->thread = std::make_shared<host_thread>();
  auto shared = std::make_shared<bridge_shared>();
  shared->handlers = std::move(handlers);
  shared->calls = std::move(calls);
  shared->thread = impl_->thread;
  impl_->actor = sys.spawn(bridge, std::move(shared));
}

host_bridge::~host_bridge() {
  stop();
}

host_handler_actor host_bridge::actor() const {
  return impl_->actor;
}

void host_bridge::stop() {
  if (impl_->actor) caf::anon_send_exit(impl_->actor, caf::exit_reason::user_shutdown);
  if (impl_->thread) impl_->thread->stop();
}

} // namespace mcprt
