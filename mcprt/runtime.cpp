#include "mcprt/runtime.hpp"

#include <condition_variable>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <mutex>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include "actors/budget.hpp"
#include "actors/call_broker.hpp"
#include "messages/workspace_snapshot.hpp"
#include "actors/fleet_link.hpp"
#include "core/http_url.hpp"
#include "actors/connection.hpp"
#include "actors/event_bus.hpp"
#include "actors/gating.hpp"
#include "actors/reconciler.hpp"
#include "actors/watcher.hpp"
#include "core/approvals_store.hpp"
#include "core/input_store.hpp"
#include "core/oauth_token_store.hpp"
#include "core/mcp_session.hpp"
#include "core/event_payload.hpp"
#include "core/fingerprint_key.hpp"
#include "core/runtime_mode.hpp"
#include "core/untrusted_text.hpp"
#include "core/settings.hpp"
#include "io/http_transport.hpp"
#include "io/openssl_error_queue.hpp"
#include "io/reactor.hpp"
#include "mcprt/host_bridge.hpp"
#include "mcprt/oauth_broker.hpp"
#include "mcprt/remote_link.hpp"
#include "mcprt/runtime_access.hpp"
#include "mcprt/version.hpp"
#include "pool/pool_supervisor.hpp"
#include "pool/private_pool.hpp"

namespace mcprt {

/// Work for the runtime's asker, the one actor the non-blocking operations
/// issue their requests from: it runs on the asker's thread, as the asker.
using runtime_asker_job = std::function<void(caf::event_based_actor*)>;
using asker_inbox = job_inbox<runtime_asker_job>;

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Turns the client_update of every connection into a bus event: the one
/// place connection status reaches subscribers, whichever session or pool
/// entry the connection serves. The bus makes the payload safe; a failure
/// here costs one event, never the forwarder.
event_sink_actor::behavior_type update_forwarder(event_sink_actor::pointer self, event_bus_actor bus) {
  return {
    [self, bus](const client_update& u) {
      try {
        publish(self, bus, events::of(u));
      } catch (...) {
      }
    },
  };
}

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

struct forwarding_state {
  static inline const char* name = "mcprt.event_forwarding";
  std::shared_ptr<forwarder_cell> cell;
  event_bus_actor bus;
  std::map<caf::actor_addr, connection_actor> connections;
};

/// Supervises the event forwarder: knows every live connection (the factory
/// announces each), and when the forwarder dies starts a new one and
/// subscribes every connection to it. Monitoring, not linking: a forwarder
/// killed with exit_reason::kill would take a linked supervisor along.
caf::behavior event_forwarding(caf::stateful_actor<forwarding_state>* self, std::shared_ptr<forwarder_cell> cell,
                               event_bus_actor bus) {
  self->state.cell = cell;
  self->state.bus = bus;
  self->monitor(cell->get().first);
  self->monitor(bus);
  // The forwarder goes with its supervisor (at shutdown).
  self->attach_functor([cell](const caf::error&) {
    caf::anon_send_exit(cell->get().first, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == st.cell->get().first.address()) {
      spdlog::warn("event forwarder stopped ({}); starting a new one", escape_for_display(to_string(dm.reason)));
      auto next = self->system().spawn(update_forwarder, st.bus);
      st.cell->set(next);
      self->monitor(next);
      for (auto& [addr, c] : st.connections)
        self->send(c, atom::subscribe_v, next);
    } else if (dm.source == st.bus.address()) {
      spdlog::error("the event bus stopped ({}); no more events are published",
                    escape_for_display(to_string(dm.reason)));
    } else {
      st.connections.erase(dm.source);
    }
  });
  return {
    [self](atom::attach, connection_actor& c, uint64_t generation) {
      auto& st = self->state;
      self->monitor(c);
      st.connections.emplace(c.address(), c);
      auto [current, now] = st.cell->get();
      // Spawned with a forwarder that has been replaced since.
      if (now != generation) self->send(c, atom::subscribe_v, current);
    },
  };
}

/// Restart results as shown outside the runtime.
void show_restarts(std::vector<restart_result>& rs, const std::function<std::string(const std::string&)>& show_id) {
  for (auto& x : rs) {
    x.id = show_id(x.id);
    x.reason = replace_invalid_utf8(x.reason);
  }
}

caf::behavior runtime_asker(caf::event_based_actor* self, std::shared_ptr<asker_inbox> inbox) {
  close_on_exit(self, inbox);
  return {[self, inbox](atom::run) {
    for (auto& job : inbox->take()) {
      try {
        job(self);
      } catch (const std::exception& e) {
        spdlog::error("runtime: an asker's job failed: {}", escape_for_display(e.what()));
      } catch (...) {
        spdlog::error("runtime: an asker's job failed");
      }
    }
  }};
}

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

} // namespace

/// What a use of CAF's middleman (`what`) needs of the host's actor system.
caf::error check_middleman(caf::actor_system& sys, bool tls, const std::string& what) {
  if (tls && !sys.has_openssl_manager())
    return make_error(errc::io_error, "runtime: " + what + " over TLS needs CAF's OpenSSL manager: "
                                        "mcprt::use_owner_tls(cfg) (mcprt/owner_tls.hpp), or "
                                        "cfg.load<caf::openssl::manager>() with a certificate, key and CA");
  if (tls && !io::clear_openssl_errors_before_io())
    spdlog::warn("runtime: SSL_read is not mcprt's in this program (are library symbols hidden?): a stranger's "
                 "failed TLS handshake can cut the connection of {}",
                 what);
  if (!sys.has_middleman())
    return make_error(errc::io_error, "runtime: " + what + " needs CAF's middleman: "
                                        "cfg.load<caf::io::middleman>() before the actor system starts");
  return caf::none;
}

std::vector<std::string> apply_environment(runtime_options& opts) {
  std::optional<std::string> budget_flag;
  if (opts.budget) budget_flag = std::to_string(*opts.budget);
  std::optional<std::string> mode_flag;
  if (opts.mode != budget_mode::off) mode_flag = to_string(opts.mode);
  auto r = resolve_runtime_mode(std::getenv("MCPRT_NO_POOL"), std::getenv("MCPRT_BUDGET"),
                                std::getenv("MCPRT_BUDGET_MODE"), budget_flag, mode_flag, !opts.pool);
  if (r.errors.empty()) {
    opts.pool = r.mode.pool;
    opts.budget = r.mode.budget;
    opts.mode = r.mode.mode;
  }
  return r.errors;
}

/// A remote runtime's link to its node (runtime::connect).
struct remote_state {
  std::string address; // HOST:PORT as the host gave it
  workspace_node_actor node;
  remote_host_actor link;
  /// False once the node went away; set under the call registry's lock, so
  /// that a call either is failed by the loss or sees it when it starts.
  std::atomic<bool> up{true};
  std::mutex mtx;
  std::string reason;
  /// The sinks this host subscribed: each gets the last event.
  std::vector<event_subscriber_actor> sinks;

  caf::error gone() {
    std::lock_guard<std::mutex> guard{mtx};
    return make_error(errc::disconnected, "the workspace node at " + address + " went away (" + reason +
                                            "): runtime::connect again once it is back");
  }
};

struct runtime::impl {
  caf::actor_system& sys;
  runtime_options opts;
  std::unique_ptr<io::reactor> reactor;
  std::unique_ptr<io::http_client> http;
  // Before the actors in destruction order: connections hold its clients.
  std::shared_ptr<oauth_broker> oauth;
  event_bus_actor bus;
  std::shared_ptr<forwarder_cell> forwarders = std::make_shared<forwarder_cell>();
  caf::actor forwarding; // supervises the forwarder
  std::function<std::string(const std::string&)> show_id;
  budget_actor budget; // workspace budget (pool mode)
  fleet_link_actor fleet; // with --fleet-budget
  pool_actor pool;
  gating_actor gating;
  watcher_actor watcher;
  connection_factory make;
  std::shared_ptr<connection_registry> connections = std::make_shared<connection_registry>();
  call_broker_actor broker; // every call in flight
  std::shared_ptr<call_inbox> host_call_inbox = std::make_shared<call_inbox>();
  caf::actor asker;         // where the non-blocking operations ask from
  std::shared_ptr<asker_inbox> asker_jobs = std::make_shared<asker_inbox>();
  std::shared_ptr<host_call_ids> host_calls = std::make_shared<host_call_ids>();
  // Requests for the host: null without host handlers.
  std::unique_ptr<host_bridge> host;
  // Set: the workspace is a remote node's; bus, gating, watcher and the
  // sessions' reconcilers are local views of its facade (remote_link.hpp),
  // and there is no pool or budget here.
  std::shared_ptr<remote_state> remote;
  // The roots connections started from now on offer (nullopt: none).
  std::shared_ptr<std::pair<std::mutex, std::optional<std::vector<mcp_root>>>> roots =
    std::make_shared<std::pair<std::mutex, std::optional<std::vector<mcp_root>>>>();

  struct session_entry {
    reconciler_actor reconciler;
    budget_actor budget; // kill switch: the session budget
    pool_actor pool;     // kill switch: the session's private pool
  };
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
    if (remote && !remote->up) return remote->gone();
    caf::scoped_actor self{sys};
    caf::expected<R> out{caf::error{}};
    self->request(h, timeout, std::forward<Ts>(xs)...)
      .receive([&](R& x) { out = std::move(x); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }

  /// `ask` without blocking: `done` gets the answer on the asker's thread.
  template <class R, class Handle, class... Ts>
  void ask_async(const Handle& h, caf::timespan timeout, std::function<void(caf::expected<R>)> done, Ts... xs) {
    if (remote && !remote->up) {
      done(remote->gone());
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
                         const std::string& method, json arguments, call_callback done, call_options opts);

  std::optional<session_entry> find_session(const std::string& id) const {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = sessions.find(id);
    if (i == sessions.end()) return std::nullopt;
    return i->second;
  }
};

runtime::runtime(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

namespace {

/// The remote node went away (on the link's thread): every call in flight
/// fails now, later ones fail as they start, and each subscriber gets the
/// last event.
void node_gone(const std::shared_ptr<remote_state>& r, const call_broker_actor& broker, const std::string& why) {
  std::vector<event_subscriber_actor> sinks;
  {
    std::lock_guard<std::mutex> guard{r->mtx};
    r->reason = why;
    sinks = r->sinks;
    r->up = false;
  }
  spdlog::warn("runtime: the workspace node at {} went away ({})", escape_for_display(r->address),
               escape_for_display(why));
  // Every call in flight fails now, and every later one as it comes.
  caf::anon_send(broker, atom::drain_v, r->gone());
  event ev;
  ev.kind = event_kind::disconnected;
  ev.payload = events::disconnected{r->address, why};
  ev.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  json data;
  events::to_json(data, ev.payload);
  make_payload_safe(data);
  ev.data.value = std::move(data);
  for (auto& sink : sinks)
    caf::anon_send(sink, ev);
}

} // namespace

caf::expected<std::unique_ptr<runtime>> runtime::connect(caf::actor_system& sys, const std::string& host,
                                                         uint16_t port, connect_options co) {
  auto address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (auto err = check_middleman(sys, co.tls, "runtime::connect")) return err;
  auto mm = co.tls ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  caf::scoped_actor self{sys};
  workspace_node_actor node;
  caf::error err;
  self->request(mm, co.timeout, caf::connect_atom::value, host, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
        if (!ptr)
          err = make_error(errc::not_connected, "no actor is published at " + address);
        else if (!sys.assignable<workspace_node_actor>(ifs))
          err = make_error(errc::protocol_error,
                           address + " is not an mcprt workspace node (mcprt serve --caf-port)");
        else
          node = caf::actor_cast<workspace_node_actor>(std::move(ptr));
      },
      [&](caf::error& e) { err = make_error(errc::not_connected, "cannot connect to " + address + ": " + sys.render(e)); });
  if (!node) return err;
  auto p = std::make_unique<impl>(sys);
  auto r = std::make_shared<remote_state>();
  r->address = address;
  r->node = node;
  p->remote = r;
  // Weak: the link actor lives as long as its handle in `r`, and a strong
  // reference back would keep both alive forever.
  p->broker = spawn_call_broker(sys, runtime_options{}.max_calls_per_server, event_bus_actor{}, p->host_call_inbox, node);
  p->asker = sys.spawn(runtime_asker, p->asker_jobs);
  r->link = spawn_remote_link(sys, node, [weak = std::weak_ptr<remote_state>(r), broker = p->broker](const std::string& why) {
    if (auto r = weak.lock()) node_gone(r, broker, why);
  });
  caf::expected<workspace_info> h{caf::error{}};
  self->request(node, co.timeout, atom::hello_v, r->link)
    .receive([&](workspace_info& x) { h = std::move(x); }, [&](caf::error& e) { h = std::move(e); });
  if (!h) {
    caf::anon_send_exit(r->link, caf::exit_reason::user_shutdown);
    return make_error(errc::not_connected, address + " did not answer: " + sys.render(h.error()));
  }
  auto& o = p->opts;
  o.workspace = h->workspace;
  o.profile = h->profile;
  o.trusted = h->trusted;
  o.pool = h->pool;
  if (h->limited) o.budget = h->budget;
  o.mode = parse_budget_mode(h->mode).value_or(budget_mode::off);
  o.watch = false; // the node watches
  // The node hands out no actor of its own: the runtime's actors here are
  // local views of its facade. No pool or budget: those stay the node's.
  p->bus = spawn_remote_bus(sys, node);
  p->gating = spawn_remote_gating(sys, node);
  p->watcher = spawn_remote_watcher(sys, node);
  p->show_id = [&sys, r](const std::string& id) -> std::string {
    if (!r->up) return {};
    caf::scoped_actor asker{sys};
    std::string out;
    asker->request(r->node, std::chrono::seconds(10), atom::shown_id_v, id)
      .receive([&](std::string& x) { out = std::move(x); }, [](caf::error&) {});
    return out;
  };
  spdlog::info("runtime: connected to the workspace node at {} ({}, mcprt {})", escape_for_display(address),
               escape_for_display(h->workspace), escape_for_display(h->version));
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

bool runtime::remote() const {
  return impl_->remote != nullptr;
}

bool runtime::connected() const {
  return !impl_->remote || impl_->remote->up;
}

runtime::~runtime() {
  shutdown();
}

caf::expected<std::unique_ptr<runtime>> runtime::start(caf::actor_system& sys, runtime_options opts) {
  if (opts.workspace.empty()) return make_error(errc::io_error, "runtime: no workspace folder given");
  std::error_code ec;
  opts.workspace = fs::absolute(opts.workspace, ec).lexically_normal();
  if (opts.home.empty()) {
    std::string no_home;
    auto home = resolve_home({}, std::getenv("HOME"), &no_home);
    if (!home) return make_error(errc::io_error, "runtime: " + no_home);
    opts.home = *home;
  }
  auto prof = profile::parse(opts.profile);
  if (!prof) return make_error(errc::io_error, "runtime: unknown profile '" + opts.profile + "' (mcprt, qwen or gemini)");
  if (opts.mode == budget_mode::enforce && !opts.budget)
    return make_error(errc::io_error, "runtime: budget mode enforce needs a budget");
  std::optional<host_port> fleet_address;
  if (opts.fleet_budget) {
    if (!opts.pool) return make_error(errc::io_error, "runtime: a fleet budget needs the pool (not with MCPRT_NO_POOL)");
    fleet_address = parse_host_port(*opts.fleet_budget);
    if (!fleet_address)
      return make_error(errc::io_error, "runtime: fleet budget: expected HOST:PORT, got '" +
                                          escape_for_display(*opts.fleet_budget) + "'");
    if (auto err = check_middleman(sys, opts.fleet_tls, "a fleet budget")) return err;
  }
  if (opts.approvals_file.empty()) opts.approvals_file = approvals_store::default_path(opts.home, prof->dir_name);
  if (opts.inputs_file.empty()) opts.inputs_file = input_store::default_path(opts.home, prof->dir_name);
  if (opts.oauth_file.empty()) opts.oauth_file = oauth_token_store::default_path(opts.home, prof->dir_name);
  if (opts.fingerprint_key_file.empty())
    opts.fingerprint_key_file = default_fingerprint_key_path(opts.home, prof->dir_name);
  auto key = load_or_create_fingerprint_key(opts.fingerprint_key_file);
  if (key.outcome == fingerprint_key_result::status::refused) return make_error(errc::io_error, "runtime: " + key.error);
  if (!key.ok())
    spdlog::warn("{}; the fingerprints shown hold for this run only", escape_for_display(key.error));

  auto p = std::make_unique<impl>(sys);
  p->opts = opts;
  p->show_id = [k = key.ok() ? *key.key : random_fingerprint_key()](const std::string& id) {
    return keyed_connection_id(id, k);
  };
  try {
    io::reactor_options ro;
    // The reaper process dying takes every stdio server with it: say so.
    ro.on_warning = [](const std::string& what) { spdlog::warn("{}", what); };
    p->reactor = std::make_unique<io::reactor>(std::move(ro));
    p->http = std::make_unique<io::http_client>();
  } catch (const std::exception& e) {
    return make_error(errc::io_error, std::string{"runtime: cannot start the I/O threads: "} + e.what());
  }
  event_bus_options bo;
  bo.replay_capacity = std::max<std::size_t>(1, opts.event_history);
  bo.show_connection_id = p->show_id;
  p->bus = spawn_event_bus(sys, std::move(bo));
  p->broker = spawn_call_broker(sys, opts.max_calls_per_server, p->bus, p->host_call_inbox);
  p->asker = sys.spawn(runtime_asker, p->asker_jobs);
  p->forwarders->set(sys.spawn(update_forwarder, p->bus));
  p->forwarding = sys.spawn(event_forwarding, p->forwarders, p->bus);
  p->oauth = std::make_shared<oauth_broker>(opts.oauth_file, p->http.get());
  connection_io io{p->reactor.get(), p->http.get(),
                   [broker = std::weak_ptr<oauth_broker>(p->oauth)](const server_config& s) -> std::shared_ptr<io::http_auth> {
                     auto b = broker.lock();
                     return b ? b->client_for(s) : nullptr;
                   }};
  if (opts.roots) {
    p->roots->second = opts.roots;
  } else if (opts.workspace_root) {
    // Canonical, so a server comparing paths it resolves itself agrees.
    auto canonical = fs::canonical(opts.workspace, ec);
    p->roots->second = std::vector<mcp_root>{root_for_folder((ec ? opts.workspace : canonical).string())};
  }
  host_handler_actor host;
  if (opts.host.answers_sampling() || opts.host.answers_elicitation()) {
    // A request is attributed to a call of the runtime when exactly one
    // call to that server and tool is in flight.
    p->host = std::make_unique<host_bridge>(sys, opts.host, p->broker);
    host = p->host->actor();
  }
  // Without a host handler for it, `ask` has nobody to ask.
  bool can_ask = opts.host.answers_elicitation();
  bool can_sample = opts.host.answers_sampling();
  p->make = [io, cell = p->forwarders, supervisor = p->forwarding, roots = p->roots, default_elicitation = opts.elicitation,
             can_ask, can_sample, host, registry = p->connections, bus = p->bus](caf::actor_system& s,
                                                                              connection_config cc) {
    cc.bus = bus;
    // Sessions sharing a connection filter its tools each on their own.
    cc.server.include_tools.reset();
    cc.server.exclude_tools.reset();
    cc.features = client_features{};
    {
      std::lock_guard<std::mutex> guard{roots->first};
      cc.features.roots = roots->second;
    }
    cc.features.elicitation = cc.server.elicitation.value_or(default_elicitation);
    if (cc.features.elicitation == elicitation_policy::ask && !can_ask)
      cc.features.elicitation = elicitation_policy::decline;
    cc.features.sampling = can_sample;
    cc.host = host;
    auto [forwarder, generation] = cell->get();
    cc.subscribers.push_back(forwarder);
    auto c = spawn_connection(s, std::move(cc), io);
    registry->add(c);
    caf::anon_send(supervisor, atom::attach_v, c, generation);
    return c;
  };
  if (opts.pool) {
    if (fleet_address) {
      fleet_link_options fo;
      fo.host = fleet_address->host;
      fo.port = fleet_address->port;
      fo.node = make_fleet_node_id();
      fo.tls = opts.fleet_tls;
      p->fleet = spawn_fleet_link(sys, std::move(fo));
    }
    if (opts.mode != budget_mode::off || p->fleet)
      p->budget = spawn_budget(sys, opts.budget, opts.mode, "workspace", p->bus, p->fleet);
    pool_options po;
    po.table.drain_delay = opts.drain_delay;
    po.table.show_id = p->show_id;
    p->pool = spawn_pool(sys, p->make, p->budget, p->bus, po);
  }
  gating_options go;
  go.workspace.workspace = opts.workspace;
  go.workspace.home = opts.home;
  go.workspace.settings_profile = *prof;
  go.workspace.mcp_config = opts.mcp_config;
  go.workspace.launch_bound = opts.allowed_server_names;
  go.workspace.trusted = opts.trusted;
  go.approvals_file = opts.approvals_file;
  go.inputs_file = opts.inputs_file;
  go.watch_approvals = opts.watch;
  go.debounce = opts.debounce;
  p->gating = spawn_gating(sys, go, p->bus);
  watcher_options wo;
  for (auto& s : settings_sources(opts.home, opts.workspace, *prof))
    wo.files.push_back({s.scope, s.path, s.format});
  wo.debounce = opts.debounce;
  wo.use_inotify = opts.watch;
  p->watcher = spawn_watcher(sys, wo, p->gating, p->bus);
  // The first reading reaches the gating actor before any session attaches.
  auto first = p->ask<bool>(p->watcher, std::chrono::seconds(30), atom::reload_v);
  if (!first) {
    auto err = std::move(first.error());
    // Everything above runs already: a runtime of it stops it on the way out.
    runtime started(std::move(p));
    started.shutdown();
    return err;
  }
  caf::anon_send(p->gating, atom::start_v);
  return std::unique_ptr<runtime>(new runtime(std::move(p)));
}

std::string runtime::open_session(std::vector<server_config> servers) {
  std::promise<std::string> answer;
  auto result = answer.get_future();
  open_session_async(std::move(servers), [&answer](std::string id) { answer.set_value(std::move(id)); });
  return result.get();
}

void runtime::open_session_async(std::vector<server_config> servers, std::function<void(std::string)> done) {
  auto& p = *impl_;
  if (p.remote) {
    auto remote = p.remote;
    p.ask_async<std::string>(
      remote->node, std::chrono::seconds(30),
      [&p, remote, done = std::move(done)](caf::expected<std::string> id) {
        if (!id || id->empty()) {
          if (!id)
            spdlog::warn("runtime: the node at {} opened no session: {}", escape_for_display(remote->address),
                         escape_for_display(p.sys.render(id.error())));
          done({});
          return;
        }
        impl::session_entry entry;
        entry.reconciler = spawn_remote_session(p.sys, remote->node, *id);
        {
          std::lock_guard<std::mutex> guard{p.mtx};
          p.sessions.emplace(*id, entry);
          p.order.push_back(*id);
        }
        done(std::move(*id));
      },
      atom::open_v, remote->link, std::move(servers));
    return;
  }
  session_id number = 0;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    number = p.next_session++;
  }
  auto id = "s" + std::to_string(number);
  reconciler_options ro;
  ro.session = id;
  ro.pool_session = number;
  ro.bus = p.bus;
  impl::session_entry entry;
  if (p.opts.pool) {
    ro.pool = p.pool;
    ro.budget = p.budget;
  } else {
    if (p.opts.mode != budget_mode::off)
      entry.budget = spawn_budget(p.sys, p.opts.budget, p.opts.mode, "session", p.bus);
    ro.budget = entry.budget;
    entry.pool = spawn_private_pool(p.sys, p.make, entry.budget);
    ro.pool = entry.pool;
  }
  entry.reconciler = spawn_reconciler(p.sys, ro);
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    p.sessions.emplace(id, entry);
    p.order.push_back(id);
  }
  caf::anon_send(p.gating, atom::attach_v, entry.reconciler, std::move(servers));
  done(std::move(id));
}

void runtime::close_session(const std::string& session) {
  std::promise<void> closed;
  auto result = closed.get_future();
  close_session_async(session, [&closed] { closed.set_value(); });
  result.get();
}

void runtime::close_session_async(const std::string& session, std::function<void()> done) {
  auto& p = *impl_;
  auto s = p.find_session(session);
  if (!s) {
    done();
    return;
  }
  // Out of the books first: a second close finds nothing to do.
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    p.sessions.erase(session);
    p.order.erase(std::remove(p.order.begin(), p.order.end(), session), p.order.end());
  }
  auto once = [done = std::move(done)](caf::expected<bool>) { done(); };
  if (p.remote) {
    // The node closes it; a node that went away closed it already.
    caf::anon_send_exit(s->reconciler, caf::exit_reason::user_shutdown);
    p.ask_async<bool>(p.remote->node, std::chrono::seconds(30), std::move(once), atom::close_v, session);
    return;
  }
  caf::anon_send(p.gating, atom::detach_v, s->reconciler);
  p.ask_async<bool>(
    s->reconciler, std::chrono::seconds(30),
    [entry = *s, once = std::move(once)](caf::expected<bool> r) {
      if (entry.pool) caf::anon_send_exit(entry.pool, caf::exit_reason::user_shutdown);
      if (entry.budget) caf::anon_send_exit(entry.budget, caf::exit_reason::user_shutdown);
      once(std::move(r));
    },
    atom::stop_v);
}

void runtime::unavailable_reason_async(const std::string& server, result_callback<unavailability> done) {
  impl_->ask_async<unavailability>(impl_->gating, std::chrono::seconds(10), std::move(done), atom::reason_v, server);
}

caf::expected<json> runtime::call_tool(const std::string& session, const std::string& server,
                                       const std::string& tool, json arguments, std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<std::promise<caf::expected<json>>>();
  auto result = answer->get_future();
  call_options opts;
  opts.timeout = timeout;
  call_tool_async(
    session, server, tool, std::move(arguments),
    [answer](caf::expected<json> r) { answer->set_value(std::move(r)); }, opts);
  return result.get();
}

std::string runtime::call_tool_async(const std::string& session, const std::string& server, const std::string& tool,
                                     json arguments, call_callback done, call_options opts) {
  return impl_->start_call(session, server, tool, {}, std::move(arguments), std::move(done), std::move(opts));
}

// -- progress and cancel of tool calls ----------------------------------

std::string runtime::wire_id(const std::string& call_id) const {
  return impl_->host_calls->contains(call_id) ? call_id : std::string{};
}

bool runtime::cancel_call(const std::string& call_id) {
  if (!impl_->host_calls->contains(call_id)) return false;
  caf::anon_send(impl_->broker, atom::cancel_v, std::string{}, call_id);
  return true;
}

std::string runtime::impl::start_call(const std::string& session, const std::string& server, const std::string& tool,
                                      const std::string& method, json arguments, call_callback done,
                                      call_options opts) {
  auto& p = *this;
  std::string call_id = opts.call_id;
  if (!call_id.empty() && !is_valid_call_id(call_id)) {
    done(make_error(errc::bad_request, "a call id is 1 to 128 ASCII letters, digits, '-', '_', '.' or ':'"));
    return call_id;
  }
  auto s = p.find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return call_id;
  }
  if (p.remote && !p.remote->up) {
    done(p.remote->gone());
    return call_id;
  }
  bool tool_call = method.empty();
  if (tool_call) {
    // The id is known before anything goes out: the caller's, or the next
    // "call-N". The broker refuses it too if taken; here the caller hears
    // at once, and `cancel_call` can answer without asking the broker.
    std::lock_guard<std::mutex> guard{p.host_calls->mtx};
    if (call_id.empty()) {
      do
        call_id = "call-" + std::to_string(p.host_calls->next++);
      while (p.host_calls->live.count(call_id));
    } else if (p.host_calls->live.count(call_id)) {
      done(make_error(errc::bad_request, "a call with id " + call_id + " is already in flight"));
      return call_id;
    }
    p.host_calls->live.insert(call_id);
  }
  auto answer = [done = std::move(done), ids = std::weak_ptr<host_call_ids>(p.host_calls), call_id,
                 tool_call](caf::expected<json> r) {
    if (tool_call)
      if (auto i = ids.lock()) i->erase(call_id);
    done(std::move(r));
  };
  call_delivery::progress_fn progress;
  if (tool_call) progress = std::move(opts.progress);
  auto delivery = std::make_shared<call_delivery>(std::move(answer), std::move(progress), server);
  call_request r;
  r.session = session;
  r.target = s->reconciler;
  r.server = server;
  r.tool = tool;
  r.method = method;
  r.arguments = json_value{std::move(arguments)};
  r.call_id = tool_call ? call_id : std::string{};
  r.timeout = opts.timeout;
  r.wait_connecting = opts.wait_connecting;
  r.progress_events = tool_call && opts.progress_events;
  if (tool_call && opts.on_wire) opts.on_wire(call_id);
  post_job(*p.host_call_inbox, p.broker, host_call{std::move(r), std::move(delivery)});
  return call_id;
}

caf::expected<std::vector<tool_info>> runtime::tools(const std::string& session, const std::string& server) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<std::vector<tool_info>>(s->reconciler, std::chrono::seconds(30), atom::tools_v, server);
}

caf::expected<connection_info> runtime::server_info(const std::string& session, const std::string& server) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<connection_info>(s->reconciler, std::chrono::seconds(30), atom::info_v, server);
}

void runtime::gating_state_async(result_callback<gating_snapshot> done) {
  impl_->ask_async<gating_snapshot>(impl_->gating, std::chrono::seconds(10), std::move(done), atom::snapshot_v);
}

void runtime::session_state_async(const std::string& session, result_callback<session_snapshot> done) {
  auto s = impl_->find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return;
  }
  impl_->ask_async<session_snapshot>(s->reconciler, std::chrono::seconds(30), std::move(done), atom::snapshot_v);
}

void runtime::server_info_async(const std::string& session, const std::string& server,
                                result_callback<connection_info> done) {
  auto s = impl_->find_session(session);
  if (!s) {
    done(make_error(errc::unknown_session, "no session " + session));
    return;
  }
  impl_->ask_async<connection_info>(s->reconciler, std::chrono::seconds(30), std::move(done), atom::info_v, server);
}

caf::expected<gating_snapshot> runtime::gating_state() {
  return impl_->ask<gating_snapshot>(impl_->gating, std::chrono::seconds(10), atom::snapshot_v);
}

caf::expected<session_snapshot> runtime::session_state(const std::string& session) {
  auto s = impl_->find_session(session);
  if (!s) return make_error(errc::unknown_session, "no session " + session);
  return impl_->ask<session_snapshot>(s->reconciler, std::chrono::seconds(30), atom::snapshot_v);
}

caf::expected<uint64_t> runtime::subscribe(event_subscriber_actor sink, std::vector<event_kind> kinds) {
  auto r = impl_->ask<uint64_t>(impl_->bus, std::chrono::seconds(10), atom::subscribe_v, sink, std::move(kinds));
  if (r && impl_->remote) {
    std::lock_guard<std::mutex> guard{impl_->remote->mtx};
    impl_->remote->sinks.push_back(std::move(sink));
  }
  return r;
}

void runtime::unsubscribe(event_subscriber_actor sink) {
  if (auto& r = impl_->remote) {
    std::lock_guard<std::mutex> guard{r->mtx};
    r->sinks.erase(std::remove(r->sinks.begin(), r->sinks.end(), sink), r->sinks.end());
  }
  caf::anon_send(impl_->bus, atom::unsubscribe_v, std::move(sink));
}

std::vector<event> runtime::replay(uint64_t after) {
  auto r = impl_->ask<std::vector<event>>(impl_->bus, std::chrono::seconds(10), atom::replay_v, after);
  return r ? std::move(*r) : std::vector<event>{};
}

nlohmann::json runtime::snapshot() {
  std::promise<json> answer;
  auto result = answer.get_future();
  snapshot_async([&answer](json j) { answer.set_value(std::move(j)); });
  return result.get();
}

void runtime::snapshot_async(std::function<void(json)> done) {
  auto& p = *impl_;
  auto timeout = std::chrono::seconds(10);
  if (p.remote) {
    p.ask_async<json_value>(
      p.remote->node, timeout,
      [done = std::move(done), address = p.remote->address, &sys = p.sys](caf::expected<json_value> r) {
        if (r) done(std::move(r->value));
        else done(json{{"v", 1}, {"node", address}, {"error", sys.render(r.error())}});
      },
      atom::snapshot_v);
    return;
  }
  if (p.has_stopped()) {
    done(json{{"v", 1}, {"error", "the runtime stopped"}});
    return;
  }
  // The parts come from their actors at once; the last answer (or
  // failure) assembles the snapshot, on the asker's thread.
  struct gathering {
    snapshot_parts parts;
    std::vector<std::optional<budget_snapshot>> budgets;
    int pending = 1;
  };
  auto g = std::make_shared<gathering>();
  g->parts.version = MCPRT_VERSION;
  g->parts.workspace = p.opts.workspace.string();
  g->parts.trusted = p.opts.trusted;
  g->parts.capabilities = capabilities();
  reconciler_actor first;
  std::vector<budget_actor> budgets;
  if (p.budget) budgets.push_back(p.budget);
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (!p.order.empty()) first = p.sessions.at(p.order.front()).reconciler;
    for (auto& [id, s] : p.sessions)
      if (s.budget) budgets.push_back(s.budget);
  }
  g->budgets.resize(budgets.size());
  answer_once<json> once{std::move(done), [] { return json{{"v", 1}, {"error", "the runtime stopped"}}; }};
  auto settle = [g, once, show_id = p.show_id] {
    if (--g->pending > 0) return;
    for (auto& b : g->budgets)
      if (b) g->parts.budgets.push_back(std::move(*b));
    json out = assemble(std::move(g->parts), show_id);
    once(std::move(out));
  };
  post_job(*p.asker_jobs, p.asker, runtime_asker_job{[=, gating = p.gating, pool = p.pool,
                                                      fleet = p.fleet](caf::event_based_actor* self) {
    auto skip = [settle](caf::error&) { settle(); };
    ++g->pending;
    self->request(gating, timeout, atom::snapshot_v).then([g, settle](gating_snapshot& x) {
      g->parts.gating = std::move(x);
      settle();
    }, skip);
    if (first) {
      ++g->pending;
      self->request(first, timeout, atom::snapshot_v).then([g, settle](session_snapshot& x) {
        g->parts.session = std::move(x);
        settle();
      }, skip);
    }
    if (pool) {
      ++g->pending;
      self->request(pool, timeout, atom::snapshot_v).then([g, settle](pool_snapshot& x) {
        g->parts.pool = std::move(x);
        settle();
      }, skip);
    }
    for (std::size_t i = 0; i < budgets.size(); ++i) {
      ++g->pending;
      self->request(budgets[i], timeout, atom::snapshot_v).then([g, settle, i](budget_snapshot& x) {
        g->budgets[i] = std::move(x);
        settle();
      }, skip);
    }
    if (fleet) {
      ++g->pending;
      self->request(fleet, timeout, atom::snapshot_v).then([g, settle](fleet_status& x) {
        g->parts.fleet = std::move(x);
        settle();
      }, skip);
    }
    settle(); // the one held while the requests went out
  }});
}

void runtime::reload_async(result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->watcher, std::chrono::seconds(30), std::move(done), atom::reload_v);
}

void runtime::approve_async(const std::string& server, result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->gating, std::chrono::seconds(30), std::move(done), atom::approve_v, server);
}

void runtime::reject_async(const std::string& server, result_callback<bool> done) {
  impl_->ask_async<bool>(impl_->gating, std::chrono::seconds(30), std::move(done), atom::reject_v, server);
}

void runtime::restart_async(const std::string& server, result_callback<std::vector<restart_result>> done) {
  auto& p = *impl_;
  if (p.remote) {
    p.ask_async<std::vector<restart_result>>(p.remote->node, std::chrono::seconds(70), std::move(done),
                                             atom::restart_v, server);
    return;
  }
  if (!p.pool) {
    done(make_error(errc::unavailable, "restart needs the pool (MCPRT_NO_POOL is set)"));
    return;
  }
  p.ask_async<std::vector<restart_result>>(
    p.pool, std::chrono::seconds(60),
    [done = std::move(done), show_id = p.show_id](caf::expected<std::vector<restart_result>> r) {
      if (r) show_restarts(*r, show_id);
      done(std::move(r));
    },
    pool_restart{server});
}

void runtime::replay_async(uint64_t after, std::function<void(std::vector<event>)> done) {
  impl_->ask_async<std::vector<event>>(
    impl_->bus, std::chrono::seconds(10),
    [done = std::move(done)](caf::expected<std::vector<event>> r) { done(r ? std::move(*r) : std::vector<event>{}); },
    atom::replay_v, after);
}

caf::expected<bool> runtime::reload() {
  return impl_->ask<bool>(impl_->watcher, std::chrono::seconds(30), atom::reload_v);
}

caf::expected<bool> runtime::approve(const std::string& server) {
  return impl_->ask<bool>(impl_->gating, std::chrono::seconds(30), atom::approve_v, server);
}

caf::expected<bool> runtime::reject(const std::string& server) {
  return impl_->ask<bool>(impl_->gating, std::chrono::seconds(30), atom::reject_v, server);
}

caf::expected<unavailability> runtime::unavailable_reason(const std::string& server) {
  return impl_->ask<unavailability>(impl_->gating, std::chrono::seconds(10), atom::reason_v, server);
}

caf::expected<std::vector<restart_result>> runtime::restart(const std::string& server) {
  if (impl_->remote)
    return impl_->ask<std::vector<restart_result>>(impl_->remote->node, std::chrono::seconds(70), atom::restart_v,
                                                   server);
  if (!impl_->pool) return make_error(errc::unavailable, "restart needs the pool (MCPRT_NO_POOL is set)");
  auto r = impl_->ask<std::vector<restart_result>>(impl_->pool, std::chrono::seconds(60), pool_restart{server});
  if (r) show_restarts(*r, impl_->show_id);
  return r;
}

caf::expected<std::string> runtime::authorize(const std::string& server, authorize_options options) {
  if (impl_->remote) {
    if (!options.browser_command.empty())
      return make_error(errc::bad_request, "a remote workspace node opens no browser: show the URL yourself");
    return impl_->ask<std::string>(impl_->remote->node, options.url_timeout + std::chrono::seconds(5), atom::authorize_v,
                                   server, static_cast<uint64_t>(options.callback_timeout.count()),
                                   static_cast<uint64_t>(options.url_timeout.count()));
  }
  auto cfg = impl_->ask<server_config>(impl_->gating, std::chrono::seconds(10), atom::config_v, server);
  if (!cfg) return cfg.error();
  std::string error;
  // The flow's end comes on its own thread: a success reconciles every
  // session (the server connects with the stored tokens), a failure says
  // why on the bus.
  auto on_end = [bus = impl_->bus, this_rt = this, server](bool ok, const std::string& why) {
    if (ok) {
      spdlog::info("[{}] authorized; connecting", escape_for_display(server));
      (void)this_rt->reload();
    } else {
      spdlog::warn("[{}] authorization failed: {}", escape_for_display(server), escape_for_display(why));
      caf::anon_send(bus, atom::publish_v, event_payload{events::auth_required{server, why, "run mcprt auth " + server}});
    }
  };
  auto started = impl_->oauth->begin(*cfg, options, std::move(on_end), error);
  if (!started) return make_error(errc::needs_auth, server + ": " + error);
  return started->authorization_url;
}

void runtime::set_own_listeners(std::vector<listen_endpoint> listeners) {
  if (impl_->oauth) impl_->oauth->set_own_listeners(std::move(listeners));
}

caf::expected<bool> runtime::forget_authorization(const std::string& server) {
  if (impl_->remote) return impl_->ask<bool>(impl_->remote->node, std::chrono::seconds(10), atom::forget_v, server);
  auto cfg = impl_->ask<server_config>(impl_->gating, std::chrono::seconds(10), atom::config_v, server);
  if (!cfg) return cfg.error();
  try {
    return impl_->oauth->forget(*cfg);
  } catch (const std::exception& e) {
    return make_error(errc::io_error, e.what());
  }
}

drain_result runtime::shutdown(std::chrono::milliseconds timeout) {
  auto& p = *impl_;
  drain_result out;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    if (p.stopped) return out;
    p.stopped = true;
  }
  // Authorizations waiting for a browser end first: their threads call
  // back into the runtime.
  if (p.oauth) p.oauth->shutdown();
  auto kill = [](const auto& h) {
    if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  };
  // Calls in flight answer now, and every later one fails as it comes.
  if (p.broker)
    (void)p.ask<bool>(p.broker, std::chrono::seconds(10), atom::drain_v,
                      make_error(errc::not_connected, "the runtime stopped before the server answered"));
  if (p.remote) {
    // This host's sessions close at the node, the local views of its
    // facade end, and the link's end tells the node the host has gone.
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> guard{p.mtx};
      ids = p.order;
    }
    for (auto& id : ids)
      close_session(id);
    kill(p.watcher);
    kill(p.gating);
    kill(p.broker);
    p.close_asker();
    kill(p.bus);
    kill(p.remote->link);
    return out;
  }
  kill(p.watcher);
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> guard{p.mtx};
    ids = p.order;
  }
  for (auto& id : ids)
    close_session(id);
  if (p.pool) {
    auto r = p.ask<drain_result>(p.pool, timeout + std::chrono::seconds(5), atom::drain_v, true,
                                 caf::timespan{timeout});
    if (r) out = std::move(*r);
    else out.errors.push_back(p.sys.render(r.error()));
  }
  kill(p.gating);
  kill(p.pool);
  kill(p.budget);
  if (p.fleet) {
    // The slots go back now, not when the lease runs out.
    auto r = p.ask<bool>(p.fleet, std::chrono::seconds(5), atom::drain_v);
    if (!r || !*r) spdlog::warn("runtime: the fleet budget server did not confirm the release of this node's slots");
    kill(p.fleet);
  }
  kill(p.broker);
  p.close_asker();
  kill(p.forwarding); // and with it the forwarder
  kill(p.forwarders->get().first);
  kill(p.bus);
  // Connections the pools were still stopping, or that outlived their pool
  // for a moment, end before the I/O they use goes.
  if (!p.connections->end_all(std::chrono::seconds(10)))
    spdlog::warn("runtime: connections still running 10 s after shutdown began");
  if (p.host) p.host->stop();
  // Stops the I/O threads; the reactor's reaper kills and reaps whatever is
  // left, down to the last descendant of any server.
  p.http.reset();
  p.reactor.reset();
  return out;
}

void runtime::set_roots(std::vector<mcp_root> roots) {
  auto& p = *impl_;
  if (p.remote) {
    // The node's connections offer the node owner's roots, which no host
    // changes for the node's other clients.
    spdlog::warn("runtime: set_roots does nothing on a remote workspace node's runtime");
    return;
  }
  {
    std::lock_guard<std::mutex> guard{p.roots->first};
    p.roots->second = roots;
  }
  std::vector<caf::actor> live;
  {
    std::lock_guard<std::mutex> guard{p.connections->mtx};
    for (auto& [id, a] : p.connections->live)
      live.push_back(a);
  }
  for (auto& a : live)
    caf::anon_send(caf::actor_cast<connection_actor>(a), atom::roots_v, roots);
}

std::vector<std::string> runtime::capabilities() const {
  runtime_mode m;
  m.pool = impl_->opts.pool;
  m.budget = impl_->opts.budget;
  m.mode = impl_->opts.mode;
  return mcprt::capabilities(m);
}

const runtime_options& runtime::options() const {
  return impl_->opts;
}

std::string runtime::shown_connection_id(const std::string& internal_id) const {
  return impl_->show_id(internal_id);
}

call_broker_actor runtime_access::calls(const runtime& rt) {
  return rt.impl_->broker;
}
event_bus_actor runtime_access::bus(const runtime& rt) {
  return rt.impl_->bus;
}
event_sink_actor runtime_access::event_forwarder(const runtime& rt) {
  return rt.impl_->forwarders->get().first;
}
gating_actor runtime_access::gating(const runtime& rt) {
  return rt.impl_->gating;
}
watcher_actor runtime_access::watcher(const runtime& rt) {
  return rt.impl_->watcher;
}
pool_actor runtime_access::pool(const runtime& rt) {
  return rt.impl_->pool;
}
budget_actor runtime_access::budget(const runtime& rt) {
  return rt.impl_->budget;
}
reconciler_actor runtime_access::session(const runtime& rt, const std::string& id) {
  auto s = rt.impl_->find_session(id);
  return s ? s->reconciler : reconciler_actor{};
}

// -- resources, prompts and completion -------------------------------

void runtime::mcp_request_async(const std::string& session, const std::string& server, const std::string& method,
                                json params, call_callback done, call_options opts) {
  if (std::find(client_request_methods.begin(), client_request_methods.end(), method) == client_request_methods.end()) {
    done(make_error(errc::bad_request, "'" + escape_for_display(method)
                                         + "' is not a request mcprt sends for a host (tools/call: call_tool)"));
    return;
  }
  impl_->start_call(session, server, {}, method, std::move(params), std::move(done), opts);
}

caf::expected<json> runtime::mcp_request(const std::string& session, const std::string& server,
                                         const std::string& method, json params, std::chrono::milliseconds timeout) {
  auto answer = std::make_shared<std::promise<caf::expected<json>>>();
  auto result = answer->get_future();
  call_options opts;
  opts.timeout = timeout;
  mcp_request_async(
    session, server, method, std::move(params),
    [answer](caf::expected<json> r) { answer->set_value(std::move(r)); }, opts);
  return result.get();
}

caf::expected<json> runtime::resources(const std::string& session, const std::string& server) {
  return mcp_request(session, server, "resources/list", json::object());
}

caf::expected<json> runtime::resource_templates(const std::string& session, const std::string& server) {
  return mcp_request(session, server, "resources/templates/list", json::object());
}

caf::expected<json> runtime::read_resource(const std::string& session, const std::string& server,
                                           const std::string& uri) {
  return mcp_request(session, server, "resources/read", {{"uri", uri}});
}

caf::expected<json> runtime::get_prompt(const std::string& session, const std::string& server,
                                        const std::string& name, json arguments) {
  json params{{"name", name}};
  if (!arguments.is_null()) params["arguments"] = std::move(arguments);
  return mcp_request(session, server, "prompts/get", std::move(params));
}

caf::expected<json> runtime::complete(const std::string& session, const std::string& server, json ref,
                                      json argument, json context) {
  json params{{"ref", std::move(ref)}, {"argument", std::move(argument)}};
  if (!context.is_null()) params["context"] = std::move(context);
  return mcp_request(session, server, "completion/complete", std::move(params));
}

caf::expected<json> runtime::subscribe_resource(const std::string& session, const std::string& server,
                                                const std::string& uri) {
  return mcp_request(session, server, "resources/subscribe", {{"uri", uri}});
}

caf::expected<json> runtime::unsubscribe_resource(const std::string& session, const std::string& server,
                                                  const std::string& uri) {
  return mcp_request(session, server, "resources/unsubscribe", {{"uri", uri}});
}

} // namespace mcprt
