// Black-box tests of `--profile vscode|cursor|claude`: the real binary reads
// other clients' MCP files in place, keeps the gating of their scope, and
// `explain` says which file each server came from.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using profiles_test = cli_test;

const json* server(const json& doc, const std::string& name) {
  return find_server(doc, name);
}

TEST_F(profiles_test, vscode_reads_servers_from_dot_vscode_and_gates_them) {
  write_file(ws_ / ".vscode" / "mcp.json", R"({
    // as VS Code writes it
    "inputs": [{"type": "promptString", "id": "token", "password": true}],
    "servers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "."]}}
  })");
  write_file(home_ / ".config" / "Code" / "User" / "mcp.json",
             R"({"servers": {"mine": {"type": "http", "url": "https://example.invalid/mcp"}}})");
  // mcprt's own files are not read under this profile.
  write_file(project_file(), R"({"mcpServers": {"other": {"command": "x"}}})");
  auto r = explain({"--profile", "vscode"});
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_EQ(r.j["profile"], "vscode");
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"fs", "mine"}));
  const json* fs_ = server(r.j, "fs");
  ASSERT_TRUE(fs_);
  EXPECT_EQ((*fs_)["scope"], "project");
  EXPECT_EQ((*fs_)["admitted"], false);
  EXPECT_EQ((*fs_)["reason"], "pending_approval");
  EXPECT_EQ((*fs_)["source"], (ws_ / ".vscode" / "mcp.json").string());
  const json* mine = server(r.j, "mine");
  ASSERT_TRUE(mine);
  EXPECT_EQ((*mine)["scope"], "user");
  EXPECT_EQ((*mine)["admitted"], true);
  EXPECT_EQ((*mine)["transport"], "http");
  ASSERT_EQ(r.j["files"].size(), 2u) << r.out;
  EXPECT_EQ(r.j["files"][1]["format"], "vscode");

  // Approval works as for .mcp.json, and is kept under ~/.mcprt.
  auto ok = decide("approve", "fs", {"--profile", "vscode"});
  ASSERT_EQ(ok.code, 0) << describe(ok);
  EXPECT_TRUE(fs::exists(approvals_file()));
  auto after = explain({"--profile", "vscode"});
  ASSERT_TRUE(after.has_json()) << describe(after);
  EXPECT_EQ((*server(after.j, "fs"))["admitted"], true);

  auto table = mcprt({"explain", "--profile", "vscode", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(table.code, 0) << describe(table);
  EXPECT_NE(table.out.find(".vscode/mcp.json"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("~/.config/Code/User/mcp.json"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("files read (profile vscode)"), std::string::npos) << table.out;
}

TEST_F(profiles_test, cursor_reads_both_of_its_files_with_their_scopes) {
  write_file(ws_ / ".cursor" / "mcp.json", R"({"mcpServers": {"repo": {"command": "x"}}})");
  write_file(home_ / ".cursor" / "mcp.json", R"({"mcpServers": {"mine": {"command": "y"}, "repo": {"command": "z"}}})");
  auto r = explain({"--profile", "cursor"});
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"mine", "repo"}));
  // The project file wins over the user file for the same name, and is gated.
  EXPECT_EQ((*server(r.j, "repo"))["scope"], "project");
  EXPECT_EQ((*server(r.j, "repo"))["source"], (ws_ / ".cursor" / "mcp.json").string());
  EXPECT_EQ((*server(r.j, "repo"))["reason"], "pending_approval");
  EXPECT_EQ((*server(r.j, "mine"))["scope"], "user");
  EXPECT_EQ((*server(r.j, "mine"))["admitted"], true);
  EXPECT_EQ((*server(r.j, "mine"))["source"], (home_ / ".cursor" / "mcp.json").string());
}

TEST_F(profiles_test, claude_reads_the_user_scope_of_dot_claude_json_and_the_project_mcp_json) {
  write_file(home_ / ".claude.json", R"({
    "numStartups": 3,
    "projects": {")" + ws_.string() + R"(": {"mcpServers": {"local": {"command": "never"}}}},
    "mcpServers": {"mem": {"type": "stdio", "command": "npx", "args": ["-y", "server-memory"]}}
  })");
  write_file(project_file(), R"({"mcpServers": {"repo": {"command": "x"}}})");
  auto r = explain({"--profile", "claude"});
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"mem", "repo"}));
  EXPECT_EQ((*server(r.j, "mem"))["scope"], "user");
  EXPECT_EQ((*server(r.j, "mem"))["admitted"], true);
  EXPECT_EQ((*server(r.j, "repo"))["scope"], "project");
  EXPECT_EQ((*server(r.j, "repo"))["reason"], "pending_approval");
  EXPECT_EQ(r.j["files"][0]["format"], "claude");
}

TEST_F(profiles_test, a_broken_vscode_file_is_an_error_at_its_position) {
  write_file(ws_ / ".vscode" / "mcp.json", "{\n  \"servers\": {\n    \"fs\": {\"command\": 7}\n  }\n}\n");
  auto r = explain({"--profile", "vscode"});
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["line"], 3);
  EXPECT_NE(r.j["errors"][0]["message"].get<std::string>().find("servers.fs.command"), std::string::npos) << r.out;
}

TEST_F(profiles_test, explain_names_the_source_of_every_server_for_the_default_profile) {
  write_file(user_settings(), R"({"mcpServers": {"u": {"command": "x"}}})");
  write_file(project_file(), R"({"mcpServers": {"p": {"command": "x"}}})");
  write_file(workspace_settings(), R"({"mcpServers": {"w": {"command": "x"}}})");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_EQ((*server(r.j, "u"))["source"], user_settings().string());
  EXPECT_EQ((*server(r.j, "p"))["source"], project_file().string());
  EXPECT_EQ((*server(r.j, "w"))["source"], workspace_settings().string());
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_NE(table.out.find("~/.mcprt/settings.json"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" .mcp.json "), std::string::npos) << table.out;
}

} // namespace
} // namespace mcprt_cli_test
