#include "cli/budget_server.hpp"

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <pthread.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <filesystem>
#include <fstream>
#include <spdlog/spdlog.h>

#include "actors/fleet_budget.hpp"
#include "cli/serve.hpp"
#include "core/settings.hpp"
#include "core/untrusted_text.hpp"
#include "io/openssl_error_queue.hpp"
#include "io/owner_tls.hpp"
#include "messages/messages.hpp"

namespace mcprt::cli {

namespace {

int fail_budget_usage(const std::string& msg) {
  std::cerr << "mcprt budget-server: " << msg << "\n";
  return 2;
}

} // namespace

std::string check_caf_tls(const caf_tls_flags& t) {
  if (!t.any()) return {};
  if (t.cert.empty() || t.key.empty() || t.ca.empty())
    return "TLS needs all three of --caf-tls-cert, --caf-tls-key and --caf-tls-ca";
  for (auto& [flag, path] : {std::pair<const char*, const std::string&>{"--caf-tls-cert", t.cert},
                             {"--caf-tls-key", t.key},
                             {"--caf-tls-ca", t.ca}}) {
    std::error_code ec;
    // CAF's OpenSSL manager ends the process on a file it cannot use: every
    // check it would fail on is made here first.
    if (!std::filesystem::is_regular_file(path, ec)) return std::string(flag) + " '" + path + "' is not a file";
    std::ifstream in(path);
    if (!in.good()) return std::string(flag) + " '" + path + "' cannot be read";
  }
  return {};
}

std::string resolve_caf_tls(caf_tls_flags& t, const std::string& home) {
  if (t.any()) return check_caf_tls(t);
  auto owner = io::load_owner_tls(home);
  if (!owner.error.empty()) return owner.error;
  t.cert = owner.files.certificate.string();
  t.key = owner.files.key.string();
  t.ca = t.cert;
  return {};
}

std::string check_caf_host(const caf_tls_flags& given, const std::string& host) {
  if (given.any() || is_loopback(host)) return {};
  return "refusing to listen on non-loopback address " + escape_for_display(host)
         + " with the owner's own identity, which is for this machine: a fleet across machines needs a CA of its "
           "own; pass --caf-tls-cert, --caf-tls-key and --caf-tls-ca";
}

void use_caf_tls(caf::actor_system_config& cfg, const caf_tls_flags& t) {
  cfg.openssl_certificate = t.cert;
  cfg.openssl_key = t.key;
  cfg.openssl_cafile = t.ca;
  cfg.load<caf::io::middleman>();
  cfg.load<caf::openssl::manager>();
  io::clear_openssl_errors_before_io();
}

int run_budget_server(const budget_server_flags& f) {
  fleet_budget_options opts;
  if (f.budget) {
    auto b = parse_budget_value(*f.budget);
    if (!b.value) return fail_budget_usage("--budget: " + b.error);
    opts.budget = b.value;
  }
  auto mode = parse_budget_mode(f.mode);
  if (!mode || *mode == budget_mode::off) return fail_budget_usage("--mode: expected enforce or warn, got '" + f.mode + "'");
  opts.mode = *mode;
  if (opts.mode == budget_mode::enforce && !opts.budget) return fail_budget_usage("--mode enforce needs --budget N");
  if (f.caf_port < 0 || f.caf_port > 65535) return fail_budget_usage("--caf-port must be between 0 and 65535");
  if (f.lease_ms < 100) return fail_budget_usage("--lease-ms must be at least 100");
  if (f.claim_grace_ms < 0) return fail_budget_usage("--claim-grace-ms must not be negative");
  opts.lease = std::chrono::milliseconds(f.lease_ms);
  opts.claim_grace = std::chrono::milliseconds(f.claim_grace_ms);
  if (auto bad = check_caf_tls(f.tls); !bad.empty()) return fail_budget_usage(bad);
  if (auto bad = check_caf_host(f.tls, f.caf_host); !bad.empty()) return fail_budget_usage(bad);
  std::string no_home;
  auto home = resolve_home(f.home, std::getenv("HOME"), &no_home);
  if (!home) return fail_budget_usage(no_home);
  // No peer's bytes reach CAF's BASP reader before the handshake proved it
  // holds the owner's key (or a certificate the given CA signed).
  auto tls = f.tls;
  if (auto bad = resolve_caf_tls(tls, home->string()); !bad.empty()) {
    std::cerr << "mcprt budget-server: " << bad << "\n";
    return 1;
  }

  // Node ids and server names in its log lines come from other processes.
  setup_logging(f.log_level, "text");

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
  use_caf_tls(cfg, tls);
  caf::actor_system sys{cfg};
  auto budget = spawn_fleet_budget(sys, opts);
  auto port = caf::openssl::publish(budget, static_cast<uint16_t>(f.caf_port), f.caf_host.c_str(), true);
  if (!port) {
    spdlog::error("cannot listen on {}:{}: {}", f.caf_host, f.caf_port, sys.render(port.error()));
    caf::anon_send_exit(budget, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::cout << "listening on caf+tls://" << f.caf_host << ":" << *port << std::endl;
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
