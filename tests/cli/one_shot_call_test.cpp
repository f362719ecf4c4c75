// `mcprt call --http URL TOOL`, `--sse URL` and `mcprt call TOOL -- COMMAND`:
// one tool call without a daemon, black-box against the real binary and our
// test server over stdio and streamable HTTP (server-everything over legacy
// HTTP+SSE).

#include "tests/support/ports.hpp"
#include "cli_test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>

#include "io/child_process.hpp"
#include "tests/support/wait_for.hpp"

namespace mcprt_cli_test {
namespace {

std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

class one_shot_call_test : public ::testing::Test {
 protected:
  fs::path home_ = fs::temp_directory_path() / ("mcprt-one-shot-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(home_); }
  void TearDown() override { fs::remove_all(home_); }
};

/// Our test server in its HTTP mode on a free port, stopped at the end.
struct http_test_server {
  mcprt::io::child_process proc = mcprt::io::child_process::spawn({test_server, {"--http", "0"}, {}, {}});
  std::string url;

  http_test_server() {
    std::string line;
    char ch;
    while (::read(proc.stdout_fd(), &ch, 1) == 1 && ch != '\n')
      line.push_back(ch);
    auto at = line.find("http://");
    if (at != std::string::npos) url = line.substr(at);
  }
  ~http_test_server() { proc.shutdown(std::chrono::seconds(2), std::chrono::seconds(2)); }
};

TEST_F(one_shot_call_test, StdioPrintsTheTextResult) {
  auto r = run_mcprt({"call", "echo", R"({"text": "hello there"})", "--", test_server}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, "hello there\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(one_shot_call_test, JsonPrintsTheRawResult) {
  auto r = run_mcprt({"call", "--json", "add", R"({"a": 2, "b": 40})", "--", test_server}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << r.out;
  ASSERT_TRUE(r.j["content"].is_array()) << r.out;
  EXPECT_EQ(r.j["content"][0]["type"], "text");
  EXPECT_EQ(r.j["content"][0]["text"], "42");
}

TEST_F(one_shot_call_test, ArgumentsDefaultToAnEmptyObject) {
  auto r = run_mcprt({"call", "--json", "tool_1", "--", test_server, "--tools", "1"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.j["content"][0]["text"], "{}") << r.out;
}

TEST_F(one_shot_call_test, AToolErrorExitsOneWithOneLineSayingWhy) {
  auto r = run_mcprt({"call", "echo", "{}", "--", test_server}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.out.find("argument 'text' must be a string"), std::string::npos) << r.out;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("tool 'echo' reported an error"), std::string::npos) << r.err;
}

TEST_F(one_shot_call_test, AnUnknownToolExitsOne) {
  auto r = run_mcprt({"call", "no_such_tool", "--", test_server}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("no_such_tool"), std::string::npos) << r.err;
}

TEST_F(one_shot_call_test, AServerThatCannotStartExitsOneWithOneLine) {
  auto r = run_mcprt({"call", "echo", "--", "mcprt-no-such-server"}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("mcprt-no-such-server"), std::string::npos) << r.err;

  r = run_mcprt({"call", "echo", "--", test_server, "--exit-on-initialize"}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("exit code 4"), std::string::npos) << r.err;
}

TEST_F(one_shot_call_test, NoServerProcessIsLeftAfterwards) {
  auto r = run_mcprt({"call", "pid", "--", test_server}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  auto pid = static_cast<pid_t>(std::stol(r.out));
  ASSERT_GT(pid, 1);
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, std::chrono::seconds(5))) << "server " << pid << " outlived mcprt call";
}

TEST_F(one_shot_call_test, AServerThatIgnoresSigtermIsStillGone) {
  auto r = run_mcprt({"call", "pid", "--", test_server, "--ignore-sigterm"}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  auto pid = static_cast<pid_t>(std::stol(r.out));
  EXPECT_TRUE(mcprt::test::wait_for_exit(pid, std::chrono::seconds(5))) << "server " << pid << " outlived mcprt call";
}

TEST_F(one_shot_call_test, ControlCharactersFromTheServerAreEscaped) {
  auto r = run_mcprt({"call", "echo", R"({"text": "a\u001b[2Jb\u202ec\nd"})", "--", test_server}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\x1b[2Jb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nd"), std::string::npos) << r.out; // line breaks stay

  // --json: the same JSON, with what a terminal acts on as \u escapes.
  r = run_mcprt({"call", "--json", "echo", R"({"text": "a\u007fb\u202ec\u0085d"})", "--", test_server}, home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out.find('\x7f'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x85"), std::string::npos) << r.out;
  ASSERT_TRUE(r.has_json()) << r.out;
  EXPECT_EQ(r.j["content"][0]["text"], "a\x7f" "b\xe2\x80\xae" "c\xc2\x85" "d");
}

TEST_F(one_shot_call_test, StreamableHttpWithAHeaderThatIsNeverPrinted) {
  http_test_server server;
  ASSERT_FALSE(server.url.empty());
  auto r = run_mcprt({"call", "--http", server.url, "--header", "Authorization: Bearer S3CRET-VALUE", "echo",
                      R"({"text": "over http"})"},
                     home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, "over http\n");

  // A failing call names neither the header's value in its one line.
  r = run_mcprt({"call", "--http", server.url, "--header", "Authorization: Bearer S3CRET-VALUE", "echo", "{}"}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(r.err.find("S3CRET"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("S3CRET"), std::string::npos) << r.out;
}

TEST_F(one_shot_call_test, AnUnreachableUrlExitsOneWithoutTheHeaderValue) {
  std::string url;
  {
    http_test_server server;
    url = server.url;
  }
  ASSERT_FALSE(url.empty());
  auto r = run_mcprt({"call", "--timeout-ms", "3000", "--http", url, "--header", "X-Api-Key: S3CRET-VALUE", "echo"},
                     home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.find("S3CRET"), std::string::npos) << r.err;
}

TEST_F(one_shot_call_test, RootsAndElicitationFlagsAreTakenOnePerOccurrence) {
  // Each --root takes one value: the tool name after it is not a second root.
  auto r = run_mcprt({"call", "--root", home_.string(), "--root", ".", "--on-elicitation", "accept-defaults", "echo",
                      R"({"text": "ok"})", "--", test_server},
                     home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, "ok\n");
  r = run_mcprt({"inspect", "--json", "--root", home_.string(), "--on-elicitation", "decline", "--", test_server},
                home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(r.has_json()) << r.out;
}

TEST_F(one_shot_call_test, EachRootReachesTheServerAsAFileUriNamedByItsLastComponent) {
  auto dir = home_ / "my root";
  fs::create_directories(dir);
  auto r = run_mcprt({"call", "--json", "--root", dir.string() + "/", "ask_client",
                      R"({"method": "roots/list", "params": {}})", "--", test_server, "--client-tool"},
                     home_);
  ASSERT_EQ(r.code, 0) << describe(r);
  auto result = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << r.out;
  auto reply = nlohmann::json::parse(result["content"][0]["text"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(reply.contains("result")) << r.out;
  auto want = nlohmann::json::array({{{"uri", "file://" + home_.string() + "/my%20root"}, {"name", "my root"}}});
  EXPECT_EQ(reply["result"]["roots"], want) << r.out;
}

TEST_F(one_shot_call_test, LegacySseAgainstServerEverything) {
  const fs::path peer = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
  if (!fs::exists(peer)) GTEST_SKIP() << "server-everything is not installed at " << peer;
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  int port = mcprt::test::unused_port();
  auto proc = mcprt::io::child_process::spawn(
    {"node", {peer.string(), "sse"}, {{"PORT", std::to_string(port)}}, {}});
  // server-everything says "Server is running on port N" on stderr once it listens.
  std::string said;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (said.find("running on port") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{proc.stderr_fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    auto n = ::read(proc.stderr_fd(), buf, sizeof buf);
    if (n <= 0) break;
    said.append(buf, static_cast<std::size_t>(n));
  }
  ASSERT_NE(said.find("running on port"), std::string::npos) << said;
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/sse";
  auto r = run_mcprt({"call", "--sse", url, "--header", "Authorization: Bearer S3CRET-VALUE", "echo",
                      R"({"message": "over legacy sse"})"},
                     home_);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("over legacy sse"), std::string::npos) << r.out;
  r = run_mcprt({"inspect", "--json", "--sse", url}, home_);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("\"echo\""), std::string::npos) << r.out;
  proc.shutdown(std::chrono::seconds(2), std::chrono::seconds(2));

  // Nobody there now: one line naming the URL, never the header value.
  r = run_mcprt({"call", "--timeout-ms", "3000", "--sse", url, "--header", "X-Api-Key: S3CRET-VALUE", "echo"}, home_);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("GET " + url), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("S3CRET"), std::string::npos) << r.err;
}

TEST_F(one_shot_call_test, UsageErrorsExitTwo) {
  // An elicitation policy a one-shot command cannot follow.
  auto r = run_mcprt({"call", "--on-elicitation", "ask", "echo", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--on-elicitation"), std::string::npos) << r.err;
  r = run_mcprt({"inspect", "--on-elicitation", "yes", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  // No tool.
  r = run_mcprt({"call", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("Usage:"), std::string::npos) << r.err;
  // Nothing after `--`.
  r = run_mcprt({"call", "echo", "--"}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  // Arguments that are not a JSON object.
  r = run_mcprt({"call", "echo", "[1]", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  // Both transports at once.
  r = run_mcprt({"call", "--http", "http://127.0.0.1:9/mcp", "echo", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  r = run_mcprt({"call", "--sse", "http://127.0.0.1:9/sse", "--http", "http://127.0.0.1:9/mcp", "echo"}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  // A daemon flag on a one-shot call.
  r = run_mcprt({"call", "--url", "http://127.0.0.1:9", "echo", "--", test_server}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
  // A one-shot flag on a daemon call.
  r = run_mcprt({"call", "--root", ".", "srv", "echo"}, home_);
  EXPECT_EQ(r.code, 2) << describe(r);
}

} // namespace
} // namespace mcprt_cli_test
