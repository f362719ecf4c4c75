#pragma once

#include <optional>
#include <string>

namespace mcprt::cli {

struct budget_server_flags {
  long long caf_port = 0; // 0: any free port (printed)
  std::string caf_host = "127.0.0.1";
  std::optional<std::string> budget; // as typed
  std::string mode = "enforce";
  long long lease_ms = 10000;
  long long claim_grace_ms = 1500;
  std::string log_level = "info";
};

/// `mcprt budget-server`: one fleet budget actor, published over CAF's
/// middleman, until SIGINT / SIGTERM. Prints `listening on caf://HOST:PORT`
/// first. 0 after a clean stop, 1 when it cannot start, 2 on bad flags.
int run_budget_server(const budget_server_flags& f);

} // namespace mcprt::cli
