// A legacy HTTP+SSE (2024-11-05) server end to end: the reference
// server-everything in its `sse` mode, a real process on a loopback port,
// configured with `url` in a real settings file. Connect, list, call, hot
// reload a filter, and a crash: the server is killed and started again on
// the same port, and the pool's restart of the connection reconnects.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "tests/support/ports.hpp"
#include "runtime_fixture.hpp"
#include "tests/support/wait_for.hpp"

extern char** environ;

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path k_peer = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

using mcprt::test::accepts_connections;
int free_port() { return mcprt::test::unused_port(); }

// `node server-everything sse` on `port`, output discarded.
class everything_sse {
 public:
  explicit everything_sse(int port) : port_(port) {}
  ~everything_sse() { kill(); }

  // Starts it and waits (with a deadline: node under load is slow) until
  // the port accepts connections.
  bool start(std::chrono::milliseconds deadline = 60s) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> env_text;
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("PORT=", 0) != 0) env_text.emplace_back(*e);
    env_text.push_back("PORT=" + std::to_string(port_));
    std::vector<char*> envp;
    for (auto& s : env_text)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string node = "node", script = k_peer.string(), mode = "sse";
    char* argv[] = {node.data(), script.data(), mode.data(), nullptr};
    int rc = ::posix_spawnp(&pid_, "node", &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      return false;
    }
    auto until = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < until) {
      if (accepts_connections(port_)) return true;
      // A port that starts listening gives nothing to block on, so it is
      // looked at every 50 ms; between looks the wait is on the server's
      // pidfd, which ends it at once when the server dies instead.
      if (mcprt::test::wait_for_exit(pid_, 50ms)) {
        int status;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return false;
      }
    }
    return false;
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/sse"; }

 private:
  int port_;
  pid_t pid_ = -1;
};

class LegacySse : public test::runtime_fixture {
 protected:
  LegacySse() : runtime_fixture("mcprt-legacy-sse") {
    // The test starts server-everything itself.
    expect_no_children = false;
  }

  void SetUp() override {
    if (!fs::exists(k_peer)) GTEST_SKIP() << "server-everything is not installed at " << k_peer;
    if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
    runtime_fixture::SetUp();
  }

  static std::function<bool(const json&)> connected_with(std::function<bool(int)> tools_ok) {
    return [tools_ok](const json& snap) {
      auto s = find_server(snap, "everything");
      return s && (*s)["status"] == "connected" && (*s)["tools"].is_number() && tools_ok((*s)["tools"].get<int>());
    };
  }

  std::vector<std::string> tool_names() {
    std::vector<std::string> out;
    auto t = rt->tools(session, "everything");
    if (!t) {
      ADD_FAILURE() << sys->render(t.error());
      return out;
    }
    for (auto& i : *t)
      out.push_back(i.name);
    return out;
  }

  std::string echo(const std::string& text) {
    auto r = rt->call_tool(session, "everything", "echo", {{"message", text}});
    if (!r) return "ERROR: " + sys->render(r.error());
    return r->dump();
  }
};

} // namespace

TEST_F(LegacySse, ConnectsListsCallsReloadsAndReconnectsAfterACrash) {
  int port = free_port();
  everything_sse server(port);
  ASSERT_TRUE(server.start()) << "server-everything (sse) did not listen on " << port;

  json entry = {{"url", server.url()}, {"headers", {{"Authorization", "Bearer SECRET-SSE-1"}}}};
  save(user_settings(), {{"mcpServers", {{"everything", entry}}}});
  start();

  auto snap = wait_snapshot(connected_with([](int n) { return n > 5; }), 60s);
  auto& s = *find_server(snap, "everything");
  EXPECT_EQ(s["transport"], "sse") << s.dump();
  EXPECT_EQ(snap.dump().find("SECRET-SSE-1"), std::string::npos);
  auto names = tool_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "echo"), names.end());
  EXPECT_NE(echo("hello-legacy").find("hello-legacy"), std::string::npos);

  // Hot reload: a filter edit takes effect.
  entry["includeTools"] = {"echo"};
  save(user_settings(), {{"mcpServers", {{"everything", entry}}}});
  wait_snapshot(connected_with([](int n) { return n == 1; }), 60s);
  EXPECT_EQ(tool_names(), std::vector<std::string>{"echo"});
  EXPECT_NE(echo("after-reload").find("after-reload"), std::string::npos);

  // Crash: the stream ends, the connection fails, the pool restarts it
  // (with backoff) until the server is back on its port.
  auto before = log->mark();
  server.kill();
  auto failed = log->wait(
      [](const event& e) {
        auto d = e.data.value.dump();
        return d.find("everything") != std::string::npos
               && (d.find("\"error\"") != std::string::npos || d.find("restarting") != std::string::npos);
      },
      before, 60s);
  ASSERT_TRUE(failed) << "no failure seen after the server was killed";
  ASSERT_TRUE(server.start()) << "server-everything did not come back on " << port;
  wait_snapshot(connected_with([](int n) { return n == 1; }), 90s);
  EXPECT_NE(echo("after-crash").find("after-crash"), std::string::npos);
  auto after = rt->snapshot();
  EXPECT_GE((*find_server(after, "everything"))["restarts"].get<int>(), 1) << after.dump(2);
  // Before the server goes, so that its end is not one more crash.
  rt->shutdown();
}
