#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/budget_ledger.hpp"

namespace mcprt {

/// How the workspace runs its connections, decided once at start.
struct runtime_mode {
  /// false with MCPRT_NO_POOL=1: no pool and no workspace budget; each
  /// session manages its own connections under a session budget.
  bool pool = true;
  std::optional<std::size_t> budget;
  budget_mode mode = budget_mode::off;
};

/// The capability tags a host sees. `mcp_workspace_pool` and
/// `mcp_pool_restart` exist only with the pool; `mcp_guardrails` marks the
/// budget surface.
std::vector<std::string> capabilities(const runtime_mode& m);

/// Reads MCPRT_NO_POOL, MCPRT_BUDGET and MCPRT_BUDGET_MODE (flags, when
/// given, win: pass them as the optional arguments). Only plain positive
/// decimal integers are budgets; `enforce` without a budget is refused; the
/// default mode is `warn` with a budget, else `off`. Errors are returned as
/// text, one per problem, and leave the value unset.
struct runtime_mode_result {
  runtime_mode mode;
  std::vector<std::string> errors;
};
runtime_mode_result resolve_runtime_mode(const char* no_pool_env, const char* budget_env,
                                         const char* mode_env,
                                         const std::optional<std::string>& budget_flag = std::nullopt,
                                         const std::optional<std::string>& mode_flag = std::nullopt,
                                         bool no_pool_flag = false);

} // namespace mcprt
