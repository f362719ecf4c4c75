// fleet_budget: reserve/release round trips at the fleet budget
// actor through CAF's middleman, from 1, 10 and 100 simulated nodes (an
// actor system each, connected over loopback), against the same round
// trips to the same actor in-process, in the same run; and how long the
// fleet takes to get back the slots of a node that went away.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/fleet_budget.hpp"
#include "mcprt/scheduler.hpp"
#include "bench.hpp"
#include "mcprt/owner_tls.hpp"
#include "messages/messages.hpp"

namespace mcprt::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// The owner's identity for every node and the budget server, made once in
/// a home of the benchmark's own: mcprt's CAF ports speak only TLS, so the
/// round trips measured are those a fleet pays.
const std::string& fleet_bench_home() {
  static const std::string home = [] {
    auto dir = std::filesystem::temp_directory_path() / ("mcprt-bench-fleet-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir.string();
  }();
  return home;
}

struct node_config : caf::actor_system_config {
  explicit node_config(std::size_t threads) {
    add_mcprt_types(*this);
    if (auto err = use_owner_tls(*this, fleet_bench_home()))
      throw std::runtime_error("fleet_budget: " + caf::to_string(err));
    // As the daemon runs: idle workers sleep instead of polling, which
    // matters with 100 actor systems in one process.
    use_mcprt_scheduler(*this, threads);
  }
};

/// Reserves and releases one name as fast as answers come, until `stop`.
void drive(caf::event_based_actor* self, fleet_budget_actor budget, std::string node,
           std::shared_ptr<std::atomic<bool>> stop, std::shared_ptr<std::atomic<uint64_t>> done) {
  if (*stop) {
    self->quit();
    return;
  }
  self->request(budget, caf::infinite, atom::reserve_v, node, std::string{"server"})
    .then(
      [=](fleet_grant) {
        self->send(budget, atom::release_v, node, std::string{"server"});
        ++*done;
        drive(self, budget, node, stop, done);
      },
      [=](const caf::error&) { self->quit(); });
}

caf::behavior driver(caf::event_based_actor* self, fleet_budget_actor budget, std::string node,
                     std::shared_ptr<std::atomic<bool>> stop, std::shared_ptr<std::atomic<uint64_t>> done) {
  drive(self, std::move(budget), std::move(node), std::move(stop), std::move(done));
  return {[](int) {}};
}

/// Round trips per second by `drivers` drivers spawned in `sys` against `budget`.
double run_drivers(std::vector<std::pair<caf::actor_system*, fleet_budget_actor>> drivers, double seconds) {
  auto stop = std::make_shared<std::atomic<bool>>(false);
  auto done = std::make_shared<std::atomic<uint64_t>>(0);
  std::size_t i = 0;
  // Warm up for a fifth of the time, then count.
  for (auto& [sys, budget] : drivers)
    sys->spawn(driver, budget, "node-" + std::to_string(i++), stop, done);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 5));
  auto before = done->load();
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  auto n = done->load() - before;
  auto elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  *stop = true;
  return static_cast<double>(n) / elapsed;
}

std::string fixed(double x, int digits = 0) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << x;
  return out.str();
}

/// Budget 1, one node holds the slot and goes away (its actor system ends,
/// so it renews no more); another node asks again at every fleet_free. The
/// time from the first node's end to the second node's slot.
double recovery_ms(std::chrono::milliseconds lease) {
  node_config server_cfg(1);
  caf::actor_system server_sys{server_cfg};
  fleet_budget_options o;
  o.budget = 1;
  o.mode = budget_mode::enforce;
  o.lease = lease;
  o.claim_grace = std::chrono::milliseconds(0);
  auto budget = spawn_fleet_budget(server_sys, o);
  auto port = caf::openssl::publish(budget, 0, "127.0.0.1", true);
  if (!port) return -1;
  clock_type::time_point gone;
  {
    node_config a_cfg(1);
    caf::actor_system a{a_cfg};
    auto remote = caf::openssl::remote_actor<fleet_budget_actor>(a, "127.0.0.1", *port);
    if (!remote) return -1;
    caf::scoped_actor self{a};
    self->request(*remote, std::chrono::seconds(5), atom::reserve_v, std::string{"a"}, std::string{"s"})
      .receive([](fleet_grant) {}, [](caf::error&) {});
    gone = clock_type::now();
  }
  node_config b_cfg(1);
  caf::actor_system b{b_cfg};
  auto remote = caf::openssl::remote_actor<fleet_budget_actor>(b, "127.0.0.1", *port);
  if (!remote) return -1;
  caf::scoped_actor self{b};
  auto listener = caf::actor_cast<fleet_listener_actor>(self);
  for (;;) {
    fleet_grant g = fleet_grant::refused;
    self->request(*remote, std::chrono::seconds(5), atom::renew_v, std::string{"b"}, std::vector<std::string>{},
                  std::vector<std::string>{}, listener)
      .receive([](const fleet_info&) {}, [](caf::error&) {});
    self->request(*remote, std::chrono::seconds(5), atom::reserve_v, std::string{"b"}, std::string{"s"})
      .receive([&](fleet_grant x) { g = x; }, [](caf::error&) {});
    if (g == fleet_grant::reserved) break;
    bool told = false;
    self->receive([&](atom::fleet_free) { told = true; },
                  caf::after(lease * 3) >> [] {});
    if (!told) return -1;
  }
  auto ms = std::chrono::duration<double, std::milli>(clock_type::now() - gone).count();
  caf::anon_send_exit(budget, caf::exit_reason::user_shutdown);
  return ms;
}

} // namespace

int fleet_budget(const std::vector<std::string>& args) {
  static const char* const usage = "usage: mcprt-bench fleet_budget [--seconds T] [--nodes 1,10,100] [--lease-ms L]\n";
  double seconds = 2;
  std::vector<std::size_t> node_counts{1, 10, 100};
  long lease_ms = 1000;
  if (args.size() % 2 != 0) {
    std::cerr << usage;
    return 2;
  }
  for (std::size_t i = 0; i < args.size(); i += 2) {
    if (args[i] == "--seconds") {
      seconds = std::stod(args[i + 1]);
    } else if (args[i] == "--nodes") {
      node_counts.clear();
      std::stringstream in(args[i + 1]);
      std::string part;
      while (std::getline(in, part, ','))
        node_counts.push_back(static_cast<std::size_t>(std::stoul(part)));
    } else if (args[i] == "--lease-ms") {
      lease_ms = std::stol(args[i + 1]);
    } else {
      std::cerr << usage;
      return 2;
    }
  }
  std::cout << "fleet_budget: reserve + release round trips at one fleet budget actor, " << seconds
            << " s per row; each node is an actor system of its own on loopback\n";
  std::cout << "  nodes | middleman, round trips/s | in-process baseline, round trips/s | middleman / in-process\n";
  for (auto n : node_counts) {
    node_config server_cfg(2);
    caf::actor_system server_sys{server_cfg};
    fleet_budget_options o;
    o.budget = n * 2;
    o.mode = budget_mode::enforce;
    o.claim_grace = std::chrono::milliseconds(0);
    auto budget = spawn_fleet_budget(server_sys, o);
    auto port = caf::openssl::publish(budget, 0, "127.0.0.1", true);
    if (!port) {
      std::cerr << "cannot publish: " << server_sys.render(port.error()) << "\n";
      return 1;
    }
    double remote_rate = 0;
    {
      std::vector<std::unique_ptr<node_config>> cfgs;
      std::vector<std::unique_ptr<caf::actor_system>> nodes;
      std::vector<std::pair<caf::actor_system*, fleet_budget_actor>> drivers;
      for (std::size_t i = 0; i < n; ++i) {
        cfgs.push_back(std::make_unique<node_config>(1));
        nodes.push_back(std::make_unique<caf::actor_system>(*cfgs.back()));
        auto remote = caf::openssl::remote_actor<fleet_budget_actor>(*nodes.back(), "127.0.0.1", *port);
        if (!remote) {
          std::cerr << "node " << i << " cannot connect: " << nodes.back()->render(remote.error()) << "\n";
          return 1;
        }
        drivers.emplace_back(nodes.back().get(), *remote);
      }
      remote_rate = run_drivers(drivers, seconds);
    }
    std::vector<std::pair<caf::actor_system*, fleet_budget_actor>> local;
    for (std::size_t i = 0; i < n; ++i)
      local.emplace_back(&server_sys, budget);
    auto local_rate = run_drivers(local, seconds);
    std::cout << "  " << std::setw(5) << n << " | " << std::setw(24) << fixed(remote_rate) << " | " << std::setw(35)
              << fixed(local_rate) << " | " << fixed(remote_rate / local_rate, 3) << "\n";
    std::cout << "{\"bench\":\"fleet_budget\",\"nodes\":" << n << ",\"middleman_per_s\":" << fixed(remote_rate)
              << ",\"in_process_per_s\":" << fixed(local_rate) << "}\n";
    caf::anon_send_exit(budget, caf::exit_reason::user_shutdown);
  }
  auto lease = std::chrono::milliseconds(lease_ms);
  auto rec = recovery_ms(lease);
  std::cout << "  recovery: a node that goes away holding the only slot; another node has it after "
            << fixed(rec, 1) << " ms (lease " << lease_ms << " ms; baseline: the lease itself)\n";
  std::cout << "{\"bench\":\"fleet_budget\",\"recovery_ms\":" << fixed(rec, 1) << ",\"lease_ms\":" << lease_ms
            << "}\n";
  std::error_code ec;
  std::filesystem::remove_all(fleet_bench_home(), ec);
  return rec < 0 ? 1 : 0;
}

} // namespace mcprt::bench
