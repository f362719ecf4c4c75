// A settings value where a `"sandbox"`, `"inheritEnv"` or the owner's
// `mcp.sandboxFor` stands, through core/sandbox_policy: the input is JSON
// text (anything that does not parse is skipped: the settings parser has
// its own target).
//
// Whatever the value: nothing crashes; a refusal names a position under
// the key and never quotes a value; an accepted spec has bounded lists of
// paths that expand to absolute paths or nothing, and network entries of
// bounded size; its effective setting survives its JSON form; the plan it
// makes hides and writes only absolute paths, and the sandbox's arguments
// carry each of them as one argument.

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/sandbox_policy.hpp"
#include "core/server_config.hpp"
#include "tests/fuzz/fuzz_checks.hpp"

using mcprt::fuzz::printable;
using mcprt::fuzz::require;
using nlohmann::json;

namespace {

void check_spec(const json& v) {
  const std::vector<std::string> at{"mcpServers", "s", "sandbox"};
  auto r = mcprt::parse_sandbox_spec(v, at);
  require(r.spec.has_value() != r.error.has_value());
  if (r.error) {
    require(printable(*r.error));
    require(r.error_path.size() >= at.size());
    for (std::size_t i = 0; i < at.size(); ++i)
      require(r.error_path[i] == at[i]);
    return;
  }
  auto& spec = *r.spec;
  for (auto* list : {&spec.read, &spec.write, &spec.network})
    require(list->size() <= mcprt::max_sandbox_entries);
  for (auto& n : spec.network)
    require(!n.empty() && n.size() <= 262 && printable(n));
  mcprt::sandbox_context ctx;
  ctx.home = "/home/owner";
  ctx.workspace = "/work/ws";
  for (auto* list : {&spec.read, &spec.write}) {
    for (auto& p : *list) {
      auto x = mcprt::expand_sandbox_path(p, ctx);
      require(!x.empty() && x[0] == '/');
    }
  }
  // As a user entry (all honoured) and a project entry (only narrowing).
  for (auto scope : {mcprt::config_scope::user, mcprt::config_scope::project}) {
    auto parsed = mcprt::parse_server_config("s", json{{"command", "x"}, {"sandbox", v}}, scope, {"mcpServers", "s"});
    require(parsed.config.has_value());
    auto s = mcprt::effective_sandbox(*parsed.config, {});
    if (scope == mcprt::config_scope::project) require(s.enabled && s.write.empty() && s.network.empty());
    auto back = mcprt::sandbox_setting_from_json(s.to_json());
    require(back && back->key() == s.key());
    auto plan = mcprt::plan_sandbox(s, ctx, {});
    for (auto* list : {&plan.hide, &plan.write})
      for (auto& p : *list)
        require(!p.empty() && p[0] == '/');
    auto all = mcprt::parse_sandbox_probe("userns=1 mountns=1 netns=1 pidns=1 proc=1 landlock=7 seccomp=1");
    auto launch = mcprt::plan_launch(plan, all);
    require(!launch.args.empty() && launch.args.front() == "sandbox" && launch.args.back() == "--");
    for (std::size_t i = 0; i + 1 < launch.args.size(); ++i)
      if (launch.args[i] == "--hide" || launch.args[i] == "--write") require(launch.args[i + 1][0] == '/');
  }
}

void check_inherit(const json& v) {
  mcprt::inherit_env_spec e;
  auto r = mcprt::parse_inherit_env(v, {"mcpServers", "s", "inheritEnv"}, e);
  if (r.error) {
    require(printable(*r.error));
    return;
  }
  for (auto& n : e.names)
    require(!n.empty() && n.find('=') == std::string::npos);
  auto env = mcprt::server_environment({{"MCPRT_TOKEN", "t"}, {"PATH", "/bin"}}, {}, e.all, e.names);
  require(env.count("MCPRT_TOKEN") == 0);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto v = json::parse(text, nullptr, false);
  if (v.is_discarded()) return 0;
  check_spec(v);
  check_inherit(v);
  return 0;
}
