// connect_fanout: N servers connected in parallel, tools listed, one tool
// called on each, all shut down; mcprt's connection actors against the
// official TypeScript SDK client doing the same work in the same run.

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/connection.hpp"
#include "bench.hpp"
#include "io/http_transport.hpp"
#include "io/reactor.hpp"
#include "core/sandbox_policy.hpp"

namespace mcprt::bench {

namespace {

using nlohmann::json;
using clock_type = std::chrono::steady_clock;

struct bench_config : caf::actor_system_config {
  bench_config() { add_mcprt_types(*this); }
};

struct row {
  double wall_s = 0;
  double cpu_s = 0;
  double rss_mb = 0;
  int threads = 0;
  int connected = 0;
  int calls_ok = 0;
  double connect_s = 0;   // start to the last server connected
  double pss_mb = 0;      // this process, all servers connected
  double call_us = 0;     // median of sequential echo calls on the first server
};

// The runtime's own proportional set size: what each server costs the
// daemon, whatever its children cost themselves.
double self_pss_mb() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "Pss:") {
      in >> kb;
      return kb / 1024.0;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// The default policy for a server working in the current directory, as
// the runtime makes it for a project server.
sandbox_plan bench_plan() {
  sandbox_setting s;
  s.enabled = true;
  sandbox_context ctx;
  if (const char* h = std::getenv("HOME")) ctx.home = h;
  ctx.workspace = std::filesystem::current_path().string();
  return plan_sandbox(s, ctx, {});
}

// Three pipe ends and a pidfd per server: the default soft limit of 1024
// descriptors runs out near 250 servers.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

row run_mcprt(int n, const std::string& server, bool sandboxed = false) {
  row r;
  auto t0 = clock_type::now();
  {
    io::reactor reactor;
    io::http_client http;
    bench_config cfg;
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    std::vector<connection_actor> conns;
    for (int i = 0; i < n; ++i) {
      connection_config cc;
      cc.server = *parse_server_config("s" + std::to_string(i), {{"command", server}}, config_scope::user, {}).config;
      cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(self));
      if (sandboxed) cc.sandbox = bench_plan();
      conns.push_back(spawn_connection(sys, cc, {&reactor, &http, {}}));
    }
    int settled = 0;
    while (settled < n) {
      bool timeout = false;
      self->receive(
        [&](client_update& u) {
          if (u.status == connection_status::connected) {
            ++settled;
            ++r.connected;
          } else if (u.status != connection_status::connecting) {
            ++settled;
          }
        },
        caf::after(std::chrono::seconds(60)) >> [&] { timeout = true; });
      if (timeout) break;
    }
    r.connect_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    r.pss_mb = self_pss_mb();
    r.threads = thread_count();
    // All calls go out before the first answer is awaited.
    auto call = [&](const connection_actor& c) {
      return self->request(c, std::chrono::seconds(60), atom::call_v, std::string("echo"),
                           json_value{{{"text", "fanout"}}});
    };
    std::vector<decltype(call(conns.front()))> pending;
    for (auto& c : conns)
      pending.push_back(call(c));
    for (auto& h : pending)
      h.receive([&](json_value& v) { r.calls_ok += v.value.dump().find("fanout") != std::string::npos; },
                [](caf::error&) {});
    r.threads = std::max(r.threads, thread_count());
    // One server, one call at a time: what a call through it costs.
    std::vector<double> lat;
    for (int i = 0; i < 200 && !conns.empty(); ++i) {
      auto c0 = clock_type::now();
      call(conns.front()).receive([](json_value&) {}, [](caf::error&) {});
      lat.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - c0).count());
    }
    if (!lat.empty()) {
      std::sort(lat.begin(), lat.end());
      r.call_us = lat[lat.size() / 2];
    }
    auto stop = [&](const connection_actor& c) { return self->request(c, std::chrono::seconds(30), atom::stop_v); };
    std::vector<decltype(stop(conns.front()))> stopping;
    for (auto& c : conns)
      stopping.push_back(stop(c));
    for (auto& h : stopping)
      h.receive([](bool) {}, [](caf::error&) {});
  }
  r.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  r.cpu_s = cpu_seconds();
  r.rss_mb = peak_rss_mb();
  return r;
}

std::optional<row> run_sdk(int n, const std::string& server) {
  std::string script = std::string(MCPRT_SOURCE_DIR) + "/bench/peers/sdk_fanout.mjs";
  std::string cmd = "node '" + script + "' " + std::to_string(n) + " '" + server + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[4096];
  while (auto got = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, got);
  int rc = ::pclose(p);
  auto brace = out.rfind("{\"n\"");
  if (rc != 0 || brace == std::string::npos) {
    std::cerr << "SDK baseline failed (is node and tests/peers installed?):\n" << out << "\n";
    return std::nullopt;
  }
  auto j = json::parse(out.substr(brace), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  row r;
  r.wall_s = j.value("wall_s", 0.0);
  r.cpu_s = j.value("cpu_s", 0.0);
  r.rss_mb = j.value("rss_mb", 0.0);
  r.threads = j.value("threads", 0);
  r.connected = n;
  r.calls_ok = n;
  return r;
}

void print_fanout_row(const char* name, const row& r) {
  std::cout << std::left << std::setw(8) << name << std::right << std::fixed << std::setprecision(3)
            << std::setw(10) << r.wall_s << std::setw(10) << r.cpu_s << std::setprecision(1) << std::setw(10)
            << r.rss_mb << std::setw(9) << r.threads << "\n";
}

// The same fan-out plain and sandboxed in one run: the cost per server of
// the sandbox to connected and in the runtime's PSS, and a call's latency.
int sandbox_comparison(int n, const std::string& server) {
  std::cout << "connect_fanout --sandbox: " << n << " x " << server << ", plain then sandboxed\n";
  auto plain = run_mcprt(n, server, false);
  auto boxed = run_mcprt(n, server, true);
  std::cout << "mode       connect_s   pss_mb  call_us(median)\n" << std::fixed;
  for (auto [name, r] : {std::pair<const char*, row&>{"plain", plain}, {"sandboxed", boxed}})
    std::cout << std::left << std::setw(10) << name << std::right << std::setprecision(3) << std::setw(10)
              << r.connect_s << std::setprecision(1) << std::setw(9) << r.pss_mb << std::setw(12) << r.call_us << "\n";
  double ms_per_server = (boxed.connect_s - plain.connect_s) * 1000.0 / n;
  double mb_per_server = (boxed.pss_mb - plain.pss_mb) / n;
  std::cout << std::setprecision(2) << "sandbox cost per server: " << ms_per_server << " ms to connected (target <= 10), "
            << mb_per_server << " MB of runtime PSS (target <= 1); call " << boxed.call_us << " us sandboxed vs "
            << plain.call_us << " us plain\n";
  json out = {{"bench", "connect_fanout_sandbox"}, {"n", n}, {"ms_per_server", ms_per_server},
              {"mb_per_server", mb_per_server}, {"call_us_plain", plain.call_us}, {"call_us_sandboxed", boxed.call_us}};
  std::cout << out.dump() << "\n";
  if (plain.connected != n || boxed.connected != n || plain.calls_ok != n || boxed.calls_ok != n) {
    std::cerr << "connect_fanout --sandbox: plain " << plain.connected << "/" << plain.calls_ok << ", sandboxed "
              << boxed.connected << "/" << boxed.calls_ok << " of " << n << "\n";
    return 1;
  }
  return 0;
}

json row_json(const row& r) {
  return {{"wall_s", r.wall_s}, {"cpu_s", r.cpu_s}, {"rss_mb", r.rss_mb}, {"threads", r.threads}};
}

} // namespace

int connect_fanout(const std::vector<std::string>& args) {
  int n = 200;
  bool sdk = true;
  bool sandbox = false;
  std::string server = exe_dir() + "/mcprt-test-server";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--n" && i + 1 < args.size()) n = std::stoi(args[++i]);
    else if (args[i] == "--server" && i + 1 < args.size()) server = args[++i];
    else if (args[i] == "--no-sdk") sdk = false;
    else if (args[i] == "--sandbox") sandbox = true;
    else {
      std::cerr << "usage: mcprt-bench connect_fanout [--n N] [--server PATH] [--no-sdk] [--sandbox]\n";
      return 2;
    }
  }
  raise_fd_limit();
  std::cout << "connect_fanout: " << n << " x " << server << " (connect, list tools, call echo, shut down)\n";
  if (sandbox) return sandbox_comparison(n, server);
  auto mine = run_mcprt(n, server);
  std::cout << "client   wall_s    cpu_s     rss_mb    threads\n";
  print_fanout_row("mcprt", mine);
  json out = {{"bench", "connect_fanout"}, {"n", n}, {"mcprt", row_json(mine)}};
  std::optional<row> base;
  if (sdk) base = run_sdk(n, server);
  if (base) {
    print_fanout_row("sdk", *base);
    double ratio_cpu = mine.cpu_s > 0 ? base->cpu_s / mine.cpu_s : 0;
    double ratio_rss = mine.rss_mb > 0 ? base->rss_mb / mine.rss_mb : 0;
    std::cout << std::setprecision(2) << "ratios (sdk / mcprt): cpu " << ratio_cpu << "x, rss " << ratio_rss
              << "x; target >= 5x each, threads constant in N\n";
    out["sdk"] = row_json(*base);
    out["ratio_cpu"] = ratio_cpu;
    out["ratio_rss"] = ratio_rss;
  } else {
    out["sdk"] = nullptr;
  }
  std::cout << out.dump() << "\n";
  if (mine.connected != n || mine.calls_ok != n) {
    std::cerr << "connect_fanout: only " << mine.connected << " of " << n << " connected, " << mine.calls_ok
              << " calls succeeded\n";
    return 1;
  }
  return 0;
}

} // namespace mcprt::bench
