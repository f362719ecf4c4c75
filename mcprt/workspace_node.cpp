#include "mcprt/workspace_node.hpp"

#include <functional>
#include <map>
#include <set>
#include <shared_mutex>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/untrusted_text.hpp"
#include "mcprt/runtime.hpp"
#include "mcprt/version.hpp"

namespace mcprt {

namespace {

/// One blocking call of the runtime, on a thread of its own: a scheduler
/// worker must not wait up to a minute for a restart or 30 s for a
/// session's connections to let go. The worker answers the host itself
/// (the node delegates the request to it) and ends.
template <class T>
using blocking_worker_actor = caf::typed_actor<typename caf::replies_to<atom::run>::template with<T>>;

template <class T, class F>
typename blocking_worker_actor<T>::behavior_type blocking_worker(typename blocking_worker_actor<T>::pointer self,
                                                                 F work) {
  return {
    [self, work](atom::run) -> caf::result<T> {
      self->quit();
      caf::expected<T> r = caf::error{};
      try {
        r = work();
      } catch (const std::exception& e) {
        r = make_error(errc::io_error, e.what());
      }
      if (r) return std::move(*r);
      return std::move(r.error());
    },
  };
}

/// Once the gate's runtime is gone, every request fails with this.
caf::error node_stopping() {
  return make_error(errc::disconnected, "the workspace node is stopping");
}

} // namespace

struct runtime_gate {
  std::shared_mutex mtx;
  runtime* rt = nullptr;

  /// Runs `f(runtime&)` unless the node let go of the runtime; stop() waits
  /// for it to return.
  template <class T, class F>
  caf::expected<T> with(F&& f) {
    std::shared_lock<std::shared_mutex> lock{mtx};
    if (!rt) return node_stopping();
    return f(*rt);
  }
};

namespace {

using gate_ptr = std::shared_ptr<runtime_gate>;

struct workspace_node_state {
  static inline const char* name = "mcprt.workspace_node";
  gate_ptr gate;
  /// The sessions each connected host opened.
  std::map<caf::actor_addr, std::set<std::string>> sessions;
};

using node_self = workspace_node_actor::stateful_pointer<workspace_node_state>;

template <class T, class F>
caf::result<T> off_thread(node_self self, F work) {
  auto worker = self->system().template spawn<caf::detached>(blocking_worker<T, F>, std::move(work));
  return self->delegate(worker, atom::run_v);
}

template <class T>
caf::result<T> as_result(caf::expected<T> x) {
  if (x) return std::move(*x);
  return std::move(x.error());
}

void watch_host(node_self self, const remote_host_actor& host) {
  if (!host) return;
  auto [it, added] = self->state.sessions.try_emplace(host.address());
  if (added) {
    self->monitor(host);
    spdlog::info("remote host {} connected", escape_for_display(to_string(host.node())));
  }
}

workspace_handles handles_of(runtime& rt) {
  auto& o = rt.options();
  workspace_handles h;
  h.workspace = o.workspace.string();
  h.profile = o.profile;
  h.version = MCPRT_VERSION;
  h.trusted = o.trusted;
  h.pool = o.pool;
  h.limited = o.budget.has_value();
  h.budget = o.budget.value_or(0);
  h.mode = to_string(o.mode);
  h.bus = rt.bus();
  h.forwarder = rt.event_forwarder();
  h.gating = rt.gating();
  h.watcher = rt.watcher();
  h.pool_handle = rt.pool();
  h.budget_handle = rt.budget();
  return h;
}

workspace_node_actor::behavior_type workspace_node_behavior(node_self self, gate_ptr gate) {
  self->state.gate = gate;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto i = self->state.sessions.find(dm.source);
    if (i == self->state.sessions.end()) return;
    auto ids = std::move(i->second);
    self->state.sessions.erase(i);
    spdlog::info("remote host {} went away ({}); closing its {} session(s)",
                 escape_for_display(to_string(dm.source.node())), escape_for_display(to_string(dm.reason)),
                 ids.size());
    if (ids.empty()) return;
    auto worker = self->system().template spawn<caf::detached>(
      blocking_worker<bool, std::function<caf::expected<bool>()>>, [gate = self->state.gate, ids] {
        return gate->with<bool>([&](runtime& rt) {
          for (auto& id : ids)
            rt.close_session(id);
          return true;
        });
      });
    caf::anon_send(worker, atom::run_v);
  });
  return {
    [self](atom::hello, remote_host_actor host) -> caf::result<workspace_handles> {
      watch_host(self, host);
      return as_result(self->state.gate->with<workspace_handles>(handles_of));
    },
    [self](atom::open, remote_host_actor host, std::vector<server_config>& servers)
      -> caf::result<std::string, reconciler_actor> {
      if (!host) return make_error(errc::bad_request, "a session needs its host's actor");
      watch_host(self, host);
      std::string id;
      reconciler_actor reconciler;
      auto opened = self->state.gate->with<bool>([&](runtime& rt) {
        id = rt.open_session(std::move(servers));
        reconciler = rt.session(id);
        return true;
      });
      if (!opened) return std::move(opened.error());
      self->state.sessions[host.address()].insert(id);
      return {id, reconciler};
    },
    [self](atom::close, std::string& id) -> caf::result<bool> {
      bool known = false;
      for (auto& [host, ids] : self->state.sessions)
        known = ids.erase(id) > 0 || known;
      // Only a host's own sessions: the daemon's and other embedders'
      // sessions are not a host's to close.
      if (!known) return false;
      return off_thread<bool>(self, [gate = self->state.gate, id] {
        return gate->with<bool>([&](runtime& rt) {
          rt.close_session(id);
          return true;
        });
      });
    },
    [self](atom::snapshot) -> caf::result<json_value> {
      return off_thread<json_value>(self, [gate = self->state.gate] {
        return gate->with<json_value>([](runtime& rt) { return json_value{rt.snapshot()}; });
      });
    },
    [self](atom::restart, std::string& server) -> caf::result<std::vector<restart_result>> {
      return off_thread<std::vector<restart_result>>(self, [gate = self->state.gate, server] {
        return gate->with<std::vector<restart_result>>([&](runtime& rt) { return rt.restart(server); });
      });
    },
    [self](atom::authorize, std::string& server, uint64_t callback_ms, uint64_t url_ms) -> caf::result<std::string> {
      authorize_options o;
      // Never a browser command from a host: the node would run it.
      o.callback_timeout = std::chrono::milliseconds(std::min<uint64_t>(callback_ms, 3'600'000));
      o.url_timeout = std::chrono::milliseconds(std::min<uint64_t>(url_ms, 600'000));
      return off_thread<std::string>(self, [gate = self->state.gate, server, o] {
        return gate->with<std::string>([&](runtime& rt) { return rt.authorize(server, o); });
      });
    },
    [self](atom::forget, std::string& server) -> caf::result<bool> {
      return off_thread<bool>(self, [gate = self->state.gate, server] {
        return gate->with<bool>([&](runtime& rt) { return rt.forget_authorization(server); });
      });
    },
    [self](atom::shown_id, const std::string& id) -> caf::result<std::string> {
      return as_result(self->state.gate->with<std::string>([&](runtime& rt) { return rt.shown_connection_id(id); }));
    },
    [self](atom::roots, std::vector<mcp_root>& roots) {
      (void)self->state.gate->with<bool>([&](runtime& rt) {
        rt.set_roots(std::move(roots));
        return true;
      });
    },
  };
}

} // namespace

workspace_node::workspace_node(caf::actor_system& sys, runtime& rt) : gate_(std::make_shared<runtime_gate>()) {
  gate_->rt = &rt;
  actor_ = sys.spawn(workspace_node_behavior, gate_);
}

workspace_node::~workspace_node() {
  stop();
}

void workspace_node::stop() {
  {
    std::unique_lock<std::shared_mutex> lock{gate_->mtx};
    gate_->rt = nullptr;
  }
  if (actor_) caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

} // namespace mcprt
