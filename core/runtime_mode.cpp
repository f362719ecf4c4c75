#include "core/runtime_mode.hpp"

namespace mcprt {

std::vector<std::string> capabilities(const runtime_mode& m) {
  std::vector<std::string> out{"mcp_guardrails"};
  if (m.pool) {
    out.push_back("mcp_pool_restart");
    out.push_back("mcp_workspace_pool");
  }
  return out;
}

runtime_mode_result resolve_runtime_mode(const char* no_pool_env, const char* budget_env,
                                         const char* mode_env,
                                         const std::optional<std::string>& budget_flag,
                                         const std::optional<std::string>& mode_flag, bool no_pool_flag) {
  runtime_mode_result r;
  r.mode.pool = !no_pool_flag && !(no_pool_env && std::string(no_pool_env) == "1");
  std::optional<std::string> budget_text = budget_flag;
  std::string budget_source = "--budget";
  if (!budget_text && budget_env && *budget_env) {
    budget_text = budget_env;
    budget_source = "MCPRT_BUDGET";
  }
  if (budget_text) {
    auto parsed = parse_budget_value(*budget_text);
    if (parsed.value) r.mode.budget = parsed.value;
    else r.errors.push_back(budget_source + ": " + parsed.error);
  }
  std::optional<std::string> mode_text = mode_flag;
  std::string mode_source = "--budget-mode";
  if (!mode_text && mode_env && *mode_env) {
    mode_text = mode_env;
    mode_source = "MCPRT_BUDGET_MODE";
  }
  if (mode_text) {
    if (auto m = parse_budget_mode(*mode_text)) {
      r.mode.mode = *m;
      if (*m == budget_mode::enforce && !r.mode.budget)
        r.errors.push_back(mode_source + ": enforce needs a budget (--budget N or MCPRT_BUDGET)");
    } else {
      r.errors.push_back(mode_source + ": expected off, warn or enforce, got '" + *mode_text + "'");
    }
  } else {
    r.mode.mode = r.mode.budget ? budget_mode::warn : budget_mode::off;
  }
  return r;
}

} // namespace mcprt
