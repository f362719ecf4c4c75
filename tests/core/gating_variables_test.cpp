// Variables meet gating: what is approved is the file as written, what runs
// is the config with its variables expanded.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/fingerprint.hpp"
#include "core/gating.hpp"
#include "core/workspace_gating.hpp"
#include "core/workspace_view.hpp"
#include "test_support.hpp"

using namespace mcprt;
using mcprt::test::make_map;
using nlohmann::json;

namespace {

struct fake_env {
  std::map<std::string, std::string> vars;
  std::function<std::optional<std::string>(const std::string&)> lookup() const {
    return [this](const std::string& k) -> std::optional<std::string> {
      auto i = vars.find(k);
      if (i == vars.end()) return std::nullopt;
      return i->second;
    };
  }
};

gating_result gating_with_variables(const server_map& servers, const variable_context& ctx,
                                    std::function<approval_state(const server_config&)> approval = {}) {
  gating_input in;
  in.servers = &servers;
  in.approval = approval ? approval : [](const server_config&) { return approval_state::approved; };
  in.variables = &ctx;
  return compute_gating(in);
}

const server_map token_server = make_map(json::parse(R"({
  "gh": {"command": "gh-mcp", "args": ["--root", "${workspaceFolder}"],
         "env": {"TOKEN": "${GH_TOKEN}"}, "headers": {}}
})"), config_scope::user);

TEST(GatingVariables, AdmittedServersRunWithTheirVariablesExpanded) {
  fake_env env{{{"GH_TOKEN", "s3cret"}}};
  variable_context ctx{env.lookup(), {}, "/ws", "/home/u"};
  auto g = gating_with_variables(token_server, ctx);
  ASSERT_TRUE(g.servers.at("gh").admitted);
  auto admitted = g.admitted(token_server);
  ASSERT_EQ(admitted.size(), 1u);
  auto& runs = admitted.at("gh");
  EXPECT_EQ(runs.env.at("TOKEN"), "s3cret");
  EXPECT_EQ(runs.args, (std::vector<std::string>{"--root", "/ws"}));
  // The running config has its own connection id; the file's is unchanged.
  EXPECT_NE(connection_id(runs), connection_id(token_server.at("gh")));
  EXPECT_EQ(token_server.at("gh").env.at("TOKEN"), "${GH_TOKEN}");
}

TEST(GatingVariables, AChangedValueIsANewConnectionButTheSameApproval) {
  // The server is gated: the approval lookup sees what the decision is for.
  auto servers = make_map(json::parse(R"({"gh": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}}})"),
                          config_scope::project);
  std::vector<server_config> asked;
  auto approval = [&](const server_config& c) {
    asked.push_back(c);
    return approval_state::approved;
  };
  fake_env env{{{"GH_TOKEN", "one"}}};
  variable_context ctx{env.lookup(), {}, "/ws", "/home/u"};
  auto before = gating_with_variables(servers, ctx, approval).admitted(servers).at("gh");
  env.vars["GH_TOKEN"] = "two";
  auto after = gating_with_variables(servers, ctx, approval).admitted(servers).at("gh");
  EXPECT_EQ(after.env.at("TOKEN"), "two");
  EXPECT_NE(connection_id(before), connection_id(after));
  // The approval hash is over the entry as written: a token that arrives
  // through a variable never enters it, and a new token does not re-prompt.
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].env.at("TOKEN"), "${GH_TOKEN}");
  EXPECT_EQ(approval_hash(asked[0]), approval_hash(asked[1]));
  EXPECT_EQ(approval_hash(asked[1]), approval_hash(servers.at("gh")));
}

TEST(GatingVariables, ValuesFromTheEnvironmentAreKeptAsSecretsToHideInMessages) {
  auto servers = make_map(json::parse(R"({"h": {"type": "http", "url": "https://x.example/mcp/${KEY}/sse",
                                                 "headers": {"A": "${SHORT}", "B": "${KEY:-unused}"},
                                                 "cwd": "${workspaceFolder}", "env": {"D": "${UNSET:-default-text}"}}})"),
                          config_scope::user);
  fake_env env{{{"KEY", "k3y-s3cret"}, {"SHORT", "ab"}}};
  variable_context ctx{env.lookup(), {}, "/ws/project", "/home/u"};
  auto g = gating_with_variables(servers, ctx);
  auto admitted = g.admitted(servers);
  auto& runs = admitted.at("h");
  using pair = std::pair<std::string, std::string>;
  // From the environment only (not the workspace, not a default), and long
  // enough to mean something; longest first.
  EXPECT_EQ(runs.secrets, (std::vector<pair>{{"k3y-s3cret", "${KEY:-unused}"}, {"k3y-s3cret", "${KEY}"}}));
  EXPECT_EQ(without_secrets(runs, "POST https://x.example:443/mcp/k3y-s3cret/sse: HTTP 401"),
            "POST https://x.example:443/mcp/${KEY:-unused}/sse: HTTP 401");
  EXPECT_EQ(without_secrets(runs, "cannot change to directory '/ws/project'"), "cannot change to directory '/ws/project'");
  EXPECT_TRUE(servers.at("h").secrets.empty());
}

TEST(GatingVariables, AMissingVariableKeepsTheServerOutAndNamesIt) {
  fake_env env;
  variable_context ctx{env.lookup(), {}, "/ws", "/home/u"};
  auto g = gating_with_variables(token_server, ctx);
  auto& adm = g.servers.at("gh");
  EXPECT_FALSE(adm.admitted);
  EXPECT_EQ(adm.reason, unavailable_reason::variable_error);
  ASSERT_TRUE(adm.problem);
  EXPECT_EQ(adm.problem->message(), "env.TOKEN: variable GH_TOKEN is not set and has no default");
  EXPECT_TRUE(g.admitted(token_server).empty()); // never started with an empty value
  EXPECT_TRUE(g.lists.pending.empty());
}

TEST(GatingVariables, AnInputWithoutAValueIsNeedsInput) {
  auto servers = make_map(json::parse(R"({
    "api": {"type": "http", "url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${input:api-key}"}}
  })"), config_scope::user);
  std::map<std::string, std::string> stored;
  variable_context ctx;
  ctx.input = [&](const std::string& id) -> std::optional<std::string> {
    auto i = stored.find(id);
    if (i == stored.end()) return std::nullopt;
    return i->second;
  };
  auto g = gating_with_variables(servers, ctx);
  EXPECT_EQ(g.servers.at("api").reason, unavailable_reason::needs_input);
  EXPECT_NE(remedy(unavailable_reason::needs_input, "api").find("mcprt input set"), std::string::npos);
  stored["api-key"] = "k-123";
  auto h = gating_with_variables(servers, ctx);
  ASSERT_TRUE(h.servers.at("api").admitted);
  EXPECT_EQ(h.admitted(servers).at("api").headers.at("Authorization"), "Bearer k-123");
}

TEST(GatingVariables, AServerWaitingForApprovalIsNotExpanded) {
  auto servers = make_map(json::parse(R"({"p": {"command": "x", "env": {"T": "${UNSET_HERE}"}}})"),
                          config_scope::project);
  variable_context ctx;
  auto g = gating_with_variables(servers, ctx, [](const server_config&) { return approval_state::pending; });
  EXPECT_EQ(g.servers.at("p").reason, unavailable_reason::pending_approval);
  EXPECT_FALSE(g.servers.at("p").problem);
}

TEST(GatingVariables, AValueThatBreaksTheRulesOfItsKeyIsRefusedWithoutShowingIt) {
  auto servers = make_map(json::parse(R"({"h": {"type": "http", "url": "https://x.example/mcp",
                                                 "headers": {"X-Key": "${KEY}"}}})"),
                          config_scope::user);
  fake_env env{{{"KEY", "abc\r\nInjected: yes"}}};
  variable_context ctx{env.lookup(), {}, "/ws", "/home/u"};
  auto g = gating_with_variables(servers, ctx);
  auto& adm = g.servers.at("h");
  EXPECT_EQ(adm.reason, unavailable_reason::variable_error);
  ASSERT_TRUE(adm.problem);
  EXPECT_EQ(adm.problem->what, expansion_problem::kind::invalid_value);
  auto msg = adm.problem->message();
  EXPECT_EQ(msg.rfind("headers.X-Key: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find("Injected"), std::string::npos) << msg;
}

TEST(GatingVariables, AConfigWithoutVariablesRunsAsWritten) {
  auto servers = make_map(json::parse(R"({"plain": {"command": "x", "args": ["$HOME", "${1}"]}})"),
                          config_scope::user);
  variable_context ctx;
  auto g = gating_with_variables(servers, ctx);
  ASSERT_TRUE(g.servers.at("plain").admitted);
  EXPECT_TRUE(g.expanded.empty());
  EXPECT_EQ(connection_id(g.admitted(servers).at("plain")), connection_id(servers.at("plain")));
}

namespace fs = std::filesystem;

class WorkspaceVariables : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcprt-wsvars-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::create_directories(root_ / "ws");
    fs::create_directories(root_ / "home");
    opts_.workspace = root_ / "ws";
    opts_.home = root_ / "home";
    opts_.environment = env_.lookup();
  }
  void TearDown() override { fs::remove_all(root_); }
  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  fs::path root_;
  fake_env env_;
  workspace_options opts_;
};

TEST_F(WorkspaceVariables, AMissingVariableIsASettingsErrorNamingItAndItsKey) {
  write(root_ / "home/.mcprt/settings.json", R"({"mcpServers": {"gh": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}}}})");
  approvals_store approvals(root_ / "home/.mcprt/mcp-approvals.json");
  auto view = load_workspace(opts_, approvals);
  EXPECT_EQ(view.file_errors, 0u);
  ASSERT_EQ(view.errors.size(), 1u);
  EXPECT_EQ(view.errors[0].path, (root_ / "home/.mcprt/settings.json").string());
  EXPECT_EQ(view.errors[0].message, "mcpServers.gh.env.TOKEN: variable GH_TOKEN is not set and has no default");
  EXPECT_EQ(view.gating.servers.at("gh").reason, unavailable_reason::variable_error);

  env_.vars["GH_TOKEN"] = "t0ken";
  auto fixed = load_workspace(opts_, approvals);
  EXPECT_TRUE(fixed.errors.empty());
  EXPECT_TRUE(fixed.gating.servers.at("gh").admitted);
  std::ostringstream table;
  write_explain_table(fixed, true, table);
  EXPECT_EQ(table.str().find("t0ken"), std::string::npos) << table.str();
  EXPECT_EQ(explain_json(fixed, true).dump().find("t0ken"), std::string::npos);
}

TEST_F(WorkspaceVariables, VsCodeInputsComeFromTheStoreAndAStoredValueOpensTheGate) {
  opts_.settings_profile = *profile::parse("vscode");
  write(root_ / "ws/.vscode/mcp.json", R"({
    "inputs": [{"type": "promptString", "id": "key", "password": true}],
    "servers": {"api": {"type": "http", "url": "https://api.example/mcp",
                        "headers": {"Authorization": "Bearer ${input:key}"}}}
  })");
  approvals_store approvals(root_ / "home/.mcprt/mcp-approvals.json");
  input_store inputs(input_store::default_path(root_ / "home"));
  auto view = load_workspace(opts_, approvals, &inputs);
  // Approved first: the project file is gated whatever the client.
  ASSERT_EQ(view.gating.servers.at("api").reason, unavailable_reason::pending_approval);
  approvals.set(view.workspace, "api", approval_hash(view.merged.servers.at("api")), approval_state::approved);
  view = load_workspace(opts_, approvals, &inputs);
  EXPECT_EQ(view.gating.servers.at("api").reason, unavailable_reason::needs_input);
  EXPECT_TRUE(view.errors.empty()); // not an error in the file

  workspace_gating model(opts_, approvals, &inputs);
  model.set_documents(view.documents);
  EXPECT_TRUE(model.admit({}).admitted.empty());
  EXPECT_FALSE(model.refresh()); // nothing changed
  inputs.set(view.workspace, "key", "k-1");
  EXPECT_TRUE(model.refresh());
  auto adm = model.admit({});
  ASSERT_EQ(adm.admitted.size(), 1u);
  EXPECT_EQ(adm.admitted.at("api").headers.at("Authorization"), "Bearer k-1");
  inputs.set(view.workspace, "key", "k-2");
  EXPECT_TRUE(model.refresh()); // a new value is a new connection
}

} // namespace
