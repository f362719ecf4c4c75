#include "core/sandbox_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/server_config.hpp"
#include "core/settings.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

server_config entry(config_scope scope, json extra = json::object()) {
  json v = {{"command", "node"}, {"args", {"server.js"}}};
  for (auto& [k, x] : extra.items())
    v[k] = x;
  auto r = parse_server_config("srv", v, scope, {"mcpServers", "srv"});
  EXPECT_TRUE(r.config) << (r.error ? r.error->message : "");
  return r.config ? *r.config : server_config{};
}

bool has(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

bool has_prefix(const std::vector<std::string>& xs, const std::string& prefix) {
  return std::any_of(xs.begin(), xs.end(), [&](const std::string& x) { return x.rfind(prefix, 0) == 0; });
}

sandbox_support everything() {
  return parse_sandbox_probe("userns=1 mountns=1 netns=1 pidns=1 proc=1 landlock=7 seccomp=1 cgroup_pids=0 "
                             "cgroup_memory=1 root=0");
}

} // namespace

TEST(sandbox_spec, accepts_the_four_forms) {
  EXPECT_EQ(parse_sandbox_spec(true, {}).spec->mode, sandbox_spec::kind::on);
  EXPECT_EQ(parse_sandbox_spec(false, {}).spec->mode, sandbox_spec::kind::off);
  EXPECT_EQ(parse_sandbox_spec("required", {}).spec->mode, sandbox_spec::kind::required);
  auto r = parse_sandbox_spec(json{{"read", {"~/.npmrc"}}, {"write", {"${workspaceFolder}/out", "/var/tmp/x"}},
                                   {"network", {"api.github.com", "localhost:8080", "[::1]:9"}}, {"required", true}},
                              {});
  ASSERT_TRUE(r.spec) << *r.error;
  EXPECT_EQ(r.spec->mode, sandbox_spec::kind::required);
  EXPECT_EQ(r.spec->write.size(), 2u);
  EXPECT_EQ(r.spec->network.size(), 3u);
}

TEST(sandbox_spec, errors_name_the_key_and_position_and_never_the_value) {
  auto bad_path = parse_sandbox_spec(json{{"write", {"/ok", "relative/secret-ish"}}}, {"mcpServers", "s", "sandbox"});
  ASSERT_TRUE(bad_path.error);
  EXPECT_EQ(bad_path.error_path, (std::vector<std::string>{"mcpServers", "s", "sandbox", "write", "1"}));
  EXPECT_TRUE(bad_path.index_last);
  EXPECT_EQ(bad_path.error->find("secret-ish"), std::string::npos);
  EXPECT_TRUE(parse_sandbox_spec(json{{"network", {"has space"}}}, {}).error);
  EXPECT_TRUE(parse_sandbox_spec(json{{"network", {"host:99999"}}}, {}).error);
  EXPECT_TRUE(parse_sandbox_spec(json{{"network", {"host:"}}}, {}).error);
  EXPECT_TRUE(parse_sandbox_spec(json{{"unknown", 1}}, {}).error);
  EXPECT_TRUE(parse_sandbox_spec("sometimes", {}).error);
  EXPECT_TRUE(parse_sandbox_spec(3, {}).error);
  json many = json::array();
  for (int i = 0; i < 65; ++i)
    many.push_back("/p" + std::to_string(i));
  EXPECT_TRUE(parse_sandbox_spec(json{{"read", many}}, {}).error);
}

TEST(sandbox_spec, a_settings_file_reports_the_position) {
  auto doc = parse_settings_text("/ws/.mcp.json", config_scope::project,
                                 R"({"mcpServers": {"s": {"command": "x", "sandbox": {"write": [7]}}}})");
  ASSERT_TRUE(doc.error);
  EXPECT_NE(doc.error->message.find("mcpServers.s.sandbox.write[0]"), std::string::npos) << doc.error->message;
  EXPECT_GT(doc.error->column, 0);
}

TEST(effective_sandbox, project_servers_are_sandboxed_by_default_and_user_servers_not) {
  EXPECT_TRUE(effective_sandbox(entry(config_scope::project), {}).enabled);
  EXPECT_TRUE(effective_sandbox(entry(config_scope::workspace), {}).enabled);
  EXPECT_FALSE(effective_sandbox(entry(config_scope::user), {}).enabled);
  sandbox_settings all;
  all.user_default = sandbox_default::all;
  EXPECT_TRUE(effective_sandbox(entry(config_scope::user), all).enabled);
  sandbox_settings off;
  off.user_default = sandbox_default::off;
  EXPECT_FALSE(effective_sandbox(entry(config_scope::project), off).enabled);
}

TEST(effective_sandbox, a_project_entry_only_narrows) {
  auto s = effective_sandbox(entry(config_scope::project, {{"sandbox", false}}), {});
  EXPECT_TRUE(s.enabled);
  EXPECT_TRUE(has_prefix(s.notes, "its \"sandbox\": false is not honoured"));
  auto lists = effective_sandbox(
    entry(config_scope::project, {{"sandbox", {{"write", {"~"}}, {"network", {"evil.example"}}, {"read", {"~/.ssh"}}}}}),
    {});
  EXPECT_TRUE(lists.write.empty());
  EXPECT_TRUE(lists.network.empty());
  EXPECT_TRUE(lists.read.empty());
  EXPECT_TRUE(has_prefix(lists.notes, "its \"sandbox\" read, write and network lists are not honoured"));
  // Narrowing is honoured: "required", and "on" under an owner's "off".
  EXPECT_TRUE(effective_sandbox(entry(config_scope::project, {{"sandbox", "required"}}), {}).required);
  sandbox_settings off;
  off.user_default = sandbox_default::off;
  EXPECT_TRUE(effective_sandbox(entry(config_scope::project, {{"sandbox", true}}), off).enabled);
  auto env = effective_sandbox(entry(config_scope::project, {{"inheritEnv", true}}), {});
  EXPECT_FALSE(env.inherit_all_env);
  EXPECT_TRUE(has_prefix(env.notes, "its \"inheritEnv\" is not honoured"));
}

TEST(effective_sandbox, workspace_settings_cannot_switch_it_off_and_the_owner_widens_one_server) {
  sandbox_settings ws_off;
  ws_off.workspace_default = sandbox_default::off;
  auto s = effective_sandbox(entry(config_scope::project), ws_off);
  EXPECT_TRUE(s.enabled);
  EXPECT_TRUE(has_prefix(s.notes, "the workspace settings' \"mcp.sandbox\": \"off\" is not honoured"));
  sandbox_settings ws_all;
  ws_all.workspace_default = sandbox_default::all;
  EXPECT_TRUE(effective_sandbox(entry(config_scope::user), ws_all).enabled);

  sandbox_settings owner;
  owner.owner_for["srv"] = *parse_sandbox_spec(json{{"write", {"~/notes"}}, {"network", {"api.github.com"}}}, {}).spec;
  auto widened = effective_sandbox(entry(config_scope::project), owner);
  EXPECT_TRUE(widened.enabled);
  EXPECT_EQ(widened.write, std::vector<std::string>{"~/notes"});
  EXPECT_EQ(widened.network, std::vector<std::string>{"api.github.com"});
  owner.owner_for["srv"] = *parse_sandbox_spec(false, {}).spec;
  EXPECT_FALSE(effective_sandbox(entry(config_scope::project), owner).enabled);
}

TEST(effective_sandbox, assembled_settings_apply_the_owner_keys_and_change_the_connection_id) {
  auto project = parse_settings_text("/ws/.mcp.json", config_scope::project,
                                     R"({"mcpServers": {"srv": {"command": "node"}}})");
  auto plain = parse_settings_text("/home/u/.mcprt/settings.json", config_scope::user, "{}");
  auto widen = parse_settings_text("/home/u/.mcprt/settings.json", config_scope::user,
                                   R"({"mcp": {"sandboxFor": {"srv": false}}})");
  auto ws_off = parse_settings_text("/ws/.mcprt/settings.json", config_scope::workspace,
                                    R"({"mcp": {"sandbox": "off"}})");
  ASSERT_TRUE(project.ok() && plain.ok() && widen.ok() && ws_off.ok());
  auto boxed = assemble({&plain, &project, &ws_off});
  auto open = assemble({&widen, &project});
  EXPECT_TRUE(boxed.servers["srv"].effective_sandbox.enabled);
  EXPECT_FALSE(open.servers["srv"].effective_sandbox.enabled);
  EXPECT_NE(boxed.servers["srv"].connection_id_cache, open.servers["srv"].connection_id_cache);
  EXPECT_FALSE(servers_equal(boxed.servers, open.servers));
  auto bad = parse_settings_text("/home/u/.mcprt/settings.json", config_scope::user,
                                 R"({"mcp": {"sandbox": "sometimes"}})");
  ASSERT_TRUE(bad.error);
  EXPECT_NE(bad.error->message.find("mcp.sandbox"), std::string::npos);
}

TEST(sandbox_setting, survives_its_json_form) {
  auto s = effective_sandbox(entry(config_scope::user, {{"sandbox", {{"write", {"/a"}}, {"network", {"h:1"}}}},
                                                        {"inheritEnv", {"X"}}}),
                             {});
  auto back = sandbox_setting_from_json(s.to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->key(), s.key());
  EXPECT_FALSE(sandbox_setting_from_json(json{{"enabled", "yes"}}));
  EXPECT_FALSE(sandbox_setting_from_json(42));
}

TEST(plan_sandbox, hides_the_owners_secrets_in_both_homes_and_other_homes) {
  sandbox_setting s;
  s.enabled = true;
  sandbox_context ctx;
  ctx.home = "/srv/owner";
  ctx.env_home = "/home/owner";
  ctx.state_dirs = {".qwen"};
  ctx.workspace = "/work/proj";
  ctx.other_homes = {"/home/bob"};
  auto p = plan_sandbox(s, ctx, {});
  for (const char* x : {"/srv/owner/.ssh", "/home/owner/.ssh", "/srv/owner/.mcprt", "/home/owner/.mcprt",
                        "/srv/owner/.qwen", "/srv/owner/.aws", "/srv/owner/.config/gh", "/srv/owner/.mozilla",
                        "/srv/owner/.netrc", "/home/bob"})
    EXPECT_TRUE(has(p.hide, x)) << x;
  EXPECT_TRUE(has(p.write, "/work/proj"));
  EXPECT_TRUE(has(p.write, "/dev/null"));
  EXPECT_FALSE(has(p.write, "/srv/owner"));
  EXPECT_EQ(p.max_processes, 128);
}

TEST(plan_sandbox, keeps_what_the_server_needs_and_what_read_lifts) {
  sandbox_setting s;
  s.enabled = true;
  s.read = {"~/.npmrc", "~/.config/gh/hosts.yml"};
  s.write = {"~/notes", "${workspaceFolder}/../shared"};
  sandbox_context ctx;
  ctx.home = "/h";
  ctx.workspace = "/h/.ssh/oddly-here";
  auto p = plan_sandbox(s, ctx, {"/h/.docker/bin/server"});
  EXPECT_FALSE(has(p.hide, "/h/.ssh"));       // holds the workspace
  EXPECT_FALSE(has(p.hide, "/h/.docker"));    // holds the command
  EXPECT_FALSE(has(p.hide, "/h/.npmrc"));     // lifted
  EXPECT_FALSE(has(p.hide, "/h/.config/gh")); // lifted by a path inside it
  EXPECT_TRUE(has(p.lifted, "/h/.npmrc"));
  EXPECT_TRUE(has(p.hide, "/h/.aws"));
  EXPECT_TRUE(has(p.write, "/h/notes"));
  EXPECT_TRUE(has(p.write, "/h/.ssh/shared"));
}

TEST(expand_sandbox_path, resolves_home_and_workspace_and_refuses_the_rest) {
  sandbox_context ctx;
  ctx.home = "/h";
  ctx.workspace = "/w";
  EXPECT_EQ(expand_sandbox_path("~", ctx), "/h");
  EXPECT_EQ(expand_sandbox_path("~/a/../b/", ctx), "/h/b");
  EXPECT_EQ(expand_sandbox_path("${workspaceFolder}/x", ctx), "/w/x");
  EXPECT_EQ(expand_sandbox_path("/abs", ctx), "/abs");
  EXPECT_EQ(expand_sandbox_path("rel", ctx), "");
  EXPECT_EQ(expand_sandbox_path("~bob/x", ctx), "");
}

TEST(plan_launch, everything_in_force_on_a_machine_that_has_it_all) {
  sandbox_plan p;
  p.hide = {"/h/.ssh"};
  p.write = {"/w"};
  auto l = plan_launch(p, everything());
  for (auto* x : {protection::secrets, protection::writes, protection::network, protection::pid, protection::scope,
                  protection::syscalls, protection::privileges, protection::processes, protection::memory})
    EXPECT_TRUE(has(l.in_force, x)) << x;
  EXPECT_TRUE(l.missing.empty());
  EXPECT_TRUE(l.complete());
  EXPECT_EQ(l.forward_port, 0);
  EXPECT_EQ(l.args.front(), "sandbox");
  EXPECT_EQ(l.args.back(), "--");
  EXPECT_TRUE(has(l.args, "/h/.ssh"));
  p.network = {"api.github.com"};
  auto net = plan_launch(p, everything());
  EXPECT_EQ(net.forward_port, sandbox_forward_port);
  EXPECT_TRUE(has(net.in_force, protection::egress));
}

TEST(plan_launch, says_what_is_missing_and_why) {
  sandbox_plan p;
  p.network = {"h"};
  auto no_userns = parse_sandbox_probe("userns=0 mountns=0 netns=0 pidns=0 proc=0 landlock=3 seccomp=1");
  auto l = plan_launch(p, no_userns);
  EXPECT_TRUE(has(l.in_force, protection::writes));
  EXPECT_TRUE(has(l.in_force, protection::syscalls));
  EXPECT_TRUE(has_prefix(l.missing, std::string(protection::secrets) + ": user namespaces"));
  EXPECT_TRUE(has_prefix(l.missing, std::string(protection::egress) + ":"));
  EXPECT_TRUE(has_prefix(l.missing, std::string(protection::scope) + ": it needs Landlock ABI 6 (this kernel has 3)"));
  EXPECT_FALSE(l.complete());
  // Root: RLIMIT_NPROC does not bind it, so its cap needs a pids cgroup.
  auto root = parse_sandbox_probe("userns=1 mountns=1 netns=1 pidns=1 proc=1 landlock=7 seccomp=1 root=1");
  EXPECT_TRUE(has_prefix(plan_launch({}, root).missing, std::string(protection::processes) + ": root's cap"));
  auto root_cg = parse_sandbox_probe("userns=1 mountns=1 netns=1 pidns=1 proc=1 landlock=7 seccomp=1 cgroup_pids=1 root=1");
  auto rl = plan_launch({}, root_cg);
  EXPECT_TRUE(has(rl.in_force, protection::processes));
  EXPECT_TRUE(has(rl.args, "--cgroup-pids"));
  // Without the image there is nothing to wrap: all missing, one reason.
  sandbox_support none;
  none.why_none = "the reaper runs without its image";
  auto n = plan_launch({}, none);
  EXPECT_TRUE(n.args.empty());
  EXPECT_TRUE(n.in_force.empty());
  EXPECT_FALSE(n.complete());
}

TEST(server_environment, passes_the_safe_names_and_never_mcprt) {
  std::map<std::string, std::string> parent = {{"PATH", "/bin"}, {"HOME", "/h"}, {"LC_ALL", "C"}, {"TMPDIR", "/t"},
                                               {"AWS_SECRET_ACCESS_KEY", "s"}, {"MCPRT_TOKEN", "t"},
                                               {"GITHUB_TOKEN", "g"}};
  auto env = server_environment(parent, {{"OWN", "1"}}, false, {});
  EXPECT_EQ(env.count("PATH"), 1u);
  EXPECT_EQ(env.count("LC_ALL"), 1u);
  EXPECT_EQ(env.count("TMPDIR"), 1u);
  EXPECT_EQ(env.count("OWN"), 1u);
  EXPECT_EQ(env.count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(env.count("MCPRT_TOKEN"), 0u);
  auto named = server_environment(parent, {}, false, {"GITHUB_TOKEN", "MCPRT_TOKEN"});
  EXPECT_EQ(named.count("GITHUB_TOKEN"), 1u);
  EXPECT_EQ(named.count("MCPRT_TOKEN"), 0u);
  auto all = server_environment(parent, {}, true, {});
  EXPECT_EQ(all.count("AWS_SECRET_ACCESS_KEY"), 1u);
  EXPECT_EQ(all.count("MCPRT_TOKEN"), 0u);
}
