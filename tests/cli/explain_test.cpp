// Black-box tests of `mcprt explain`: the real binary on temp homes and
// workspaces: the scopes and their layering, and gating (launch bound,
// allow and exclude lists, approvals).

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

// Checks one server entry of an explain --json document.
::testing::AssertionResult server_is(const json& doc, const std::string& name,
                                     const std::string& scope, bool admitted, const json& reason,
                                     const json& approval) {
  const json* s = find_server(doc, name);
  if (!s) return ::testing::AssertionFailure() << "no server '" << name << "' in " << doc.dump();
  bool ok = s->value("scope", "") == scope && s->value("admitted", !admitted) == admitted
            && s->contains("reason") && (*s)["reason"] == reason && s->contains("approval")
            && (*s)["approval"] == approval;
  if (!ok)
    return ::testing::AssertionFailure()
           << "server '" << name << "' is " << s->dump() << ", expected scope=" << scope
           << " admitted=" << admitted << " reason=" << reason.dump()
           << " approval=" << approval.dump();
  return ::testing::AssertionSuccess();
}

std::string fingerprint_of(const json& doc, const std::string& name) {
  const json* s = find_server(doc, name);
  return s ? s->value("fingerprint", "") : std::string("<missing>");
}

// ---------------------------------------------------------------------------
// 1. The bundled example

class example_test : public cli_test {
 protected:
  void SetUp() override {
    cli_test::SetUp();
    example_ws_ = fs::path(MCPRT_SOURCE_DIR) / "examples" / "workspace";
    // A private copy of the example home, so approvals never touch the repo;
    // decisions someone made in the repo copy must not leak in either.
    fs::copy(fs::path(MCPRT_SOURCE_DIR) / "examples" / "home", home_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    for (auto& e : fs::directory_iterator(home_ / ".mcprt"))
      if (e.path().filename().string().rfind("mcp-approvals.json", 0) == 0) fs::remove(e.path());
  }

  run_result explain_example(std::vector<std::string> extra = {"--json"}) const {
    std::vector<std::string> args = {"explain", "--workspace", example_ws_.string(), "--home",
                                     home_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return mcprt(args);
  }

  fs::path example_ws_;
};

TEST_F(example_test, json_explains_every_server_of_the_bundled_example) {
  auto r = explain_example();
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_EQ(r.j["workspace"], example_ws_.lexically_normal().string());
  EXPECT_EQ(r.j["trusted"], true);
  EXPECT_EQ(server_names(r.j),
            (std::vector<std::string>{"calc", "echo", "everything", "legacy-search", "project-tools"}));
  EXPECT_TRUE(server_is(r.j, "echo", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "calc", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "legacy-search", "user", false, "excluded", null_j));
  EXPECT_TRUE(server_is(r.j, "project-tools", "project", false, "pending_approval", "pending"));
  std::regex fp("^([^:]+)::[0-9a-f]{16}$");
  for (auto& s : r.j["servers"]) {
    EXPECT_EQ(s["transport"], "stdio") << s.dump();
    std::smatch m;
    auto f = s.value("fingerprint", "");
    ASSERT_TRUE(std::regex_match(f, m, fp)) << f;
    EXPECT_EQ(m[1].str(), s["name"].get<std::string>());
  }
  EXPECT_EQ(r.j["gating"]["allowed"], null_j);
  EXPECT_EQ(strings(r.j["gating"]["excluded"]), std::vector<std::string>{"legacy-*"});
  EXPECT_EQ(strings(r.j["gating"]["pending"]), std::vector<std::string>{"project-tools"});
  EXPECT_EQ(strings(r.j["gating"]["promptable"]), std::vector<std::string>{"project-tools"});
  EXPECT_TRUE(r.j["errors"].is_array() && r.j["errors"].empty()) << r.j["errors"].dump();
}

TEST_F(example_test, explain_writes_no_approvals_file) {
  auto r = explain_example();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_FALSE(fs::exists(approvals_file()));
}

TEST_F(example_test, human_output_names_each_server_and_the_approve_hint) {
  auto r = explain_example({});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_FALSE(r.has_json());
  for (auto name : {"echo", "calc", "legacy-search", "project-tools"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  EXPECT_NE(r.out.find("mcprt approve project-tools"), std::string::npos) << r.out;
  // Only the pending server gets the hint.
  EXPECT_EQ(r.out.find("mcprt approve echo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("excluded"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------------------
// 4. Layering: a higher scope replaces a same-named server whole

enum scope_ix { user_s, project_s, workspace_s, session_s };
const char* scope_names[] = {"user", "project", "workspace", "session"};

class layering_test : public cli_test,
                      public ::testing::WithParamInterface<std::pair<int, int>> {
 protected:
  fs::path file_of(int scope) const {
    switch (scope) {
      case user_s: return user_settings();
      case project_s: return project_file();
      case workspace_s: return workspace_settings();
      default: return root_ / "top.json";
    }
  }
  void define(int scope, const json& cfg) const {
    write_file(file_of(scope), json{{"mcpServers", {{"s", cfg}}}}.dump(2));
  }
  void clear(int scope) const { fs::remove(file_of(scope)); }
  run_result run() const {
    // --mcp-config is always given; a missing file is an error, so pass it
    // only when the session scope is in play.
    auto [lo, hi] = GetParam();
    if (lo == session_s || hi == session_s) {
      if (!fs::exists(file_of(session_s))) write_file(file_of(session_s), "{}");
      return explain({"--mcp-config", file_of(session_s).string()});
    }
    return explain();
  }
};

TEST_P(layering_test, higher_scope_wins_whole) {
  auto [lo, hi] = GetParam();
  SCOPED_TRACE(std::string(scope_names[lo]) + " < " + scope_names[hi]);
  // The lower definition carries fields the higher one lacks: a field merge
  // would show up in the fingerprint (env and cwd are part of it).
  json lo_cfg = {{"command", "srv"}, {"args", {"--from", "lo"}}, {"env", {{"ONLY_LO", "1"}}},
                 {"cwd", "/lo"}};
  json hi_cfg = {{"command", "srv"}, {"args", {"--from", "hi"}}};
  bool hi_gated = hi == project_s || hi == workspace_s;

  define(lo, lo_cfg);
  define(hi, hi_cfg);
  auto both = run();
  ASSERT_EQ(both.code, 0) << describe(both);
  ASSERT_TRUE(both.has_json()) << describe(both);

  clear(lo);
  auto hi_only = run();
  ASSERT_EQ(hi_only.code, 0) << describe(hi_only);

  define(lo, lo_cfg);
  clear(hi);
  auto lo_only = run();
  ASSERT_EQ(lo_only.code, 0) << describe(lo_only);

  ASSERT_EQ(server_names(both.j), std::vector<std::string>{"s"});
  const json& s = *find_server(both.j, "s");
  EXPECT_EQ(s["scope"], scope_names[hi]);
  EXPECT_EQ(s["fingerprint"], fingerprint_of(hi_only.j, "s"));
  EXPECT_NE(s["fingerprint"], fingerprint_of(lo_only.j, "s"));
  EXPECT_EQ(s["fingerprint"].get<std::string>().rfind("s::", 0), 0u);
  // Gating follows the winning definition's scope.
  auto pending = strings(both.j["gating"]["pending"]);
  if (hi_gated) {
    EXPECT_EQ(s["approval"], "pending");
    EXPECT_EQ(s["reason"], "pending_approval");
    EXPECT_EQ(pending, std::vector<std::string>{"s"});
  } else {
    EXPECT_EQ(s["approval"], null_j);
    EXPECT_EQ(s["admitted"], true);
    EXPECT_TRUE(pending.empty()) << both.j["gating"].dump();
  }
}

INSTANTIATE_TEST_SUITE_P(all_pairs, layering_test,
                         ::testing::Values(std::pair{user_s, project_s},
                                           std::pair{user_s, workspace_s},
                                           std::pair{user_s, session_s},
                                           std::pair{project_s, workspace_s},
                                           std::pair{project_s, session_s},
                                           std::pair{workspace_s, session_s}),
                         [](const auto& info) {
                           return std::string(scope_names[info.param.first]) + "_below_"
                                  + scope_names[info.param.second];
                         });

using scopes_test = cli_test;

TEST_F(scopes_test, every_scope_contributes_and_transports_are_reported) {
  write_file(user_settings(), R"({"mcpServers": {"u": {"command": "a"}}})");
  write_file(project_file(), R"({"mcpServers": {"p": {"url": "http://127.0.0.1:1/sse"}}})");
  write_file(workspace_settings(), R"({"mcpServers": {"w": {"httpUrl": "http://127.0.0.1:1/mcp"}}})");
  write_file(root_ / "top.json", R"({"mcpServers": {"t": {"command": "b"}}})");
  auto r = explain({"--mcp-config", (root_ / "top.json").string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "t", "u", "w"}));
  EXPECT_TRUE(server_is(r.j, "u", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "p", "project", false, "pending_approval", "pending"));
  EXPECT_TRUE(server_is(r.j, "w", "workspace", false, "pending_approval", "pending"));
  EXPECT_TRUE(server_is(r.j, "t", "session", true, null_j, null_j));
  EXPECT_EQ((*find_server(r.j, "u"))["transport"], "stdio");
  EXPECT_EQ((*find_server(r.j, "p"))["transport"], "sse");
  EXPECT_EQ((*find_server(r.j, "w"))["transport"], "http");
  EXPECT_EQ(strings(r.j["gating"]["pending"]), (std::vector<std::string>{"p", "w"}));
  EXPECT_EQ(strings(r.j["gating"]["promptable"]), (std::vector<std::string>{"p", "w"}));
}

TEST_F(scopes_test, tool_sets_show_their_servers_and_why_others_are_out) {
  write_file(user_settings(), R"({"mcpServers": {"github": {"command": "a"}, "docs": {"command": "b"},
                                                  "slack": {"command": "c"}},
                                  "mcp": {"toolSets": {"review": {"servers": ["github", "docs"],
                                                                  "tools": ["get_*"],
                                                                  "exclude": ["docs/*"]}}}})");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_EQ(r.j["tool_sets"].size(), 1u) << r.out;
  auto& set = r.j["tool_sets"][0];
  EXPECT_EQ(set["name"], "review");
  EXPECT_EQ(set["path"], "/mcp/review");
  EXPECT_EQ(set["scope"], "user");
  EXPECT_EQ(strings(set["servers"]), std::vector<std::string>{"github"});
  EXPECT_EQ(strings(set["tools_patterns"]), std::vector<std::string>{"get_*"});
  ASSERT_EQ(set["left_out"].size(), 2u) << set.dump();
  EXPECT_EQ(set["left_out"][0]["server"], "docs");
  EXPECT_EQ(set["left_out"][0]["reason"], "excluded");
  EXPECT_EQ(set["left_out"][0]["rule"], "docs/*");
  EXPECT_EQ(set["left_out"][1]["server"], "slack");
  EXPECT_EQ(set["left_out"][1]["reason"], "server_not_in_set");
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(table.code, 0) << describe(table);
  EXPECT_NE(table.out.find("tool sets"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("slack (server_not_in_set)"), std::string::npos) << table.out;
}

TEST_F(scopes_test, a_bad_tool_set_is_a_settings_error_with_its_position) {
  write_file(user_settings(), "{\"mcpServers\": {\"u\": {\"command\": \"a\"}},\n"
                              " \"mcp\": {\"toolSets\": {\"r\": {\"exlude\": [\"x\"]}}}}");
  auto r = explain();
  EXPECT_EQ(r.code, 2) << "a settings error is explain's exit 2: " << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_NE(r.j["errors"][0]["message"].get<std::string>().find("unknown key 'exlude'"), std::string::npos)
    << r.j["errors"].dump();
  EXPECT_EQ(r.j["errors"][0]["line"], 2);
}

TEST_F(scopes_test, no_settings_at_all_is_an_empty_valid_view) {
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(r.j["servers"].is_array() && r.j["servers"].empty()) << r.out;
  EXPECT_TRUE(r.j["errors"].empty());
  EXPECT_EQ(r.j["workspace"], ws_.string());
}

TEST_F(scopes_test, workspace_path_is_reported_absolute_and_normalised) {
  write_file(user_settings(), R"({"mcpServers": {"u": {"command": "a"}}})");
  fs::create_directories(ws_ / "sub");
  auto r = mcprt({"explain", "--json", "--workspace", "./sub/../", "--home", home_.string()}, ws_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["workspace"], ws_.string());
}

TEST_F(scopes_test, comments_and_bom_are_accepted) {
  write_file(user_settings(), "\xEF\xBB\xBF{\n  // a line comment\n  /* a block\n     comment */\n"
                              "  \"mcpServers\": { \"u\": { \"command\": \"a\" } } // trailing\n}\n");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "u", "user", true, null_j, null_j));
}

// ---------------------------------------------------------------------------
// 5. Broken files

class broken_test : public cli_test {
 protected:
  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), R"({"mcpServers": {"u": {"command": "a"}}})");
    write_file(project_file(), R"({"mcpServers": {"p": {"command": "b"}}})");
    write_file(root_ / "top.json", R"({"mcpServers": {"t": {"command": "c"}}})");
  }
  run_result explain_top() const { return explain({"--mcp-config", (root_ / "top.json").string()}); }

  // Writes `text` as workspace settings and expects exactly one error there.
  void expect_workspace_error(const std::string& text, int line, int column,
                              const std::string& message_part) {
    write_file(workspace_settings(), text);
    auto r = explain_top();
    EXPECT_EQ(r.code, 2) << describe(r);
    ASSERT_TRUE(r.has_json()) << describe(r);
    ASSERT_EQ(r.j["errors"].size(), 1u) << r.j["errors"].dump();
    const json& e = r.j["errors"][0];
    EXPECT_EQ(e["path"], workspace_settings().string());
    EXPECT_EQ(e["line"], line) << e.dump();
    EXPECT_EQ(e["column"], column) << e.dump();
    EXPECT_NE(e.value("message", "").find(message_part), std::string::npos) << e.dump();
    // The rest is still explained.
    EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "t", "u"}));
  }
};

TEST_F(broken_test, invalid_json_in_workspace_settings_points_at_the_problem) {
  // Line 4, column 20 is the '}' after the trailing comma.
  write_file(workspace_settings(), "{\n"
                                   "  \"mcp\": {\"excluded\": [\"u\"]},\n"
                                   "  \"mcpServers\": {\n"
                                   "    \"w\": {\"command\": \"x\",}\n"
                                   "  }\n"
                                   "}\n");
  auto r = explain_top();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.j["errors"].dump();
  const json& e = r.j["errors"][0];
  EXPECT_EQ(e["path"], workspace_settings().string());
  EXPECT_EQ(e["line"], 4) << e.dump();
  EXPECT_EQ(e["column"], 26) << e.dump();
  EXPECT_FALSE(e.value("message", "").empty());
  // The broken file contributes nothing (neither its server nor its
  // exclusion); every other scope is still explained.
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "t", "u"}));
  EXPECT_TRUE(server_is(r.j, "u", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "p", "project", false, "pending_approval", "pending"));
  EXPECT_TRUE(server_is(r.j, "t", "session", true, null_j, null_j));
  EXPECT_TRUE(r.j["gating"]["excluded"].empty());
}

TEST_F(broken_test, truncated_file_reports_end_of_input) {
  expect_workspace_error("{\n  \"mcpServers\": {\n    \"w\": {\"command\": \"x\"}\n", 4, 1, "");
}

TEST_F(broken_test, args_must_be_an_array) {
  expect_workspace_error("{\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\": {\n"
                         "      \"command\": \"c\",\n"
                         "      \"args\": \"x\"\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         5, 15, "mcpServers.s.args");
}

TEST_F(broken_test, args_entries_must_be_strings) {
  expect_workspace_error("{\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\": {\n"
                         "      \"command\": \"c\",\n"
                         "      \"args\": [\"ok\",\n"
                         "               42]\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         6, 16, "mcpServers.s.args[1]");
}

TEST_F(broken_test, env_values_must_be_strings) {
  expect_workspace_error("{\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\": {\n"
                         "      \"command\": \"c\",\n"
                         "      \"env\": {\"A\": 1}\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         5, 20, "mcpServers.s.env.A");
}

TEST_F(broken_test, mcp_servers_must_be_an_object) {
  expect_workspace_error("{\n  \"ui\": {},\n  \"mcpServers\": []\n}\n", 3, 17, "mcpServers");
}

TEST_F(broken_test, mcp_allowed_must_be_an_array) {
  expect_workspace_error("{\n  \"mcp\": {\n    \"allowed\": \"a\"\n  }\n}\n", 3, 16, "mcp.allowed");
}

TEST_F(broken_test, mcp_excluded_entries_must_be_strings) {
  expect_workspace_error("{\n  \"mcp\": {\n    \"excluded\": [\"a\", true]\n  }\n}\n", 3, 23,
                         "mcp.excluded[1]");
}

TEST_F(broken_test, top_level_must_be_an_object) {
  expect_workspace_error("[]\n", 1, 1, "object");
}

TEST_F(broken_test, empty_workspace_settings_file_is_an_error) {
  expect_workspace_error("", 1, 1, "");
}

TEST_F(broken_test, positions_skip_comments_that_mention_the_field) {
  expect_workspace_error("{\n"
                         "  // \"mcpServers\": {\"s\": {\"args\": 1}}\n"
                         "  /* \"args\": 2 */\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\": {\n"
                         "      \"command\": \"c\", // \"args\"\n"
                         "      \"args\": \"x\"\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         7, 15, "mcpServers.s.args");
}

TEST_F(broken_test, positions_with_crlf_line_endings) {
  expect_workspace_error("{\r\n  \"mcpServers\": {\r\n    \"s\": {\r\n      \"args\": \"x\"\r\n"
                         "    }\r\n  }\r\n}\r\n",
                         4, 15, "mcpServers.s.args");
}

TEST_F(broken_test, position_of_a_server_whose_name_is_written_with_an_escape) {
  // "s\u0041" is the server "sA"; the error must still point at its args.
  expect_workspace_error("{\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\\u0041\": {\n"
                         "      \"command\": \"c\",\n"
                         "      \"args\": \"x\"\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         5, 15, "mcpServers.sA.args");
}

TEST_F(broken_test, position_with_a_duplicated_server_key_points_at_the_value_used) {
  // JSON parsers (nlohmann included) keep the last of duplicated keys; the
  // rejected value is the second one, on line 5.
  expect_workspace_error("{\n"
                         "  \"mcpServers\": {\n"
                         "    \"s\": {\"command\": \"c\", \"args\": [\"ok\"]},\n"
                         "    \"s\": {\"command\": \"c\",\n"
                         "          \"args\": \"x\"}\n"
                         "  }\n"
                         "}\n",
                         5, 19, "mcpServers.s.args");
}

TEST_F(broken_test, invalid_user_settings_keep_the_other_scopes) {
  write_file(user_settings(), "{\"mcpServers\": {\"u\": {\"command\": }}}");
  auto r = explain_top();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], user_settings().string());
  EXPECT_EQ(r.j["errors"][0]["line"], 1);
  EXPECT_EQ(r.j["errors"][0]["column"], 34);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "t"}));
}

TEST_F(broken_test, invalid_project_file_is_reported_with_its_path) {
  write_file(project_file(), "{\n  \"mcpServers\": {\"p\": {\"timeout\": \"soon\"}}\n}\n");
  auto r = explain_top();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], project_file().string());
  EXPECT_EQ(r.j["errors"][0]["line"], 2);
  EXPECT_NE(r.j["errors"][0].value("message", "").find("mcpServers.p.timeout"), std::string::npos)
    << r.out;
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"t", "u"}));
}

TEST_F(broken_test, two_broken_files_give_two_errors) {
  write_file(project_file(), "{");
  write_file(workspace_settings(), "nope");
  auto r = explain_top();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 2u) << r.out;
  std::vector<std::string> paths = {r.j["errors"][0]["path"], r.j["errors"][1]["path"]};
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> want = {project_file().string(), workspace_settings().string()};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(paths, want);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"t", "u"}));
}

TEST_F(broken_test, missing_mcp_config_file_is_an_error) {
  auto missing = root_ / "no-such-file.json";
  auto r = explain({"--mcp-config", missing.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], missing.string());
  EXPECT_FALSE(r.j["errors"][0].value("message", "").empty());
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "u"}));
}

TEST_F(broken_test, empty_mcp_config_file_is_an_error) {
  write_file(root_ / "top.json", "");
  auto r = explain_top();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], (root_ / "top.json").string());
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "u"}));
}

TEST_F(broken_test, relative_mcp_config_is_resolved_against_the_current_directory) {
  auto r = mcprt({"explain", "--json", "--workspace", ws_.string(), "--home", home_.string(),
                  "--mcp-config", "top.json"},
                 root_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "t", "session", true, null_j, null_j));
}

TEST_F(broken_test, human_output_lists_errors_with_positions) {
  write_file(workspace_settings(), "{\n  \"mcpServers\": 5\n}\n");
  auto r = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.out.find(workspace_settings().string() + ":2:17"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------------------
// 6. Gating

class gating_test : public cli_test {
 protected:
  // Four trusted servers a, b, c, d plus the settings `mcp` block given.
  void user_servers(const json& mcp) {
    json doc = {{"mcpServers",
                 {{"a", {{"command", "x"}}},
                  {"b", {{"command", "x"}}},
                  {"c", {{"command", "x"}}},
                  {"d", {{"command", "x"}}}}}};
    if (!mcp.is_null()) doc["mcp"] = mcp;
    write_file(user_settings(), doc.dump());
  }
  std::vector<std::string> admitted(const json& doc) const {
    std::vector<std::string> out;
    for (auto& s : doc["servers"])
      if (s["admitted"] == true) out.push_back(s["name"]);
    return out;
  }
};

TEST_F(gating_test, launch_bound_intersects_settings_allowed) {
  user_servers({{"allowed", {"a", "b", "c"}}});
  auto r = explain({"--allowed-mcp-server-names", "a,b"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(server_is(r.j, "a", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "c", "user", false, "not_allowed", null_j));
  EXPECT_TRUE(server_is(r.j, "d", "user", false, "not_allowed", null_j));
  EXPECT_EQ(strings(r.j["gating"]["allowed"]), (std::vector<std::string>{"a", "b"}));
}

TEST_F(gating_test, settings_narrow_below_the_launch_bound) {
  user_servers({{"allowed", {"a"}}});
  auto r = explain({"--allowed-mcp-server-names", "a,b"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), std::vector<std::string>{"a"});
  EXPECT_TRUE(server_is(r.j, "b", "user", false, "not_allowed", null_j));
  EXPECT_EQ(strings(r.j["gating"]["allowed"]), std::vector<std::string>{"a"});
}

TEST_F(gating_test, settings_never_widen_the_launch_bound) {
  user_servers({{"allowed", {"*"}}});
  auto r = explain({"--allowed-mcp-server-names", "b"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), std::vector<std::string>{"b"});
}

TEST_F(gating_test, launch_bound_alone) {
  user_servers(nullptr);
  auto r = explain({"--allowed-mcp-server-names", " c , d "});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"c", "d"}));
  EXPECT_TRUE(server_is(r.j, "a", "user", false, "not_allowed", null_j));
}

TEST_F(gating_test, without_the_flag_settings_decide_alone) {
  user_servers({{"allowed", {"a", "b", "c"}}});
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(server_is(r.j, "d", "user", false, "not_allowed", null_j));
  EXPECT_EQ(strings(r.j["gating"]["allowed"]), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(gating_test, empty_allowed_denies_all) {
  user_servers({{"allowed", json::array()}});
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(admitted(r.j).empty()) << r.out;
  for (auto name : {"a", "b", "c", "d"})
    EXPECT_TRUE(server_is(r.j, name, "user", false, "not_allowed", null_j));
  ASSERT_TRUE(r.j["gating"]["allowed"].is_array()) << r.j["gating"].dump();
  EXPECT_TRUE(r.j["gating"]["allowed"].empty());
}

TEST_F(gating_test, missing_allowed_allows_all) {
  user_servers({{"excluded", json::array()}});
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["gating"]["allowed"], null_j);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST_F(gating_test, excluded_wins_over_allowed) {
  user_servers({{"allowed", {"a", "b"}}, {"excluded", {"a"}}});
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "a", "user", false, "excluded", null_j));
  EXPECT_TRUE(server_is(r.j, "b", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "c", "user", false, "not_allowed", null_j));
  EXPECT_EQ(strings(r.j["gating"]["excluded"]), std::vector<std::string>{"a"});
}

TEST_F(gating_test, excluded_globs) {
  json servers = json::object();
  for (auto n : {"tmp-a", "tmp-", "tmpa", "x1", "x12", "x", "keep"})
    servers[n] = {{"command", "x"}};
  write_file(user_settings(),
             json{{"mcpServers", servers}, {"mcp", {{"excluded", {"tmp-*", "x?"}}}}}.dump());
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  for (auto n : {"tmp-a", "tmp-", "x1"})
    EXPECT_TRUE(server_is(r.j, n, "user", false, "excluded", null_j));
  for (auto n : {"tmpa", "x12", "x", "keep"})
    EXPECT_TRUE(server_is(r.j, n, "user", true, null_j, null_j));
  EXPECT_EQ(strings(r.j["gating"]["excluded"]), (std::vector<std::string>{"tmp-*", "x?"}));
}

TEST_F(gating_test, question_mark_matches_one_character_not_one_byte) {
  // A glob's `?` matches one character; "é" is one character (two bytes).
  write_file(user_settings(), "{\"mcpServers\": {\"x\xC3\xA9\": {\"command\": \"x\"}},"
                              " \"mcp\": {\"excluded\": [\"x?\"]}}");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "x\xC3\xA9", "user", false, "excluded", null_j));
}

TEST_F(gating_test, allowed_globs_and_flag_globs) {
  json servers = json::object();
  for (auto n : {"srv-1", "srv-2", "other"})
    servers[n] = {{"command", "x"}};
  write_file(user_settings(), json{{"mcpServers", servers}, {"mcp", {{"allowed", {"srv-*"}}}}}.dump());
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"srv-1", "srv-2"}));
  r = explain({"--allowed-mcp-server-names", "srv-2,other"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), std::vector<std::string>{"srv-2"});
  EXPECT_TRUE(server_is(r.j, "other", "user", false, "not_allowed", null_j));
  r = explain({"--allowed-mcp-server-names", "*"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"srv-1", "srv-2"}));
}

TEST_F(gating_test, intersection_of_two_glob_allow_lists) {
  // The launch bound: flag + settings -> their intersection. "srv-2" is allowed by
  // the settings ("srv-*") and by the flag ("*-2"), so it is admitted.
  json servers = json::object();
  for (auto n : {"srv-1", "srv-2", "other-2"})
    servers[n] = {{"command", "x"}};
  write_file(user_settings(), json{{"mcpServers", servers}, {"mcp", {{"allowed", {"srv-*"}}}}}.dump());
  auto r = explain({"--allowed-mcp-server-names", "*-2"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), std::vector<std::string>{"srv-2"});
  EXPECT_TRUE(server_is(r.j, "srv-1", "user", false, "not_allowed", null_j));
  EXPECT_TRUE(server_is(r.j, "other-2", "user", false, "not_allowed", null_j));
}

TEST_F(gating_test, gating_lists_from_every_settings_scope_apply_to_all_servers) {
  user_servers({{"excluded", {"a"}}});
  write_file(workspace_settings(), R"({"mcp": {"excluded": ["b"]}})");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "a", "user", false, "excluded", null_j));
  EXPECT_TRUE(server_is(r.j, "b", "user", false, "excluded", null_j));
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"c", "d"}));
}

TEST_F(gating_test, mcp_block_in_project_file_and_mcp_config_does_not_gate) {
  // .mcp.json and --mcp-config carry only mcpServers (settings.hpp).
  user_servers(nullptr);
  write_file(project_file(), R"({"mcp": {"excluded": ["a"], "allowed": []}})");
  write_file(root_ / "top.json", R"({"mcp": {"excluded": ["b"]}})");
  auto r = explain({"--mcp-config", (root_ / "top.json").string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(admitted(r.j), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(r.j["gating"]["allowed"], null_j);
}

TEST_F(gating_test, untrusted_blocks_every_server) {
  user_servers({{"excluded", {"a"}}});
  write_file(project_file(), R"({"mcpServers": {"p": {"command": "x"}}})");
  write_file(root_ / "top.json", R"({"mcpServers": {"t": {"command": "x"}}})");
  auto r = explain({"--untrusted", "--mcp-config", (root_ / "top.json").string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["trusted"], false);
  ASSERT_EQ(r.j["servers"].size(), 6u);
  for (auto& s : r.j["servers"]) {
    EXPECT_EQ(s["admitted"], false) << s.dump();
    EXPECT_EQ(s["reason"], "untrusted") << s.dump();
  }
  auto trusted = explain({"--mcp-config", (root_ / "top.json").string()});
  EXPECT_EQ(trusted.j["trusted"], true);
}

TEST_F(gating_test, untrusted_human_output_says_nothing_starts) {
  user_servers(nullptr);
  auto r = mcprt({"explain", "--untrusted", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("untrusted"), std::string::npos) << r.out;
}

TEST_F(gating_test, disabled_server) {
  write_file(user_settings(), R"({"mcpServers": {"off": {"command": "x", "disabled": true},
                                                  "on": {"command": "x", "disabled": false}}})");
  write_file(project_file(), R"({"mcpServers": {"poff": {"command": "x", "disabled": true}}})");
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(server_is(r.j, "off", "user", false, "disabled", null_j));
  EXPECT_TRUE(server_is(r.j, "on", "user", true, null_j, null_j));
  EXPECT_EQ((*find_server(r.j, "poff"))["reason"], "disabled");
}

// ---------------------------------------------------------------------------
// 7. Profiles

using profile_test = cli_test;

TEST_F(profile_test, qwen_reads_qwen_dirs_and_ignores_mcprt) {
  write_file(home_ / ".qwen" / "settings.json", R"({"mcpServers": {"uq": {"command": "x"}}})");
  write_file(ws_ / ".qwen" / "settings.json",
             R"({"mcpServers": {"wq": {"command": "x"}}, "mcp": {"excluded": ["p"]}})");
  write_file(user_settings(), R"({"mcpServers": {"um": {"command": "x"}}, "mcp": {"allowed": []}})");
  write_file(workspace_settings(), R"({"mcpServers": {"wm": {"command": "x"}}})");
  write_file(project_file(), R"({"mcpServers": {"p": {"command": "x"}, "p2": {"command": "x"}}})");

  auto r = explain({"--profile", "qwen"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(server_names(r.j), (std::vector<std::string>{"p", "p2", "uq", "wq"}));
  EXPECT_TRUE(server_is(r.j, "uq", "user", true, null_j, null_j));
  EXPECT_TRUE(server_is(r.j, "wq", "workspace", false, "pending_approval", "pending"));
  EXPECT_TRUE(server_is(r.j, "p", "project", false, "excluded", "pending"));
  EXPECT_TRUE(server_is(r.j, "p2", "project", false, "pending_approval", "pending"));
  EXPECT_EQ(r.j["gating"]["allowed"], null_j);

  // And the default profile reads .mcprt, not .qwen.
  auto d = explain();
  ASSERT_EQ(d.code, 0) << describe(d);
  EXPECT_EQ(server_names(d.j), (std::vector<std::string>{"p", "p2", "um", "wm"}));
}

TEST_F(profile_test, qwen_errors_name_the_qwen_file) {
  write_file(ws_ / ".qwen" / "settings.json", "{,}");
  write_file(workspace_settings(), "{,}");
  auto r = explain({"--profile", "qwen"});
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], (ws_ / ".qwen" / "settings.json").string());
}

TEST_F(profile_test, gemini_reads_gemini_dirs) {
  write_file(home_ / ".gemini" / "settings.json", R"({"mcpServers": {"ug": {"command": "x"}}})");
  write_file(user_settings(), R"({"mcpServers": {"um": {"command": "x"}}})");
  auto r = explain({"--profile", "gemini"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(server_names(r.j), std::vector<std::string>{"ug"});
}

// ---------------------------------------------------------------------------
// Command-line misuse

using usage_test = cli_test;

TEST_F(usage_test, workspace_that_is_not_a_directory) {
  auto r = mcprt({"explain", "--json", "--workspace", (root_ / "missing").string(), "--home",
                  home_.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(usage_test, unknown_profile) {
  auto r = explain({"--profile", "zed"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("zed"), std::string::npos) << r.err;
}

TEST_F(usage_test, human_output_with_no_servers) {
  auto r = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("no MCP servers configured"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------------------
// Text that is not the user's: a cloned repository's names and paths

using hostile_text_test = cli_test;

TEST_F(hostile_text_test, a_workspace_path_that_is_not_utf8_is_shown_not_thrown) {
  auto ws = root_ / "caf\xE9";
  write_file(ws / ".mcp.json", R"({"mcpServers": {"p": {"command": "x"}}})");
  auto r = mcprt({"explain", "--json", "--workspace", ws.string(), "--home", home_.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  EXPECT_NE(r.j["workspace"].get<std::string>().find("caf\xEF\xBF\xBD"), std::string::npos) << r.out;
  EXPECT_EQ(server_names(r.j), std::vector<std::string>{"p"});
  auto table = mcprt({"explain", "--workspace", ws.string(), "--home", home_.string()});
  ASSERT_EQ(table.code, 0) << describe(table);
  EXPECT_NE(table.out.find("caf\\xe9"), std::string::npos) << table.out;
}

TEST_F(hostile_text_test, list_entries_are_escaped_in_the_table_and_exact_in_json) {
  write_file(workspace_settings(),
             R"({"mcp": {"allowed": ["\u001b[31mred", "*"], "excluded": ["x\r\nINFO forged", "\u202eevil"]}})");
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(table.code, 0) << describe(table);
  EXPECT_EQ(table.out.find('\x1b'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find('\r'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\xE2\x80\xAE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\\x1b[31mred"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("x\\r\\nINFO forged"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\\u202eevil"), std::string::npos) << table.out;
  auto r = explain();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["gating"]["excluded"][0], "x\r\nINFO forged");
}

TEST_F(hostile_text_test, mcp_config_that_is_a_fifo_is_an_error_not_a_wait) {
  auto fifo = root_ / "top.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = explain({"--mcp-config", fifo.string()}); // a blocking open would wait for a writer forever
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u) << r.out;
  EXPECT_EQ(r.j["errors"][0]["path"], fifo.string());
  EXPECT_NE(r.j["errors"][0].value("message", "").find("FIFO"), std::string::npos) << r.out;
}

} // namespace
} // namespace mcprt_cli_test
