// Black-box tests of variables in settings: the real daemon reads a
// `.mcp.json` written for another agent, with `${VAR}` placeholders, and a
// VS Code `.vscode/mcp.json` with an `${input:ID}`, and starts real
// mcprt-test-server children with the expanded values. Secrets that arrive
// through variables never leave: not in logs, events or the snapshot.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

const std::string token_value = "tok-from-env-93b1";
const std::string input_value = "tok-from-input-5d2e";

class variables_test : public graceful_daemon_test {
protected:
  /// `mcprt input set ID --workspace ws --home home [extra]` with `value` on stdin.
  int input_set(const std::string& id, const std::string& value, std::vector<std::string> extra = {}) const {
    auto in = root_ / "stdin";
    write_file(in, value);
    std::vector<std::string> args{MCPRT_BIN, "input", "set", id, "--workspace", ws_.string(), "--home", home_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(in.c_str(), O_RDONLY);
      int null = ::open("/dev/null", O_WRONLY);
      if (fd < 0 || null < 0) ::_exit(126);
      ::dup2(fd, 0);
      ::dup2(null, 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  json call(const std::string& server, const std::string& tool, const std::string& text) const {
    json body{{"server", server}, {"tool", tool}, {"arguments", {{"text", text}}}};
    auto r = post("/workspace/mcp/tools/call", body.dump());
    return r ? json{{"status", r->status}, {"body", body_of(r)}} : json(nullptr);
  }
};

TEST_F(variables_test, a_dot_mcp_json_with_placeholders_works_unchanged) {
  // As another agent's repository has it: placeholders in args, env and cwd.
  json p = test_server_config({"--name-prefix", "${PFX:-dflt_}", "--pid-file", "${workspaceFolder}/p.pid"});
  p["env"] = {{"API_TOKEN", "${API_TOKEN}"}};
  p["cwd"] = "${workspaceFolder}";
  json q = test_server_config({"--name-prefix", "q_"});
  q["env"] = {{"NEEDED", "${MCPRT_TEST_NOT_SET_ANYWHERE}"}};
  write_file(project_file(), json{{"mcpServers", {{"p", p}, {"q", q}}}}.dump(2));
  ASSERT_TRUE(start({"--log-level", "debug"}, {{"API_TOKEN", token_value}}));
  // Gated as any project file; approving hashes the file as written.
  EXPECT_EQ(server("p").value("reason", ""), "pending_approval");
  ASSERT_EQ(post("/workspace/mcp/p/approve")->status, 200);
  ASSERT_EQ(post("/workspace/mcp/q/approve")->status, 200);
  ASSERT_TRUE(connected("p")) << snapshot().dump(2);
  // ${PFX:-dflt_} took its default, ${workspaceFolder} the workspace.
  auto r = call("p", "dflt_echo", "hi");
  ASSERT_EQ(r["status"], 200) << r.dump();
  EXPECT_EQ(r["body"]["content"][0]["text"], "hi");
  EXPECT_TRUE(fs::exists(ws_ / "p.pid"));

  // A variable that is not set keeps its server out, and says which and where.
  ASSERT_TRUE(wait_until([&] { return server("q").value("reason", "") == "variable_error"; })) << snapshot().dump(2);
  EXPECT_NE(server("q").value("status", ""), "connected");
  sse_stream events(port_, {{"Last-Event-ID", "0"}});
  auto ev = events.wait_for("settings_error", [](const json& d) {
    return d.value("message", "")
           == "mcpServers.q.env.NEEDED: variable MCPRT_TEST_NOT_SET_ANYWHERE is not set and has no default";
  });
  bool named = ev.has_value();
  if (ev) EXPECT_EQ(ev->j().value("path", ""), project_file().string());
  EXPECT_TRUE(named) << "no settings_error naming the variable";

  // The expanded token is a secret: not in the snapshot or the log.
  EXPECT_EQ(snapshot().dump().find(token_value), std::string::npos);
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  EXPECT_EQ(daemon_->err().find(token_value), std::string::npos) << "a secret was logged";
}

TEST_F(variables_test, errors_quoting_a_url_or_command_show_the_placeholder_not_the_value) {
  const std::string path_secret = "p4th-s3cret-0e9a", command_secret = "/nonexistent/c0mmand-s3cret-77f1";
  json web{{"httpUrl", "http://127.0.0.1:1/mcp/${MCP_PATH_KEY}"}};
  json cmd{{"command", "${MCP_COMMAND}"}};
  write_file(user_settings(), json{{"mcpServers", {{"web", web}, {"cmd", cmd}}}}.dump(2));
  ASSERT_TRUE(start({}, {{"MCP_PATH_KEY", path_secret}, {"MCP_COMMAND", command_secret}}));
  ASSERT_TRUE(wait_until([&] {
    return !server("web").value("last_error", json()).is_null() && !server("cmd").value("last_error", json()).is_null();
  })) << snapshot().dump(2);
  auto web_error = server("web")["last_error"].get<std::string>();
  auto cmd_error = server("cmd")["last_error"].get<std::string>();
  EXPECT_NE(web_error.find("/mcp/${MCP_PATH_KEY}"), std::string::npos) << web_error;
  EXPECT_NE(cmd_error.find("${MCP_COMMAND}"), std::string::npos) << cmd_error;
  auto shown = snapshot().dump();
  EXPECT_EQ(shown.find(path_secret), std::string::npos) << shown;
  EXPECT_EQ(shown.find(command_secret), std::string::npos) << shown;
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  EXPECT_EQ(daemon_->err().find(path_secret), std::string::npos) << daemon_->err();
  EXPECT_EQ(daemon_->err().find(command_secret), std::string::npos) << daemon_->err();
}

TEST_F(variables_test, a_vscode_input_is_needs_input_until_stored_then_connects) {
  json s = test_server_config({"--name-prefix", "vs_"});
  s["type"] = "stdio";
  s["env"] = {{"API_KEY", "${input:api-key}"}};
  write_file(ws_ / ".vscode" / "mcp.json",
             json{{"inputs", {{{"type", "promptString"}, {"id", "api-key"}, {"password", true}}}},
                  {"servers", {{"tools", s}}}}
               .dump(2));
  ASSERT_TRUE(start({"--profile", "vscode"}));
  EXPECT_EQ(server("tools").value("reason", ""), "pending_approval") << snapshot().dump(2);
  ASSERT_EQ(post("/workspace/mcp/tools/approve")->status, 200);
  ASSERT_TRUE(wait_until([&] { return server("tools").value("reason", "") == "needs_input"; })) << snapshot().dump(2);
  auto refused = call("tools", "vs_echo", "x");
  EXPECT_EQ(refused["status"], 409) << refused.dump();
  EXPECT_NE(refused["body"].value("remedy", "").find("mcprt input set"), std::string::npos) << refused.dump();

  // Stored from another process: the running daemon picks it up.
  ASSERT_EQ(input_set("api-key", input_value + "\n", {"--profile", "vscode"}), 0);
  ASSERT_TRUE(connected("tools")) << snapshot().dump(2);
  auto r = call("tools", "vs_echo", "after");
  ASSERT_EQ(r["status"], 200) << r.dump();
  auto id = server("tools").value("fingerprint", "");

  // A new value is a new connection (the fingerprint covers expanded values).
  ASSERT_EQ(input_set("api-key", "another-value", {"--profile", "vscode"}), 0);
  ASSERT_TRUE(wait_until([&] {
    auto t = server("tools");
    return t.value("status", "") == "connected" && t.value("fingerprint", "") != id;
  })) << snapshot().dump(2);
  EXPECT_EQ(snapshot().dump().find(input_value), std::string::npos);
  EXPECT_EQ(snapshot().dump().find("another-value"), std::string::npos);
}

} // namespace
} // namespace mcprt_cli_test
