#include "cli/budget_server.hpp"

#include <csignal>
#include <iostream>

#include <pthread.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/fleet_budget.hpp"
#include "cli/serve.hpp"
#include "messages/messages.hpp"

namespace mcprt::cli {

namespace {

int fail_usage(const std::string& msg) {
  std::cerr << "mcprt budget-server: " << msg << "\n";
  return 2;
}

} // namespace

int run_budget_server(const budget_server_flags& f) {
  fleet_budget_options opts;
  if (f.budget) {
    auto b = parse_budget_value(*f.budget);
    if (!b.value) return fail_usage("--budget: " + b.error);
    opts.budget = b.value;
  }
  auto mode = parse_budget_mode(f.mode);
  if (!mode || *mode == budget_mode::off) return fail_usage("--mode: expected enforce or warn, got '" + f.mode + "'");
  opts.mode = *mode;
  if (opts.mode == budget_mode::enforce && !opts.budget) return fail_usage("--mode enforce needs --budget N");
  if (f.caf_port < 0 || f.caf_port > 65535) return fail_usage("--caf-port must be between 0 and 65535");
  if (f.lease_ms < 100) return fail_usage("--lease-ms must be at least 100");
  if (f.claim_grace_ms < 0) return fail_usage("--claim-grace-ms must not be negative");
  opts.lease = std::chrono::milliseconds(f.lease_ms);
  opts.claim_grace = std::chrono::milliseconds(f.claim_grace_ms);
  // The middleman speaks plain CAF binary: only on loopback until TLS is
  // configured (docs/distribution.md).
  if (!is_loopback(f.caf_host))
    return fail_usage("refusing to listen on non-loopback address " + f.caf_host +
                      ": the budget server accepts loopback only (TLS is not available yet)");

  auto logger = std::make_shared<spdlog::logger>("mcprt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(f.log_level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) {
    std::cerr << "mcprt budget-server: cannot set up signal handling\n";
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);

  caf::actor_system_config cfg;
  add_mcprt_types(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto budget = spawn_fleet_budget(sys, opts);
  auto port = sys.middleman().publish(budget, static_cast<uint16_t>(f.caf_port), f.caf_host.c_str(), true);
  if (!port) {
    spdlog::error("cannot listen on {}:{}: {}", f.caf_host, f.caf_port, sys.render(port.error()));
    caf::anon_send_exit(budget, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::cout << "listening on caf://" << f.caf_host << ":" << *port << std::endl;
  spdlog::info("fleet budget {} ({}), lease {} ms", opts.budget ? std::to_string(*opts.budget) : "unlimited",
               to_string(opts.mode), opts.lease.count());
  int sig = 0;
  while (::sigwait(&set, &sig) != 0) {
  }
  spdlog::info("{}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  caf::anon_send_exit(budget, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace mcprt::cli
