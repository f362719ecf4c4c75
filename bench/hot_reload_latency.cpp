// hot_reload_latency: from the rename of an edited settings file to the
// edited server's `connected` event, through the real watcher (inotify,
// trailing debounce), gating, reconciler and pool, against a real
// mcprt-test-server. The server's own start-up (spawn to connected, through a
// bare connection actor) is measured apart in the same run and subtracted,
// so what is left is the runtime's reaction time: the debounce plus our
// overhead. Target: median <= debounce + 10 ms.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <set>

#include <unistd.h>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/connection.hpp"
#include "bench.hpp"
#include "io/http_transport.hpp"
#include "io/reactor.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt::bench {

namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct latency_config : caf::actor_system_config {
  latency_config() { add_mcprt_types(*this); }
};

/// Connected events, by connection id, with their arrival time.
struct arrivals {
  std::mutex mtx;
  std::condition_variable cv;
  std::map<std::string, clock_type::time_point> connected;
};

event_subscriber_actor::behavior_type on_event(event_subscriber_actor::pointer, std::shared_ptr<arrivals> a) {
  return {
    [a](event& ev) {
      auto now = clock_type::now();
      auto& d = ev.data.value;
      if (ev.kind != event_kind::client_update || d.value("status", "") != "connected") return;
      std::lock_guard<std::mutex> guard{a->mtx};
      a->connected.emplace(d.value("connection_id", ""), now);
      a->cv.notify_all();
    },
  };
}

event_sink_actor::behavior_type on_update(event_sink_actor::pointer, std::shared_ptr<arrivals> a) {
  return {
    [a](client_update& u) {
      if (u.status != connection_status::connected) return;
      auto now = clock_type::now();
      std::lock_guard<std::mutex> guard{a->mtx};
      a->connected.emplace(u.connection_id, now);
      a->cv.notify_all();
    },
  };
}

json server_spec(const std::string& bin, int version) {
  return {{"command", bin}, {"args", {"--name-prefix", "v" + std::to_string(version) + "_"}}};
}

void save(const fs::path& p, const json& content) {
  auto tmp = p.parent_path() / ".settings.json.tmp";
  {
    std::ofstream out(tmp);
    out << content.dump(2);
  }
  fs::rename(tmp, p);
}

/// Waits for `id` to connect; its arrival time, or nullopt after 30 s.
std::optional<clock_type::time_point> wait_connected(arrivals& a, const std::string& id) {
  std::unique_lock<std::mutex> lock{a.mtx};
  if (!a.cv.wait_for(lock, std::chrono::seconds(30), [&] { return a.connected.count(id) > 0; })) return std::nullopt;
  return a.connected[id];
}

double latency_percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  auto idx = static_cast<std::size_t>(p * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(idx, xs.size() - 1)];
}

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

} // namespace

int hot_reload_latency(const std::vector<std::string>& args) {
  int edits = 50;
  long debounce_ms = 300;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--edits") edits = std::stoi(args[i + 1]);
    else if (args[i] == "--debounce-ms") debounce_ms = std::stol(args[i + 1]);
  }
  auto bin = exe_dir() + "/mcprt-test-server";
  auto dir = fs::temp_directory_path() / ("mcprt-bench-hot-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "home/.mcprt");
  fs::create_directories(dir / "ws");
  auto settings = dir / "home/.mcprt/settings.json";
  save(settings, {{"mcpServers", {{"hot", server_spec(bin, 0)}}}});

  latency_config cfg;
  caf::actor_system sys{cfg};
  auto a = std::make_shared<arrivals>();

  // The server's own start-up, measured apart: spawn to connected.
  std::vector<double> startup;
  {
    io::reactor reactor;
    io::http_client http;
    auto sink = sys.spawn(on_update, a);
    for (int i = 0; i < 10; ++i) {
      connection_config cc;
      cc.server = *parse_server_config("probe", server_spec(bin, 1000 + i), config_scope::user).config;
      cc.subscribers.push_back(sink);
      auto id = cc.server.connection_id_cache;
      auto t0 = clock_type::now();
      auto conn = spawn_connection(sys, cc, connection_io{&reactor, &http, {}});
      auto t1 = wait_connected(*a, id);
      if (t1) startup.push_back(ms_between(t0, *t1));
      caf::scoped_actor self{sys};
      self->request(conn, std::chrono::seconds(10), atom::stop_v).receive([](bool) {}, [](caf::error&) {});
    }
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  auto startup_median = latency_percentile(startup, 0.5);

  runtime_options opts;
  opts.workspace = dir / "ws";
  opts.home = dir / "home";
  opts.debounce = std::chrono::milliseconds(debounce_ms);
  opts.drain_delay = std::chrono::milliseconds(1000);
  auto rt = runtime::start(sys, opts);
  if (!rt) {
    std::cerr << "hot_reload_latency: cannot start the runtime: " << sys.render(rt.error()) << "\n";
    return 1;
  }
  auto sink = sys.spawn(on_event, a);
  (*rt)->subscribe(sink, {event_kind::client_update});
  (*rt)->open_session();
  // Events carry the fingerprint the runtime shows, not the internal id.
  auto id_of = [&](int version) {
    return (*rt)->shown_connection_id(
      parse_server_config("hot", server_spec(bin, version), config_scope::user).config->connection_id_cache);
  };
  bool ok = wait_connected(*a, id_of(0)).has_value();
  std::vector<double> raw, net;
  for (int i = 1; ok && i <= edits; ++i) {
    auto t0 = clock_type::now();
    save(settings, {{"mcpServers", {{"hot", server_spec(bin, i)}}}});
    auto t1 = wait_connected(*a, id_of(i));
    if (!t1) {
      ok = false;
      break;
    }
    raw.push_back(ms_between(t0, *t1));
    net.push_back(raw.back() - startup_median);
  }
  (*rt)->shutdown();
  rt->reset();
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  fs::remove_all(dir);

  auto median = latency_percentile(net, 0.5);
  auto p99 = latency_percentile(net, 0.99);
  std::cout << std::fixed << std::setprecision(1);
  std::cout << "hot_reload_latency: " << net.size() << " edits (rename saves), debounce " << debounce_ms << " ms\n";
  std::cout << "  server start-up, measured apart: median " << startup_median << " ms\n";
  std::cout << "  rename -> connected, raw:        median " << latency_percentile(raw, 0.5) << " ms, p99 "
            << latency_percentile(raw, 0.99) << " ms\n";
  std::cout << "  minus start-up:                  median " << median << " ms, p99 " << p99
            << " ms  (target: median <= " << debounce_ms + 10 << " ms)\n";
  json out{{"bench", "hot_reload_latency"}, {"debounce_ms", debounce_ms}, {"median_ms", median},
           {"p99_ms", p99}, {"edits", net.size()}, {"startup_median_ms", startup_median}, {"ok", ok}};
  std::cout << out.dump() << std::endl;
  return ok ? 0 : 1;
}

} // namespace mcprt::bench
