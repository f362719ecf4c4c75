#include "mcprt/workspace_node.hpp"

#include <functional>
#include <map>
#include <set>
#include <shared_mutex>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/server_config.hpp"
#include "core/untrusted_text.hpp"
#include "actors/job_inbox.hpp"
#include "mcprt/runtime.hpp"
#include "mcprt/runtime_access.hpp"
#include "mcprt/version.hpp"

namespace mcprt {

namespace {

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

/// What one host may hold at once: a host is authenticated, but one host
/// must not exhaust the node for the others.
constexpr std::size_t max_sessions_per_host = 256;
constexpr std::size_t max_servers_per_session = 256;
constexpr std::size_t max_sinks_per_host = 64;

struct host_entry {
  remote_host_actor actor;
  std::set<std::string> sessions;
  std::set<caf::actor_addr> sinks;
};

struct node_session {
  caf::actor_addr host;
  caf::node_id node;
  reconciler_actor reconciler;
};

/// The node's helper for the runtime's non-blocking operations: a host's
/// request is delegated here, and the runtime's answer, which comes on
/// another thread, is delivered from here. Local: never published.
using node_answerer_actor = caf::typed_actor<caf::replies_to<atom::snapshot>::with<json_value>,
                                             caf::replies_to<atom::restart, std::string>::with<std::vector<restart_result>>,
                                             caf::replies_to<atom::close, std::string>::with<bool>,
                                             caf::replies_to<atom::authorize, std::string, uint64_t, uint64_t>::with<std::string>,
                                             caf::replies_to<atom::forget, std::string>::with<bool>,
                                             // The runtime's answers wait in its inbox: take them.
                                             caf::reacts_to<atom::run>>;

/// An answer of the runtime, to be delivered on the answerer's thread.
using node_answer = std::function<void()>;
using node_answers = job_inbox<node_answer>;

/// Starts `start(runtime&, deliver)` and answers the request with what
/// `deliver` gets, whenever and on whatever thread that is.
template <class T, class Start>
caf::result<T> answer_later(node_answerer_actor::pointer self, const gate_ptr& gate,
                            const std::shared_ptr<node_answers>& inbox, Start start) {
  auto rp = self->make_response_promise<T>();
  auto me = caf::actor_cast<node_answerer_actor>(self);
  auto deliver = [me, inbox, rp](caf::expected<T> r) {
    post_job(*inbox, me, node_answer{[rp, r = std::move(r)]() mutable {
               if (r) rp.deliver(std::move(*r));
               else rp.deliver(std::move(r.error()));
             }});
  };
  auto started = gate->with<bool>([&](runtime& rt) {
    start(rt, deliver);
    return true;
  });
  if (!started) rp.deliver(std::move(started.error()));
  return rp;
}

node_answerer_actor::behavior_type node_answerer(node_answerer_actor::pointer self, gate_ptr gate) {
  auto inbox = std::make_shared<node_answers>();
  close_on_exit(self, inbox);
  return {
    [self, gate, inbox](atom::snapshot) {
      return answer_later<json_value>(self, gate, inbox, [](runtime& rt, auto deliver) {
        rt.snapshot_async([deliver](nlohmann::json j) { deliver(json_value{std::move(j)}); });
      });
    },
    [self, gate, inbox](atom::restart, const std::string& server) {
      return answer_later<std::vector<restart_result>>(
        self, gate, inbox, [&server](runtime& rt, auto deliver) { rt.restart_async(server, deliver); });
    },
    [self, gate, inbox](atom::close, const std::string& id) {
      return answer_later<bool>(self, gate, inbox, [&id](runtime& rt, auto deliver) {
        rt.close_session_async(id, [deliver] { deliver(true); });
      });
    },
    [self, gate, inbox](atom::authorize, const std::string& server, uint64_t callback_ms, uint64_t url_ms) {
      authorize_options o;
      // Never a browser command from a host: the node would run it.
      o.callback_timeout = std::chrono::milliseconds(std::min<uint64_t>(callback_ms, 3'600'000));
      o.url_timeout = std::chrono::milliseconds(std::min<uint64_t>(url_ms, 600'000));
      return answer_later<std::string>(self, gate, inbox,
                                       [&server, &o](runtime& rt, auto deliver) { rt.authorize_async(server, o, deliver); });
    },
    [self, gate, inbox](atom::forget, const std::string& server) {
      return answer_later<bool>(self, gate, inbox, [&server](runtime& rt, auto deliver) {
        rt.forget_authorization_async(server, deliver);
      });
    },
    [inbox](atom::run) {
      for (auto& answer : inbox->take())
        answer();
    },
  };
}

struct workspace_node_state {
  static inline const char* name = "mcprt.workspace_node";
  gate_ptr gate;
  // The node's own actors: they never leave this process.
  event_bus_actor bus;
  gating_actor gating;
  watcher_actor watcher;
  call_broker_actor calls;
  node_answerer_actor answerer;
  std::map<caf::actor_addr, host_entry> hosts;
  std::map<std::string, node_session> sessions;
};

using node_self = workspace_node_actor::stateful_pointer<workspace_node_state>;

template <class T>
caf::result<T> as_result(caf::expected<T> x) {
  if (x) return std::move(*x);
  return std::move(x.error());
}

std::string host_label(const caf::node_id& node) {
  return escape_for_display(to_string(node));
}

void watch_host(node_self self, const remote_host_actor& host) {
  if (!host) return;
  auto [it, added] = self->state.hosts.try_emplace(host.address());
  if (added) {
    it->second.actor = host;
    self->monitor(host);
    spdlog::info("remote host {} connected", host_label(host.node()));
  }
}

/// The session `id` when the asking actor's node opened it. Another
/// host's session reads as no session at all.
const node_session* own_session(node_self self, const std::string& id) {
  auto i = self->state.sessions.find(id);
  if (i == self->state.sessions.end()) return nullptr;
  auto& sender = self->current_sender();
  if (!sender || sender->node() != i->second.node) return nullptr;
  return &i->second;
}

/// A host's call waits here at most this long; the host's own deadline
/// (call_options::timeout) is normally shorter, and cancels it.
constexpr std::chrono::milliseconds host_call_timeout = std::chrono::hours(1);

/// A host's call as the node's broker takes it: owned by the host's
/// session (its call ids are its own), counted by the per-server limit like
/// any other. The host's runtime keeps the call's deadline and cancels it
/// here; this one only bounds a call of a host that forgot it.
call_request host_call(const std::string& session, const node_session& s, std::string server, json_value args) {
  call_request r;
  r.owner = session;
  r.session = session;
  r.target = s.reconciler;
  r.server = std::move(server);
  r.arguments = std::move(args);
  r.timeout = host_call_timeout;
  return r;
}

caf::error no_session(const std::string& id) {
  return make_error(errc::unknown_session, "no session " + escape_for_display(id) + " of this host");
}


/// A host's servers as the node runs them: parsed again from their specs
/// as a project's servers, so they need the owner's approval and do not
/// shadow a settings server of the same name.
caf::expected<std::vector<server_config>> host_servers(std::vector<server_config> servers, const std::string& from) {
  if (servers.size() > max_servers_per_session)
    return make_error(errc::bad_request, "a session of a remote host has at most "
                                           + std::to_string(max_servers_per_session) + " servers of its own");
  std::vector<server_config> out;
  out.reserve(servers.size());
  for (auto& cfg : servers) {
    if (auto problem = server_name_problem(cfg.name))
      return make_error(errc::bad_request, "a server of the host has a name the node refuses: " + *problem);
    auto parsed = parse_server_config(cfg.name, cfg.spec, config_scope::project);
    if (!parsed.config)
      return make_error(errc::bad_request, "the host's server " + escape_for_display(cfg.name) + " is not valid: "
                                             + (parsed.error ? parsed.error->message : std::string{"?"}));
    parsed.config->source = from;
    out.push_back(std::move(*parsed.config));
  }
  return out;
}

workspace_info info_of(runtime& rt) {
  auto& o = rt.options();
  workspace_info h;
  h.workspace = o.workspace.string();
  h.profile = o.profile;
  h.version = MCPRT_VERSION;
  h.trusted = o.trusted;
  h.pool = o.pool;
  h.limited = o.budget.has_value();
  h.budget = o.budget.value_or(0);
  h.mode = to_string(o.mode);
  return h;
}

void host_gone(node_self self, const caf::down_msg& dm) {
  auto i = self->state.hosts.find(dm.source);
  if (i == self->state.hosts.end()) return;
  auto entry = std::move(i->second);
  self->state.hosts.erase(i);
  for (auto& sink : entry.sinks)
    self->send(self->state.bus, atom::unsubscribe_v, caf::actor_cast<event_subscriber_actor>(sink));
  std::vector<std::string> ids{entry.sessions.begin(), entry.sessions.end()};
  for (auto& id : ids)
    self->state.sessions.erase(id);
  spdlog::info("remote host {} went away ({}); closing its {} session(s)", host_label(dm.source.node()),
               escape_for_display(to_string(dm.reason)), ids.size());
  (void)self->state.gate->with<bool>([&](runtime& rt) {
    for (auto& id : ids)
      rt.close_session_async(id, [] {});
    return true;
  });
}

caf::result<std::string> open_for_host(node_self self, const remote_host_actor& host,
                                       std::vector<server_config>& servers) {
  if (!host) return make_error(errc::bad_request, "a session needs its host's actor");
  auto& sender = self->current_sender();
  if (!sender || sender->node() != host.node())
    return make_error(errc::bad_request, "a host opens sessions for itself only");
  watch_host(self, host);
  auto& entry = self->state.hosts[host.address()];
  if (entry.sessions.size() >= max_sessions_per_host)
    return make_error(errc::bad_request, "a remote host has at most " + std::to_string(max_sessions_per_host)
                                           + " sessions open on the node");
  auto checked = host_servers(std::move(servers), "remote host " + to_string(host.node()));
  if (!checked) return std::move(checked.error());
  std::string id;
  reconciler_actor reconciler;
  auto opened = self->state.gate->with<bool>([&](runtime& rt) {
    id = rt.open_session(std::move(*checked));
    reconciler = runtime_access::session(rt, id);
    return true;
  });
  if (!opened) return std::move(opened.error());
  if (id.empty() || !reconciler) return make_error(errc::unavailable, "the node opened no session");
  entry.sessions.insert(id);
  self->state.sessions[id] = node_session{host.address(), host.node(), reconciler};
  return id;
}

workspace_node_actor::behavior_type workspace_node_behavior(node_self self, gate_ptr gate, event_bus_actor bus,
                                                            gating_actor gating, watcher_actor watcher,
                                                            call_broker_actor calls) {
  auto& st = self->state;
  st.calls = std::move(calls);
  st.answerer = self->spawn<caf::linked>(node_answerer, gate);
  st.gate = gate;
  st.bus = std::move(bus);
  st.gating = std::move(gating);
  st.watcher = std::move(watcher);
  self->set_down_handler([self](caf::down_msg& dm) { host_gone(self, dm); });
  return {
    [self](atom::hello, remote_host_actor host) -> caf::result<workspace_info> {
      auto& sender = self->current_sender();
      if (!host || !sender || sender->node() != host.node())
        return make_error(errc::bad_request, "a host says hello for itself only");
      watch_host(self, host);
      return as_result(self->state.gate->with<workspace_info>(info_of));
    },
    [self](atom::open, remote_host_actor host, std::vector<server_config>& servers) -> caf::result<std::string> {
      return open_for_host(self, host, servers);
    },
    [self](atom::close, std::string& id) -> caf::result<bool> {
      auto* s = own_session(self, id);
      // Only a host's own sessions: the daemon's, other embedders' and
      // other hosts' sessions are not a host's to close.
      if (!s) return false;
      if (auto h = self->state.hosts.find(s->host); h != self->state.hosts.end()) h->second.sessions.erase(id);
      self->state.sessions.erase(id);
      return self->delegate(self->state.answerer, atom::close_v, std::move(id));
    },
    // -- one session's servers --
    [self](atom::call, const std::string& session, std::string& server, std::string& tool, json_value& args,
           const std::string& call_id, progress_sink_actor& sink) -> caf::result<json_value> {
      auto* s = own_session(self, session);
      if (!s) return no_session(session);
      auto r = host_call(session, *s, std::move(server), std::move(args));
      r.tool = std::move(tool);
      r.call_id = call_id;
      r.progress_sink = std::move(sink);
      return self->delegate(self->state.calls, std::move(r));
    },
    [self](atom::cancel, const std::string& session, const std::string& call_id) -> caf::result<bool> {
      auto* s = own_session(self, session);
      if (!s) return false;
      return self->delegate(self->state.calls, atom::cancel_v, session, call_id);
    },
    [self](atom::mcp_request, const std::string& session, std::string& server, std::string& method,
           json_value& params) -> caf::result<json_value> {
      auto* s = own_session(self, session);
      if (!s) return no_session(session);
      auto r = host_call(session, *s, std::move(server), std::move(params));
      r.method = std::move(method);
      return self->delegate(self->state.calls, std::move(r));
    },
    [self](atom::tools, const std::string& session, std::string& server) -> caf::result<std::vector<tool_info>> {
      auto* s = own_session(self, session);
      if (!s) return no_session(session);
      return self->delegate(s->reconciler, atom::tools_v, std::move(server));
    },
    [self](atom::info, const std::string& session, std::string& server) -> caf::result<connection_info> {
      auto* s = own_session(self, session);
      if (!s) return no_session(session);
      return self->delegate(s->reconciler, atom::info_v, std::move(server));
    },
    [self](atom::snapshot, const std::string& session) -> caf::result<session_snapshot> {
      auto* s = own_session(self, session);
      if (!s) return no_session(session);
      return self->delegate(s->reconciler, atom::snapshot_v);
    },
    // -- the workspace --
    [self](atom::snapshot) -> caf::result<json_value> {
      return self->delegate(self->state.answerer, atom::snapshot_v);
    },
    [self](atom::gating) -> caf::result<gating_snapshot> {
      return self->delegate(self->state.gating, atom::snapshot_v);
    },
    [self](atom::reload) -> caf::result<bool> { return self->delegate(self->state.watcher, atom::reload_v); },
    [self](atom::approve, std::string& server) -> caf::result<bool> {
      return self->delegate(self->state.gating, atom::approve_v, std::move(server));
    },
    [self](atom::reject, std::string& server) -> caf::result<bool> {
      return self->delegate(self->state.gating, atom::reject_v, std::move(server));
    },
    [self](atom::reason, std::string& server) -> caf::result<unavailability> {
      return self->delegate(self->state.gating, atom::reason_v, std::move(server));
    },
    [self](atom::restart, std::string& server) -> caf::result<std::vector<restart_result>> {
      return self->delegate(self->state.answerer, atom::restart_v, std::move(server));
    },
    [self](atom::authorize, std::string& server, uint64_t callback_ms, uint64_t url_ms) -> caf::result<std::string> {
      return self->delegate(self->state.answerer, atom::authorize_v, std::move(server), callback_ms, url_ms);
    },
    [self](atom::forget, std::string& server) -> caf::result<bool> {
      return self->delegate(self->state.answerer, atom::forget_v, std::move(server));
    },
    [self](atom::shown_id, const std::string& id) -> caf::result<std::string> {
      return as_result(self->state.gate->with<std::string>([&](runtime& rt) { return rt.shown_connection_id(id); }));
    },
    // -- events --
    [self](atom::subscribe, event_subscriber_actor& sink, std::vector<event_kind>& kinds) -> caf::result<uint64_t> {
      auto& sender = self->current_sender();
      if (!sink || !sender || sink.node() != sender->node())
        return make_error(errc::bad_request, "a host subscribes its own sinks only");
      auto h = std::find_if(self->state.hosts.begin(), self->state.hosts.end(),
                            [&](const auto& x) { return x.first.node() == sink.node(); });
      if (h == self->state.hosts.end()) return make_error(errc::bad_request, "say hello first");
      if (!h->second.sinks.count(sink.address()) && h->second.sinks.size() >= max_sinks_per_host)
        return make_error(errc::bad_request, "a remote host has at most " + std::to_string(max_sinks_per_host)
                                               + " event subscriptions");
      h->second.sinks.insert(sink.address());
      return self->delegate(self->state.bus, atom::subscribe_v, std::move(sink), std::move(kinds));
    },
    [self](atom::unsubscribe, event_subscriber_actor& sink) {
      auto& sender = self->current_sender();
      if (!sink || !sender || sink.node() != sender->node()) return;
      for (auto& [addr, h] : self->state.hosts)
        if (h.sinks.erase(sink.address()) > 0) {
          self->send(self->state.bus, atom::unsubscribe_v, std::move(sink));
          return;
        }
    },
    [self](atom::replay, uint64_t after) -> caf::result<std::vector<event>> {
      return self->delegate(self->state.bus, atom::replay_v, after);
    },
  };
}

} // namespace

workspace_node::workspace_node(caf::actor_system& sys, runtime& rt) : gate_(std::make_shared<runtime_gate>()) {
  gate_->rt = &rt;
  actor_ = sys.spawn(workspace_node_behavior, gate_, runtime_access::bus(rt), runtime_access::gating(rt), runtime_access::watcher(rt), runtime_access::calls(rt));
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
