#pragma once

#include <optional>
#include <string>

#include <caf/fwd.hpp>

namespace mcprt::cli {

/// TLS for CAF's middleman (`--caf-tls-cert`, `--caf-tls-key`,
/// `--caf-tls-ca`): all three or none. Each end proves itself with a
/// certificate the CA signed (mutual authentication). None: the owner's
/// own identity (resolve_caf_tls).
struct caf_tls_flags {
  std::string cert, key, ca;
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// Empty when usable: none, or all three naming readable regular files.
std::string check_caf_tls(const caf_tls_flags& t);

/// Every CAF port and client of mcprt speaks TLS with mutual
/// authentication. Without flags, `t` is filled with the owner's identity
/// under `<home>/.mcprt/caf/` (made the first time): then only processes
/// that can read the owner's key connect. Empty when usable, else why not.
std::string resolve_caf_tls(caf_tls_flags& t, const std::string& home);

/// Why `host` cannot be listened on with these flags, or empty: the owner's
/// identity is for one machine; across machines the fleet needs a CA of its
/// own, given with the flags.
std::string check_caf_host(const caf_tls_flags& given, const std::string& host);

/// Loads caf::openssl::manager (and the middleman) with these files.
void use_caf_tls(caf::actor_system_config& cfg, const caf_tls_flags& t);

struct budget_server_flags {
  std::string home; // the owner's identity is under <home>/.mcprt/caf/ (default $HOME)
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
/// middleman over TLS, until SIGINT / SIGTERM. Prints `listening on
/// caf+tls://HOST:PORT` first. 0 after a clean stop, 1 when it cannot start
/// (the owner's identity among others), 2 on bad flags. Loopback only,
/// unless the --caf-tls-* flags give a CA.
int run_budget_server(const budget_server_flags& f);

} // namespace mcprt::cli
