// A runtime on a workspace of its own (`runtime::start`): it spawns the
// workspace's actors (bus, gating, watcher, pool and budget, the call
// broker), owns the I/O threads its connections use, and its sessions'
// reconcilers attach to its pool.

#include <cstdlib>

#include <unistd.h>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "actors/budget.hpp"
#include "actors/connection.hpp"
#include "actors/event_bus.hpp"
#include "actors/fleet_link.hpp"
#include "actors/gating.hpp"
#include "actors/io_thread_jobs.hpp"
#include "actors/reconciler.hpp"
#include "actors/watcher.hpp"
#include "core/approvals_store.hpp"
#include "core/fingerprint_key.hpp"
#include "core/http_url.hpp"
#include "core/input_store.hpp"
#include "core/oauth_token_store.hpp"
#include "core/runtime_mode.hpp"
#include "core/settings.hpp"
#include "io/http_transport.hpp"
#include "mcprt/runtime_impl.hpp"
#include "mcprt/version.hpp"
#include "messages/workspace_snapshot.hpp"
#include "pool/pool_supervisor.hpp"
#include "pool/private_pool.hpp"

namespace mcprt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Where a sandbox's paths point for this runtime: the owner's homes and
/// state directories, the workspace, the other users' homes.
sandbox_context sandbox_context_for(const runtime_options& opts, const profile& prof) {
  sandbox_context ctx;
  std::error_code ec;
  auto canonical = [&](const fs::path& p) {
    auto c = fs::weakly_canonical(p, ec);
    return (ec ? p : c).lexically_normal().string();
  };
  ctx.home = opts.home.empty() ? "" : canonical(opts.home);
  if (const char* h = std::getenv("HOME"); h && *h == '/') {
    auto env_home = canonical(h);
    if (env_home != ctx.home) ctx.env_home = env_home;
  }
  ctx.state_dirs = {prof.dir_name};
  ctx.workspace = canonical(opts.workspace);
  if (const char* t = std::getenv("TMPDIR"); t && *t == '/') ctx.tmp_parent = t;
  // Other users' homes: everything under /home, and /root for everyone
  // but root. plan_sandbox keeps what holds the workspace or the owner's home.
  auto owner_homes = std::vector<std::string>{ctx.home, ctx.env_home};
  auto is_owners = [&](const std::string& d) {
    for (auto& h : owner_homes)
      if (!h.empty() && (h == d || h.rfind(d + "/", 0) == 0)) return true;
    return false;
  };
  for (auto it = fs::directory_iterator("/home", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto d = it->path().string();
    if (it->is_directory(ec) && !is_owners(d)) ctx.other_homes.push_back(d);
    if (ctx.other_homes.size() >= 1000) break;
  }
  if (::geteuid() != 0 && !is_owners("/root")) ctx.other_homes.push_back("/root");
  return ctx;
}

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

using session_entry = runtime::impl::session_entry;

/// An authorization's wait for its URL: answered once, by the flow (the
/// URL, or why it failed) or by the timer, and the timer ends with it.
struct url_wait {
  explicit url_wait(std::function<void(caf::expected<std::string>)> d) : done(std::move(d)) {}
  url_wait(const url_wait&) = delete;
  url_wait& operator=(const url_wait&) = delete;

  /// Nobody answered (the flow could not start, its thread could not be
  /// made): the caller still hears, once.
  ~url_wait() {
    if (settled || !done) return;
    try {
      done(make_error(errc::needs_auth, "the authorization did not start"));
    } catch (...) {
      // A host's callback must not end the thread that drops the wait.
    }
  }

  /// False when it was answered already.
  bool settle(caf::expected<std::string> r) {
    std::function<void(caf::expected<std::string>)> fn;
    caf::actor t;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (settled) return false;
      settled = true;
      fn = std::move(done);
      t = std::move(timer);
    }
    if (t) caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
    fn(std::move(r));
    return true;
  }

  void set_timer(caf::actor t) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (!settled) {
        timer = std::move(t);
        return;
      }
    }
    caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
  }

  std::mutex mtx;
  std::function<void(caf::expected<std::string>)> done;
  caf::actor timer;
  bool settled = false;
};

/// Fires once after `after`, unless it is ended first.
caf::behavior url_timer(caf::event_based_actor* self, caf::timespan after, std::function<void()> fire) {
  self->delayed_send(self, after, atom::tick_v);
  return {[self, fire](atom::tick) {
    fire();
    self->quit();
  }};
}

/// A workspace of this process's own.
class local_side final : public runtime::impl::side {
public:
  bool remote() const override { return false; }

  std::optional<caf::error> lost() const override { return std::nullopt; }

  void open_session(runtime::impl& p, std::vector<server_config> servers,
                    std::function<void(std::string)> done) override {
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
    ro.gating = p.gating;
    session_entry entry;
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
    p.add_session(id, entry);
    caf::anon_send(p.gating, atom::attach_v, entry.reconciler, std::move(servers));
    done(std::move(id));
  }

  void close_session(runtime::impl& p, const std::string&, const session_entry& s,
                     std::function<void()> done) override {
    caf::anon_send(p.gating, atom::detach_v, s.reconciler);
    p.ask_async<bool>(
      s.reconciler, std::chrono::seconds(30),
      [entry = s, done = std::move(done)](caf::expected<bool>) {
        if (entry.pool) caf::anon_send_exit(entry.pool, caf::exit_reason::user_shutdown);
        if (entry.budget) caf::anon_send_exit(entry.budget, caf::exit_reason::user_shutdown);
        done();
      },
      atom::stop_v);
  }

  void snapshot(runtime::impl& p, std::function<void(json)> done) override {
    auto timeout = std::chrono::seconds(10);
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
    runtime_mode m;
    m.pool = p.opts.pool;
    m.budget = p.opts.budget;
    m.mode = p.opts.mode;
    g->parts.capabilities = mcprt::capabilities(m);
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

  void restart(runtime::impl& p, const std::string& server,
               std::function<void(caf::expected<std::vector<restart_result>>)> done) override {
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

  void authorize(runtime::impl& p, const std::string& server, authorize_options options,
                 std::function<void(caf::expected<std::string>)> done) override {
    // The wait for the URL ends at `until`; when the authorization's own
    // deadline is what ends it, a moment more lets the flow's reason (which
    // step ran out) be the answer.
    auto until = std::chrono::steady_clock::now() + options.url_timeout;
    bool deadline_binds = options.deadline && *options.deadline <= until;
    if (deadline_binds) until = *options.deadline;
    auto too_late = deadline_binds ? std::string{"no authorization URL before the time given for the authorization ran out"}
                                   : "no authorization URL within " + std::to_string(options.url_timeout.count()) + " ms";
    auto wait = std::make_shared<url_wait>(std::move(done));
    p.ask_async<server_config>(
      p.gating, std::chrono::seconds(10),
      [wait, server, options, until, deadline_binds, too_late, oauth = p.oauth, &sys = p.sys, bus = p.bus,
       watcher = p.watcher](caf::expected<server_config> cfg) {
        if (!cfg) {
          wait->settle(std::move(cfg.error()));
          return;
        }
        // The flow's end comes on its own thread: a success reconciles
        // every session (the server connects with the stored tokens), a
        // failure says why on the bus.
        auto on_end = [&sys, bus, watcher, server](bool ok, const std::string& why) {
          if (ok) {
            spdlog::info("[{}] authorized; connecting", escape_for_display(server));
            caf::anon_send(watcher, atom::reload_v);
          } else {
            spdlog::warn("[{}] authorization failed: {}", escape_for_display(server), escape_for_display(why));
            caf::anon_send(bus, atom::publish_v,
                           event_payload{events::auth_required{server, why, "run mcprt auth " + server}});
          }
        };
        auto cancel = oauth->begin_async(
          *cfg, options,
          [wait, server](std::optional<oauth_broker::started> s, const std::string& error) {
            if (s) wait->settle(s->authorization_url);
            else wait->settle(make_error(errc::needs_auth, server + ": " + error));
          },
          std::move(on_end));
        if (!cancel) return; // refused at once: answered
        auto left = until - std::chrono::steady_clock::now();
        if (deadline_binds) left += std::chrono::milliseconds(250);
        wait->set_timer(sys.spawn(url_timer, caf::timespan{std::max(left, decltype(left){0})},
                                  std::function<void()>{[wait, cancel, server, too_late] {
                                    if (wait->settle(make_error(errc::needs_auth, server + ": " + too_late))) cancel();
                                  }}));
      },
      atom::config_v, server);
  }

  void forget_authorization(runtime::impl& p, const std::string& server,
                            std::function<void(caf::expected<bool>)> done) override {
    p.ask_async<server_config>(
      p.gating, std::chrono::seconds(10),
      [done = std::move(done), oauth = p.oauth](caf::expected<server_config> cfg) {
        if (!cfg) {
          done(std::move(cfg.error()));
          return;
        }
        // One small file, written in place of the old one.
        try {
          done(oauth->forget(*cfg));
        } catch (const std::exception& e) {
          done(make_error(errc::io_error, e.what()));
        }
      },
      atom::config_v, server);
  }

  void set_own_listeners(runtime::impl& p, std::vector<listen_endpoint> listeners) override {
    if (p.oauth) p.oauth->set_own_listeners(std::move(listeners));
  }

  void set_roots(runtime::impl& p, std::vector<mcp_root> roots) override {
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

  void subscribed(const event_subscriber_actor&) override {}
  void unsubscribed(const event_subscriber_actor&) override {}

  drain_result shutdown(runtime::impl& p, std::chrono::milliseconds timeout) override {
    drain_result out;
    auto kill = [](const auto& h) {
      if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    };
    kill(p.watcher);
    p.close_all_sessions();
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
};

} // namespace

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
  p->ws = std::make_unique<local_side>();
  p->opts = opts;
  p->show_id = [k = key.ok() ? *key.key : random_fingerprint_key()](const std::string& id) {
    return keyed_connection_id(id, k);
  };
  try {
    io::reactor_options ro;
    // The reaper process dying takes every stdio server with it: say so.
    ro.on_warning = [](const std::string& what) { spdlog::warn("{}", what); };
    // A stdio server's answer runs the connection, the call broker and the
    // caller's delivery on the thread that read it. Not so on the HTTP
    // client's thread: an actor may block on it (a remote connection's
    // transport ends with a run_sync there), while an actor run there could
    // block on the reactor (a spawn): the two must never wait on each other.
    ro.turn_hook = make_io_thread_jobs(sys);
    ro.poll_before_sleep = opts.io_poll_before_sleep;
    // The proxy starts with the first server allowed a host, after the bus
    // below exists: the cell is filled before any server runs.
    ro.on_egress_refused = [cell = p->egress_bus](const io::egress_refusal& r) {
      if (*cell)
        caf::anon_send(*cell, atom::publish_v,
                       event_payload{events::egress_refused{r.server, r.host, r.port, r.reason}});
    };
    p->reactor = std::make_unique<io::reactor>(std::move(ro));
    p->http = std::make_unique<io::http_client>();
  } catch (const std::exception& e) {
    return make_error(errc::io_error, std::string{"runtime: cannot start the I/O threads: "} + e.what());
  }
  event_bus_options bo;
  bo.replay_capacity = std::max<std::size_t>(1, opts.event_history);
  bo.show_connection_id = p->show_id;
  p->bus = spawn_event_bus(sys, std::move(bo));
  *p->egress_bus = p->bus;
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
  if (opts.host.answers_sampling() || opts.host.answers_elicitation() || opts.host.answers_roots()) {
    // A request is attributed to a call of the runtime when exactly one
    // call to that server and tool is in flight.
    p->host = std::make_unique<host_bridge>(sys, opts.host, p->broker);
    host = p->host->actor();
  }
  // Without a host handler for it, `ask` has nobody to ask.
  bool can_ask = opts.host.answers_elicitation();
  bool can_sample = opts.host.answers_sampling();
  auto sandbox_ctx = sandbox_context_for(opts, *prof);
  p->make = [io, cell = p->forwarders, supervisor = p->forwarding, roots = p->roots, default_elicitation = opts.elicitation,
             can_ask, can_sample, host, registry = p->connections, bus = p->bus,
             sandbox_ctx](caf::actor_system& s, connection_config cc) {
    cc.bus = bus;
    if (cc.server.effective_sandbox.enabled && cc.server.transport() == transport_kind::stdio)
      cc.sandbox = plan_sandbox(cc.server.effective_sandbox, sandbox_ctx, {});
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

} // namespace mcprt
