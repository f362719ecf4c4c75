// reconcile_scale: 10,000 configured servers, one of them edited. Measures
// the pure plan (core/reconcile_plan) and the whole apply — from the settings
// update reaching the gating actor to the session's reconcile_finished —
// and counts the connections the edit touched (must be 1). Connections use
// a cheap fake transport (an actor that connects at once), as the output says:
// the figure is the runtime's own cost, not server start-up.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/event_bus.hpp"
#include "actors/gating.hpp"
#include "actors/reconciler.hpp"
#include "mcprt/scheduler.hpp"
#include "pool/private_pool.hpp"
#include "bench.hpp"
#include "core/fingerprint.hpp"
#include "core/reconcile_plan.hpp"
#include "messages/hot_reload.hpp"

namespace mcprt::bench {

namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

// The daemon's scheduler, so that the figures are the daemon's: under CAF's
// work stealing, taking a job from the tail of a long queue walked it.
struct scale_config : caf::actor_system_config {
  scale_config() {
    add_mcprt_types(*this);
    use_mcprt_scheduler(*this);
  }
};

/// Who was started and stopped, by server name.
struct touch_log {
  std::mutex mtx;
  std::multiset<std::string> started, stopped;
};

/// A connection that is connected at once and has no process.
connection_actor::behavior_type cheap_connection(connection_actor::pointer self, connection_config cfg,
                                                 std::shared_ptr<touch_log> log) {
  client_update u;
  u.server = cfg.server.name;
  u.connection_id = connection_id(cfg.server);
  u.generation = cfg.generation;
  u.status = connection_status::connected;
  for (auto& s : cfg.subscribers)
    self->send(s, u);
  auto name = cfg.server.name;
  return {
    [=](atom::info) {
      connection_info ci;
      ci.server = name;
      ci.status = connection_status::connected;
      return ci;
    },
    [=](atom::call, const std::string&, const json_value&) { return json_value{json::object()}; },
    [=](atom::call, const std::string&, const json_value&, const std::string&, const progress_sink_actor&) {
      return json_value{json::object()};
    },
    [=](atom::cancel, const std::string&) { return false; },
    [=](atom::subscribe, event_sink_actor) {},
    [=](atom::filter, const tool_filter_spec&) {},
    [=](atom::ping) { return int64_t{0}; },
    [=](atom::mcp_request, const std::string&, const json_value&) { return json_value{json::object()}; },
    [=](atom::mcp_request, const std::string&, const json_value&, const std::string&) {
      return json_value{json::object()};
    },
    [=](atom::stop) {
      {
        std::lock_guard<std::mutex> guard{log->mtx};
        log->stopped.insert(name);
      }
      self->quit();
      return true;
    },
    [=](atom::io_out, const std::string&) {},
    [=](atom::io_err, const std::string&) {},
    [=](atom::io_exit, const std::string&) {},
    [=](atom::http_msg, const std::string&) {},
    [=](atom::http_gone) {},
    [=](atom::http_err, const std::string&) {},
    [=](atom::http_auth, const std::string&) {},
    [=](atom::http_closed) {},
    [=](atom::tick) {},
    [=](atom::roots, const std::vector<mcp_root>&) {},
  };
}

/// Receives reconcile_finished events.
struct finish_signal {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<json> finished;
};

event_subscriber_actor::behavior_type waiter(event_subscriber_actor::pointer, std::shared_ptr<finish_signal> s) {
  return {
    [s](event& ev) {
      std::lock_guard<std::mutex> guard{s->mtx};
      s->finished.push_back(std::move(ev.data.value)); // 10,000 kept names: not copied
      s->cv.notify_all();
    },
  };
}

settings_update update_of(const json& user, uint64_t batch) {
  settings_update u;
  u.batch = batch;
  u.forced = batch == 0;
  u.files.push_back({"/nonexistent/home/.mcprt/settings.json", "user", true, json_value{user}});
  u.files.push_back({"/nonexistent/ws/.mcp.json", "project", false, json_value{json::object()}});
  u.files.push_back({"/nonexistent/ws/.mcprt/settings.json", "workspace", false, json_value{json::object()}});
  return u;
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

} // namespace

int reconcile_scale(const std::vector<std::string>& args) {
  std::size_t servers = 10000;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2)
    if (args[i] == "--servers") servers = std::stoul(args[i + 1]);

  json user{{"mcpServers", json::object()}};
  for (std::size_t i = 0; i < servers; ++i)
    user["mcpServers"]["srv-" + std::to_string(i)] = {{"command", "cheap-server"},
                                                     {"args", {std::to_string(i)}}};

  // The pure plan, on its own: 10,000 desired against 10,000 live, one changed.
  server_map desired;
  std::map<std::string, live_connection> live;
  for (auto& [name, spec] : user["mcpServers"].items()) {
    auto cfg = *parse_server_config(name, spec, config_scope::user).config;
    live.emplace(name, live_connection{cfg.connection_id_cache, filter_key(cfg)});
    desired.emplace(name, std::move(cfg));
  }
  auto edited_name = "srv-" + std::to_string(servers / 2);
  desired[edited_name] = *parse_server_config(edited_name, {{"command", "cheap-server"}, {"args", {"edited"}}},
                                              config_scope::user)
                            .config;
  auto p0 = clock_type::now();
  auto plan = plan_reconcile(desired, live);
  auto core_plan_ms = ms_since(p0);
  // What a session plans after a delta of the desired state: the edited
  // server alone, every other live one kept.
  auto live_names = names_of(live);
  auto t0 = clock_type::now();
  auto touched_plan = plan_reconcile(desired, live, std::set<std::string>{edited_name}, live_names);
  auto core_touched_ms = ms_since(t0);

  scale_config cfg;
  caf::actor_system sys{cfg};
  auto log = std::make_shared<touch_log>();
  auto bus = spawn_event_bus(sys);
  auto sig = std::make_shared<finish_signal>();
  auto sink = sys.spawn(waiter, sig);
  {
    caf::scoped_actor self{sys};
    self->request(bus, caf::infinite, atom::subscribe_v, sink, std::vector<event_kind>{event_kind::reconcile_finished})
      .receive([](uint64_t) {}, [](caf::error&) {});
  }
  gating_options go;
  go.workspace.workspace = "/nonexistent/ws";
  go.workspace.home = "/nonexistent/home";
  go.approvals_file = "/nonexistent/approvals.json";
  auto gating = spawn_gating(sys, go, bus);
  reconciler_options ro;
  ro.session = "bench";
  ro.bus = bus;
  auto pool = spawn_private_pool(sys, [log](caf::actor_system& s, connection_config cc) {
    {
      std::lock_guard<std::mutex> guard{log->mtx};
      log->started.insert(cc.server.name);
    }
    return s.spawn(cheap_connection, std::move(cc), log);
  }, {});
  ro.pool = pool;
  auto session = spawn_reconciler(sys, ro);
  auto wait_finished = [&](std::size_t n) {
    std::unique_lock<std::mutex> lock{sig->mtx};
    sig->cv.wait_for(lock, std::chrono::seconds(120), [&] { return sig->finished.size() >= n; });
    return sig->finished.size() >= n;
  };

  auto s0 = clock_type::now();
  caf::anon_send(gating, update_of(user, 0));
  caf::anon_send(gating, atom::attach_v, session, std::vector<server_config>{});
  caf::anon_send(gating, atom::start_v);
  bool ok = wait_finished(1);
  auto initial_ms = ms_since(s0);

  // The edit lands on a settled runtime: the initial pass's 10,000
  // connects leave events and pool updates in mailboxes after
  // reconcile_finished. A request to each actor is answered once its
  // mailbox is through them.
  {
    caf::scoped_actor self{sys};
    auto wait = std::chrono::seconds(60);
    auto ignore = [](caf::error&) {};
    self->request(pool, wait, atom::snapshot_v).receive([](pool_snapshot&) {}, ignore);
    self->request(session, wait, atom::snapshot_v).receive([](session_snapshot&) {}, ignore);
    self->request(gating, wait, atom::snapshot_v).receive([](gating_snapshot&) {}, ignore);
    self->request(bus, wait, atom::replay_v, std::numeric_limits<uint64_t>::max())
      .receive([](std::vector<event>&) {}, ignore);
  }
  user["mcpServers"][edited_name]["args"] = {"edited"};
  // Built before the clock starts: the figure begins where the update
  // reaches the gating actor, as the watcher hands it over.
  auto update = update_of(user, 1);
  auto a0 = clock_type::now();
  caf::anon_send(gating, std::move(update));
  ok = wait_finished(2) && ok;
  auto end_to_end_ms = ms_since(a0);

  // Touched by the edit: every server stopped (none were before it) and
  // every server started more than once.
  std::set<std::string> touched_names;
  {
    std::lock_guard<std::mutex> guard{log->mtx};
    touched_names.insert(log->stopped.begin(), log->stopped.end());
    for (auto& n : std::set<std::string>(log->started.begin(), log->started.end()))
      if (log->started.count(n) > 1) touched_names.insert(n);
  }
  auto touched = touched_names.size();
  json last;
  {
    std::lock_guard<std::mutex> guard{sig->mtx};
    if (!sig->finished.empty()) last = sig->finished.back();
  }

  // The reconciler times its own pass: the plan (desired vs live) and the
  // apply (release, acquire, events) until reconcile_finished.
  double plan_ms = last.value("plan_ms", -1.0);
  double apply_ms = last.value("apply_ms", -1.0);
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "reconcile_scale: " << servers << " servers (fake transport: connections are actors that connect"
            << " at once, no process), one edited\n";
  std::cout << "  initial reconcile of all servers:     " << initial_ms << " ms\n";
  std::cout << "  plan, core alone (10k vs 10k):        " << core_plan_ms << " ms  (touches " << plan.touched()
            << ")\n";
  std::cout << "  plan, core alone, the edit only:      " << core_touched_ms << " ms  (touches "
            << touched_plan.touched() << ", keeps " << touched_plan.kept.size() << ")\n";
  std::cout << "  reconciler plan:                      " << plan_ms << " ms\n";
  std::cout << "  reconciler apply:                     " << apply_ms << " ms  (issue 20's target: plan + apply <= 2 ms: "
            << (plan_ms >= 0 && plan_ms + apply_ms <= 2 ? "ok" : "MISS") << ")\n";
  std::cout << "  end to end (update at gating → done): " << end_to_end_ms
            << " ms  (adds the gating actor taking in the file of 10k servers; issue 20's target: <= 20 ms: "
            << (end_to_end_ms <= 20 ? "ok" : "MISS") << ")\n";
  std::cout << "  connections touched:                  " << touched << "  (restarted "
            << (last.contains("restarted") ? last["restarted"].dump() : "?") << ")\n";
  json out{{"bench", "reconcile_scale"}, {"servers", servers},         {"touched", touched},
           {"plan_ms", plan_ms},         {"apply_ms", apply_ms},       {"end_to_end_ms", end_to_end_ms},
           {"core_plan_ms", core_plan_ms}, {"core_touched_plan_ms", core_touched_ms}, {"initial_ms", initial_ms}, {"ok", ok}};
  std::cout << out.dump() << std::endl;

  // Closed the way runtime::close_session does it: the session lets its
  // connections go, then the pool exits. An exit alone would leave the pool
  // and its connections holding each other, and the actor system would wait
  // for them forever.
  {
    caf::scoped_actor self{sys};
    self->request(session, std::chrono::seconds(30), atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(gating, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(bus, caf::exit_reason::user_shutdown);
  return ok && touched == 1 ? 0 : 1;
}

} // namespace mcprt::bench
