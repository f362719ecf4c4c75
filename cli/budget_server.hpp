#pragma once

#include <optional>
#include <string>

#include <caf/fwd.hpp>

namespace mcprt::cli {

/// TLS for CAF's middleman (`--caf-tls-cert`, `--caf-tls-key`,
/// `--caf-tls-ca`): all three or none. Each end proves itself with a
/// certificate the CA signed (mutual authentication).
struct caf_tls_flags {
  std::string cert, key, ca;
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// Empty when usable: none, or all three naming readable regular files.
std::string check_caf_tls(const caf_tls_flags& t);

/// Loads caf::openssl::manager (and the middleman) with these files.
void use_caf_tls(caf::actor_system_config& cfg, const caf_tls_flags& t);

struct budget_server_flags {
  long long caf_port = 0; // 0: any free port (printed)
  std::string caf_host = "127.0.0.1";
  std::optional<std::string> budget; // as typed
  std::string mode = "enforce";
  long long lease_ms = 10000;
  long long claim_grace_ms = 1500;
  std::string log_level = "info";
  caf_tls_flags tls;
};

/// `mcprt budget-server`: one fleet budget actor, published over CAF's
/// middleman, until SIGINT / SIGTERM. Prints `listening on caf://HOST:PORT`
/// first. 0 after a clean stop, 1 when it cannot start, 2 on bad flags.
/// Loopback only, unless TLS is configured.
int run_budget_server(const budget_server_flags& f);

} // namespace mcprt::cli
