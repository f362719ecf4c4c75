// Remote servers the way users meet them, black-box against the real
// daemon: behind a forward proxy (the server's own `proxy`, or the
// environment's HTTPS_PROXY through a CONNECT tunnel) and behind an HTTP/2
// TLS front whose CA only the server's `caFile` names. The servers are real
// mcprt-test-server processes on loopback, reachable by the name mcp.test
// only through the proxy.

#include "tests/cli/daemon_test_util.hpp"
#include "tests/support/remote_fronts.hpp"

namespace mcprt_cli_test {
namespace {

using mcprt::test::forward_proxy;
using mcprt::test::h2_front;

class remote_server_test : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    if (!mcprt::test::have_program("node")) GTEST_SKIP() << "node is not installed (scripts/setup.sh installs it)";
  }

  /// A streamable-HTTP test server on loopback; its port.
  int start_http_server() {
    server_ = std::make_unique<spawned>(std::vector<std::string>{"--http", "0"}, home_,
                                        std::map<std::string, std::string>{}, test_server);
    auto first = server_->line(30s);
    if (!first || first->rfind("listening on ", 0) != 0) return 0;
    auto url = first->substr(std::string("listening on ").size());
    return std::stoi(url.substr(url.rfind(':') + 1));
  }

  httplib::Result call(const std::string& server, const std::string& tool, const json& args) {
    return post("/workspace/mcp/tools/call", json{{"server", server}, {"tool", tool}, {"arguments", args}}.dump());
  }

  /// The daemon with no proxy from the test's own environment.
  std::map<std::string, std::string> env_without_proxies(std::map<std::string, std::string> extra = {}) {
    for (const char* n : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                          "no_proxy", "NO_PROXY"})
      extra.emplace(n, "");
    return extra;
  }

  void TearDown() override {
    graceful_daemon_test::TearDown();
    server_.reset();
  }

  std::unique_ptr<spawned> server_;
};

TEST_F(remote_server_test, a_servers_own_proxy_carries_its_calls_and_its_credentials_stay_hidden) {
  int port = start_http_server();
  ASSERT_GT(port, 0);
  forward_proxy proxy(MCPRT_SOURCE_DIR, "me:proxy-s3cret");
  ASSERT_TRUE(proxy.ok());
  const auto url = "http://mcp.test:" + std::to_string(port) + "/mcp";
  write_file(user_settings(),
             json{{"mcpServers", {{"remote", {{"httpUrl", url}, {"proxy", proxy.url("me:proxy-s3cret")}}}}}}.dump(2));
  ASSERT_TRUE(start({}, env_without_proxies()));
  ASSERT_TRUE(connected("remote")) << snapshot().dump(2);
  auto r = call("remote", "echo", {{"text", "through the proxy"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("through the proxy"), std::string::npos) << r->body;
  EXPECT_TRUE(proxy.forwarded("POST " + url)) << "mcp.test resolves only in the proxy";
  auto snap = get("/workspace/mcp");
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->body.find("proxy-s3cret"), std::string::npos) << snap->body;
  auto log = daemon_->err();
  EXPECT_EQ(log.find("proxy-s3cret"), std::string::npos) << log;
}

TEST_F(remote_server_test, https_proxy_tunnels_to_an_http2_front_trusted_through_the_servers_ca_file) {
  int port = start_http_server();
  ASSERT_GT(port, 0);
  h2_front front(port);
  if (!front.why_not().empty()) GTEST_SKIP() << front.why_not();
  forward_proxy proxy(MCPRT_SOURCE_DIR);
  ASSERT_TRUE(proxy.ok());
  const auto url = "https://mcp.test:" + std::to_string(front.port()) + "/mcp";
  write_file(user_settings(),
             json{{"mcpServers",
                   {{"untrusted", {{"httpUrl", url}}}, {"remote", {{"httpUrl", url}, {"caFile", front.ca_file()}}}}}}
               .dump(2));
  ASSERT_TRUE(start({}, env_without_proxies({{"HTTPS_PROXY", proxy.url()}})));
  ASSERT_TRUE(connected("remote")) << snapshot().dump(2);
  auto r = call("remote", "echo", {{"text", "over h2"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("over h2"), std::string::npos) << r->body;
  EXPECT_TRUE(proxy.forwarded("CONNECT mcp.test:" + std::to_string(front.port())));
  // Without the CA file the same front is refused, and the error says why.
  auto tls_error = [&] {
    auto e = server("untrusted")["last_error"];
    return e.is_string() && e.get<std::string>().find("TLS") != std::string::npos;
  };
  EXPECT_TRUE(wait_until(tls_error)) << server("untrusted").dump(2);
  EXPECT_NE(server("untrusted").value("status", ""), "connected");
}

} // namespace
} // namespace mcprt_cli_test
