// The daemon on other clients' files: `mcprt serve --profile cursor|claude`
// watches them like its own, keeps their scopes' gating, and reloads them
// live. Real daemon, real mcprt-test-server children, real inotify.

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

using profiles_daemon_test = graceful_daemon_test;

TEST_F(profiles_daemon_test, cursor_files_are_watched_with_the_gating_of_their_scope) {
  write_file(home_ / ".cursor" / "mcp.json", json{{"mcpServers", {{"mine", test_server_config({"--tools", "1"})}}}}.dump(2));
  ASSERT_TRUE(start({"--profile", "cursor"}));
  ASSERT_TRUE(connected("mine")) << snapshot().dump(2);
  EXPECT_EQ(server("mine").value("scope", ""), "user");

  // A project file appears while the daemon runs: read live, and gated.
  write_file(ws_ / ".cursor" / "mcp.json",
             json{{"mcpServers", {{"repo", test_server_config({"--name-prefix", "repo_"})}}}}.dump(2));
  ASSERT_TRUE(wait_until([&] { return server("repo").value("reason", "") == "pending_approval"; }))
    << snapshot().dump(2);
  EXPECT_EQ(server("repo").value("scope", ""), "project");
  ASSERT_EQ(post("/workspace/mcp/repo/approve")->status, 200);
  ASSERT_TRUE(connected("repo")) << snapshot().dump(2);
}

TEST_F(profiles_daemon_test, claude_state_written_to_dot_claude_json_restarts_nothing) {
  auto claude = [&](int startups) {
    return json{{"numStartups", startups},
                {"projects", {{ws_.string(), {{"history", {"a prompt"}}}}}},
                {"mcpServers", {{"mem", test_server_config({"--tools", "1"})}}}}
      .dump(2);
  };
  write_file(home_ / ".claude.json", claude(1));
  ASSERT_TRUE(start({"--profile", "claude"}));
  ASSERT_TRUE(connected("mem")) << snapshot().dump(2);
  auto pid = server("mem")["pid"];
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  // Claude Code rewrites the file with its own state all the time; only the
  // servers are ours. A marker server in the project file tells when the
  // daemon has seen both saves.
  write_file(home_ / ".claude.json", claude(2));
  write_file(project_file(), json{{"mcpServers", {{"marker", test_server_config({})}}}}.dump(2));
  ASSERT_TRUE(wait_until([&] { return server("marker").value("reason", "") == "pending_approval"; }))
    << snapshot().dump(2);
  EXPECT_EQ(server("mem")["pid"], pid);
  EXPECT_EQ(server("mem").value("status", ""), "connected");
  // And no settings_changed names ~/.claude.json: its change was not one of ours.
  bool claude_changed = false;
  while (auto ev = events.next(200ms)) {
    if (ev->kind != "settings_changed") continue;
    for (auto& c : ev->j().value("changes", json::array()))
      claude_changed = claude_changed || c.value("path", "") == (home_ / ".claude.json").string();
  }
  EXPECT_FALSE(claude_changed);
}

} // namespace
} // namespace mcprt_cli_test
