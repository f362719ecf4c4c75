// Black-box tests of `mcprt approve` / `mcprt reject` and of how explain
// shows the recorded decisions (bound to the hash of the server's config:
// a changed config is pending again).

#include <regex>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.hpp"
#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

class approve_test : public cli_test {
 protected:
  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), R"({"mcpServers": {"echo": {"command": "srv"}}})");
    set_project_tools({"--tools", "2"});
  }

  void set_project_tools(const std::vector<std::string>& args,
                         const std::string& description = "from the project") const {
    json cfg = {{"command", "mcprt-test-server"}, {"args", args}, {"description", description}};
    write_file(project_file(), json{{"mcpServers", {{"project-tools", cfg}}}}.dump(2));
  }

  // The state of one server after a fresh explain.
  json state(const std::string& name, std::initializer_list<std::string> extra = {}) const {
    auto r = explain(extra);
    EXPECT_EQ(r.code, 0) << describe(r);
    EXPECT_TRUE(r.has_json()) << describe(r);
    last_ = r.j;
    const json* s = find_server(r.j, name);
    return s ? *s : json(nullptr);
  }
  std::vector<std::string> pending() const { return strings(last_["gating"]["pending"]); }
  std::vector<std::string> promptable() const { return strings(last_["gating"]["promptable"]); }

  mutable json last_;
};

TEST_F(approve_test, approve_admits_a_pending_project_server) {
  auto s = state("project-tools");
  EXPECT_EQ(s["reason"], "pending_approval");
  EXPECT_EQ(s["approval"], "pending");
  EXPECT_EQ(s["admitted"], false);

  auto a = decide("approve", "project-tools");
  ASSERT_EQ(a.code, 0) << describe(a);
  EXPECT_NE(a.out.find("project-tools"), std::string::npos) << a.out;

  s = state("project-tools");
  EXPECT_EQ(s["admitted"], true) << s.dump();
  EXPECT_EQ(s["reason"], null_j) << s.dump();
  EXPECT_EQ(s["approval"], "approved") << s.dump();
  EXPECT_TRUE(pending().empty()) << last_["gating"].dump();
  EXPECT_TRUE(promptable().empty()) << last_["gating"].dump();
  // A trusted server is untouched.
  EXPECT_EQ(state("echo")["approval"], null_j);
}

TEST_F(approve_test, approvals_file_is_private_and_has_the_documented_shape) {
  // Let approve create <home>/.mcprt itself.
  fs::remove_all(home_ / ".mcprt");
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  ASSERT_TRUE(fs::exists(approvals_file()));
  struct stat st {};
  ASSERT_EQ(::stat(approvals_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  // The directory it created is private too.
  ASSERT_EQ(::stat(approvals_file().parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << std::oct << (st.st_mode & 0777);

  json doc = json::parse(slurp(approvals_file()), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << slurp(approvals_file());
  ASSERT_EQ(doc.size(), 1u) << doc.dump();
  ASSERT_TRUE(doc.contains(ws_.string())) << doc.dump();
  const json& project = doc[ws_.string()];
  ASSERT_TRUE(project.is_object());
  ASSERT_EQ(project.size(), 1u) << doc.dump();
  const json& rec = project["project-tools"];
  ASSERT_TRUE(rec.is_object()) << doc.dump();
  EXPECT_EQ(rec.size(), 2u) << rec.dump();
  EXPECT_EQ(rec["status"], "approved");
  const std::string hash = rec.value("hash", "");
  EXPECT_TRUE(std::regex_match(hash, std::regex("^[0-9a-f]{64}$"))) << rec.dump();

  ASSERT_EQ(decide("reject", "project-tools").code, 0);
  doc = json::parse(slurp(approvals_file()), nullptr, false);
  EXPECT_EQ(doc[ws_.string()]["project-tools"]["status"], "rejected") << doc.dump();
  EXPECT_EQ(doc[ws_.string()]["project-tools"]["hash"], hash) << doc.dump();
  ASSERT_EQ(::stat(approvals_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
}

TEST_F(approve_test, editing_args_makes_it_pending_again) {
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  ASSERT_EQ(state("project-tools")["approval"], "approved");

  set_project_tools({"--tools", "3"});
  auto s = state("project-tools");
  EXPECT_EQ(s["approval"], "pending") << s.dump();
  EXPECT_EQ(s["reason"], "pending_approval") << s.dump();
  EXPECT_EQ(pending(), std::vector<std::string>{"project-tools"});
  EXPECT_EQ(promptable(), std::vector<std::string>{"project-tools"});

  // Argument order matters too.
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  ASSERT_EQ(state("project-tools")["approval"], "approved");
  set_project_tools({"3", "--tools"});
  EXPECT_EQ(state("project-tools")["approval"], "pending");
}

TEST_F(approve_test, description_and_key_order_do_not_reask) {
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  set_project_tools({"--tools", "2"}, "reworded description");
  EXPECT_EQ(state("project-tools")["approval"], "approved");
  // Same config with its keys in another order.
  write_file(project_file(), R"({"mcpServers": {"project-tools": {
      "description": "x", "args": ["--tools", "2"], "command": "mcprt-test-server"}}})");
  EXPECT_EQ(state("project-tools")["approval"], "approved");
}

TEST_F(approve_test, reject_keeps_it_pending_but_not_promptable) {
  auto r = decide("reject", "project-tools");
  ASSERT_EQ(r.code, 0) << describe(r);
  auto s = state("project-tools");
  EXPECT_EQ(s["admitted"], false) << s.dump();
  EXPECT_EQ(s["reason"], "rejected") << s.dump();
  EXPECT_EQ(s["approval"], "rejected") << s.dump();
  EXPECT_EQ(pending(), std::vector<std::string>{"project-tools"});
  EXPECT_TRUE(promptable().empty()) << last_["gating"].dump();

  // An explicit approve overrides the rejection.
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  EXPECT_EQ(state("project-tools")["approval"], "approved");
}

TEST_F(approve_test, rejection_stands_until_the_config_changes) {
  ASSERT_EQ(decide("reject", "project-tools").code, 0);
  set_project_tools({"--tools", "2", "--verbose"});
  auto s = state("project-tools");
  EXPECT_EQ(s["approval"], "pending") << s.dump();
  EXPECT_EQ(promptable(), std::vector<std::string>{"project-tools"});
}

TEST_F(approve_test, removing_and_re_adding_identically_keeps_the_decision) {
  ASSERT_EQ(decide("reject", "project-tools").code, 0);
  write_file(project_file(), R"({"mcpServers": {}})");
  EXPECT_EQ(state("project-tools"), null_j);
  EXPECT_TRUE(pending().empty());
  set_project_tools({"--tools", "2"});
  auto s = state("project-tools");
  EXPECT_EQ(s["reason"], "rejected") << s.dump();
  EXPECT_TRUE(promptable().empty());

  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  fs::remove(project_file());
  EXPECT_EQ(state("project-tools"), null_j);
  set_project_tools({"--tools", "2"});
  s = state("project-tools");
  EXPECT_EQ(s["approval"], "approved") << s.dump();
  EXPECT_EQ(s["admitted"], true) << s.dump();
}

TEST_F(approve_test, workspace_settings_servers_are_approvable) {
  write_file(workspace_settings(), R"({"mcpServers": {"ws-tool": {"command": "x"}}})");
  EXPECT_EQ(state("ws-tool")["approval"], "pending");
  auto r = decide("approve", "ws-tool");
  ASSERT_EQ(r.code, 0) << describe(r);
  auto s = state("ws-tool");
  EXPECT_EQ(s["scope"], "workspace");
  EXPECT_EQ(s["approval"], "approved");
  EXPECT_EQ(s["admitted"], true);
  // The other gated server is still pending.
  EXPECT_EQ(pending(), std::vector<std::string>{"project-tools"});
}

TEST_F(approve_test, decisions_are_per_workspace) {
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  auto other = root_ / "other-ws";
  fs::create_directories(other);
  fs::copy_file(project_file(), other / ".mcp.json");
  auto r = mcprt({"explain", "--json", "--workspace", other.string(), "--home", home_.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ((*find_server(r.j, "project-tools"))["approval"], "pending") << r.out;
  EXPECT_EQ(state("project-tools")["approval"], "approved");
}

TEST_F(approve_test, relative_workspace_spelling_finds_the_same_decision) {
  fs::create_directories(ws_ / "sub");
  auto a = mcprt({"approve", "project-tools", "--workspace", "./sub/..", "--home", home_.string()},
                 ws_);
  ASSERT_EQ(a.code, 0) << describe(a);
  auto r = mcprt({"explain", "--json", "--home", home_.string()}, ws_); // default: cwd
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["workspace"], ws_.string());
  EXPECT_EQ((*find_server(r.j, "project-tools"))["approval"], "approved") << r.out;
  EXPECT_EQ(state("project-tools")["approval"], "approved");
}

TEST_F(approve_test, approve_of_an_unknown_server_fails) {
  auto r = decide("approve", "no-such-server");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("no-such-server"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(approvals_file()));
  r = decide("reject", "no-such-server");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("no-such-server"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(approvals_file()));
}

TEST_F(approve_test, approve_of_a_user_server_says_it_needs_no_approval) {
  auto r = decide("approve", "echo");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("echo"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("need approval"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(approvals_file()));
  EXPECT_EQ(decide("reject", "echo").code, 2);
}

TEST_F(approve_test, approve_of_a_session_server_fails) {
  // A --mcp-config server shadowing a gated one is trusted: nothing to approve.
  write_file(root_ / "top.json", R"({"mcpServers": {"project-tools": {"command": "other"}}})");
  auto r = decide("approve", "project-tools", {"--mcp-config", (root_ / "top.json").string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("project-tools"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(approvals_file()));
  auto s = state("project-tools", {"--mcp-config", (root_ / "top.json").string()});
  EXPECT_EQ(s["scope"], "session");
  EXPECT_EQ(s["admitted"], true);
  EXPECT_TRUE(pending().empty());
}

TEST_F(approve_test, approve_warns_about_a_broken_file_but_still_decides) {
  write_file(workspace_settings(), "{ broken");
  auto r = decide("approve", "project-tools");
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find(workspace_settings().string()), std::string::npos) << r.err;
  auto e = explain();
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ((*find_server(e.j, "project-tools"))["approval"], "approved");
}

TEST_F(approve_test, corrupt_approvals_file_reads_as_empty_and_is_backed_up) {
  write_file(approvals_file(), "not json at all");
  auto r = explain();
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ((*find_server(r.j, "project-tools"))["approval"], "pending");
  EXPECT_NE(r.err.find(approvals_file().string()), std::string::npos) << r.err;

  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  EXPECT_EQ(state("project-tools")["approval"], "approved");
  bool backed_up = false;
  for (auto& e : fs::directory_iterator(approvals_file().parent_path()))
    if (e.path().filename().string().rfind("mcp-approvals.json.corrupt-", 0) == 0)
      backed_up = backed_up || slurp(e.path()) == "not json at all";
  EXPECT_TRUE(backed_up);
}

TEST_F(approve_test, other_projects_records_are_kept) {
  write_file(approvals_file(),
             R"({"/some/other/project": {"x": {"hash": "abc", "status": "approved"}}})");
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  json doc = json::parse(slurp(approvals_file()), nullptr, false);
  EXPECT_EQ(doc["/some/other/project"]["x"]["status"], "approved") << doc.dump();
  EXPECT_EQ(doc[ws_.string()]["project-tools"]["status"], "approved") << doc.dump();
}

TEST_F(approve_test, human_output_after_approval_has_no_hint) {
  ASSERT_EQ(decide("approve", "project-tools").code, 0);
  auto r = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("project-tools"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("mcprt approve project-tools"), std::string::npos) << r.out;
}

TEST_F(approve_test, qwen_profile_keeps_approvals_under_qwen) {
  // "With --profile qwen the .mcprt dirs become .qwen" and approvals_store
  // documents default_path(home, config_dir) as following the profile:
  // a qwen run must not create or use <home>/.mcprt.
  fs::remove_all(home_ / ".mcprt");
  write_file(ws_ / ".qwen" / "settings.json", R"({"mcpServers": {"wq": {"command": "x"}}})");
  auto r = decide("approve", "wq", {"--profile", "qwen"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::exists(home_ / ".qwen" / "mcp-approvals.json"));
  EXPECT_FALSE(fs::exists(home_ / ".mcprt")) << "qwen profile wrote under .mcprt";
  EXPECT_EQ(state("wq", {"--profile", "qwen"})["approval"], "approved");
}

// -- the store as others may leave it ---------------------------------------------

TEST_F(approve_test, a_symlinked_lock_file_is_refused_and_nothing_is_written_through_it) {
  fs::create_directories(approvals_file().parent_path());
  auto victim = root_ / "victim";
  fs::create_symlink(victim, approvals_file().string() + ".lock");
  auto r = decide("approve", "project-tools");
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(victim)) << "a file was created through the planted symlink";
  EXPECT_FALSE(fs::exists(approvals_file()));
}

TEST_F(approve_test, a_fifo_in_place_of_the_store_neither_hangs_nor_is_replaced) {
  fs::create_directories(approvals_file().parent_path());
  ASSERT_EQ(::mkfifo(approvals_file().c_str(), 0600), 0);
  auto e = explain(); // would block for ever on a blocking open
  EXPECT_EQ(e.code, 0) << describe(e);
  EXPECT_NE(e.err.find("not a regular file"), std::string::npos) << e.err;
  auto r = decide("approve", "project-tools");
  EXPECT_NE(r.code, 0) << describe(r);
  struct stat st {};
  ASSERT_EQ(::lstat(approvals_file().c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

} // namespace

// -- decisions written straight into the store reach a running daemon --------------

namespace {

class approve_store_test : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    json cfg = {{"command", MCPRT_TEST_SERVER}, {"args", json::array()}};
    write_file(project_file(), json{{"mcpServers", {{"project-tools", cfg}}}}.dump(2));
    // The same store under another spelling: the client then writes it
    // itself instead of asking the daemon, as another process would.
    link_ = root_ / "home-link";
    fs::create_directory_symlink(home_, link_);
  }

  run_result decide_directly(const std::string& verb) const {
    auto r = mcprt({verb, "project-tools", "--workspace", ws_.string(), "--home", link_.string()});
    EXPECT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.out.find("through the daemon"), std::string::npos)
        << "went through the daemon; this test needs a direct write: " << r.out;
    return r;
  }

  fs::path link_;
};

TEST_F(approve_store_test, an_approval_written_to_the_store_starts_the_server_and_a_rejection_stops_it) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(wait_until([&] { return server("project-tools").value("reason", "") == "pending_approval"; }))
      << snapshot().dump(2);
  decide_directly("approve");
  ASSERT_TRUE(status_is("project-tools", "connected")) << snapshot().dump(2);
  EXPECT_EQ(server("project-tools")["approval"], "approved");

  decide_directly("reject");
  ASSERT_TRUE(wait_until([&] {
    auto s = server("project-tools");
    return s.value("status", "") == "disconnected" && s.value("reason", "") == "rejected";
  })) << snapshot().dump(2);
  EXPECT_TRUE(server("project-tools")["pid"].is_null());
}

} // namespace
} // namespace mcprt_cli_test
