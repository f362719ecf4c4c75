// The connection actor against real MCP server processes over real pipes
// (and real HTTP on loopback): mcprt-test-server for every fault, and the npm
// reference servers. Waits are receives with deadlines, never sleeps.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <httplib.h>

#include "tests/support/ports.hpp"
#include "actors/connection.hpp"
#include "io/child_process.hpp"
#include "io/http_transport.hpp"
#include "io/reactor.hpp"
#include "process_support.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string test_server = MCPRT_TEST_SERVER;
const fs::path peers = MCPRT_PEERS_DIR;

using test_config = mcprt::test::process_test_config;
using mcprt::test::child_pids;

bool wait_gone(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  return mcprt::test::gone_within(pid, timeout);
}

std::optional<fs::path> peer_bin(const std::string& name) {
  auto p = peers / ".bin" / name;
  if (!fs::exists(p)) return std::nullopt;
  return p;
}

class connection_test : public ::testing::Test {
 protected:
  // TearDown waits until every actor is gone; then the I/O threads stop
  // (declared after the system, so destroyed before it), and only then the
  // system: an I/O thread that is still waking a worker for its last
  // message must not find the scheduler destroyed under it.
  test_config cfg;
  caf::actor_system sys{cfg};
  io::reactor reactor;
  io::http_client http;
  std::optional<caf::scoped_actor> self;
  std::vector<connection_actor> started;

  void SetUp() override { self.emplace(sys); }

  void TearDown() override {
    for (auto& c : started) {
      (*self)->request(c, 10s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
      (*self)->send_exit(c, caf::exit_reason::user_shutdown);
    }
    started.clear();
    self.reset();
    sys.await_all_actors_done();
    // Every server the test started has been reaped.
    auto left = child_pids();
    for (auto pid : left)
      wait_gone(pid, 5s);
    EXPECT_TRUE(child_pids().empty()) << "child processes outlived the test";
  }

  server_config server(json spec, const std::string& name = "srv") {
    auto r = parse_server_config(name, spec, config_scope::user, {});
    EXPECT_TRUE(r.config) << (r.error ? r.error->message : "");
    return *r.config;
  }

  connection_actor start(server_config s) {
    connection_config cc;
    cc.server = std::move(s);
    cc.subscribers.push_back(caf::actor_cast<event_sink_actor>(*self));
    auto c = spawn_connection(sys, cc, {&reactor, &http, {}});
    started.push_back(c);
    return c;
  }

  // Next update whose status is not `connecting`, or nullopt on timeout.
  std::optional<client_update> settled(std::chrono::milliseconds timeout = 20s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      std::optional<client_update> got;
      bool timed_out = false;
      (*self)->receive([&](client_update& u) { got = u; }, caf::after(left) >> [&] { timed_out = true; });
      if (timed_out) return std::nullopt;
      if (got && got->status != connection_status::connecting) return got;
    }
  }

  connection_info info(const connection_actor& c) {
    connection_info out;
    (*self)->request(c, 10s, atom::info_v).receive([&](connection_info& i) { out = i; },
                                                   [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  // Calls a tool; returns the result or the error text.
  std::variant<json, std::string> call(const connection_actor& c, const std::string& tool, json args) {
    std::variant<json, std::string> out = std::string("no answer");
    (*self)->request(c, 30s, atom::call_v, tool, json_value{std::move(args)})
      .receive([&](json_value& v) { out = v.value; },
               [&](caf::error& e) { out = render_error(e.code(), e.category(), e.context()); });
    return out;
  }

  static std::string text_of(const json& result) {
    if (result.contains("content") && !result["content"].empty()) return result["content"][0].value("text", "");
    return {};
  }
};

} // namespace

TEST_F(connection_test, ConnectsListsToolsAndPromptsAndCallsATool) {
  auto c = start(server({{"command", test_server}, {"args", {"--tools", "3", "--prompts", "2"}}}));
  auto u = settled();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  EXPECT_EQ(u->tools, 7u); // echo, add, sleep, pid + 3 numbered
  EXPECT_EQ(u->prompts, 2u);
  EXPECT_GT(u->pid, 0);
  EXPECT_EQ(u->connection_id.rfind("srv::", 0), 0u);
  auto i = info(c);
  EXPECT_EQ(i.server_name, "mcprt-test-server");
  EXPECT_EQ(i.protocol, "2025-11-25");
  auto r = call(c, "echo", {{"text", "hello"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  EXPECT_EQ(text_of(std::get<json>(r)), "hello");
  auto pid = call(c, "pid", json::object());
  ASSERT_TRUE(std::holds_alternative<json>(pid));
  EXPECT_EQ(text_of(std::get<json>(pid)), std::to_string(u->pid));
}

TEST_F(connection_test, UnknownToolAndToolErrorsAreReportedDistinctly) {
  auto c = start(server({{"command", test_server}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto r = call(c, "no_such_tool", json::object());
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("unknown_tool"), std::string::npos) << std::get<std::string>(r);
  // A tool that fails answers with isError: passed through as a result.
  auto bad = call(c, "add", {{"a", "x"}, {"b", 1}});
  ASSERT_TRUE(std::holds_alternative<json>(bad));
  EXPECT_TRUE(std::get<json>(bad).value("isError", false));
}

TEST_F(connection_test, ACallLongerThanTheServersTimeoutFailsWithTimeout) {
  auto c = start(server({{"command", test_server}, {"timeout", 200}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto r = call(c, "sleep", {{"ms", 3000}});
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("timeout"), std::string::npos) << std::get<std::string>(r);
  // The connection survives a timed-out call.
  EXPECT_TRUE(std::holds_alternative<json>(call(c, "echo", {{"text", "still here"}})));
}

// Progress: a call under a call id with a sink asks the real server for
// progress (its sleep tool reports the start and the end), and each step
// reaches the sink with the server's name and the caller's call id.
TEST_F(connection_test, ProgressOfACallReachesTheCallersSink) {
  auto c = start(server({{"command", test_server}}));
  auto u = settled();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  // A blocking request's receive drops what else arrives meanwhile, so the
  // progress goes to a second scoped actor.
  caf::scoped_actor listener{sys};
  auto sink = caf::actor_cast<progress_sink_actor>(listener);
  std::optional<json> result;
  (*self)->request(c, 30s, atom::call_v, std::string("sleep"), json_value{json{{"ms", 100}}}, std::string("c-1"), sink)
    .receive([&](json_value& v) { result = v.value; }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  ASSERT_TRUE(result);
  EXPECT_EQ(text_of(*result), "slept 100");
  std::vector<call_progress_update> seen;
  bool timed_out = false;
  while (seen.size() < 2 && !timed_out)
    listener->receive([&](call_progress_update& p) { seen.push_back(p); },
                      caf::after(10s) >> [&] { timed_out = true; });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].server, "srv");
  EXPECT_EQ(seen[0].call_id, "c-1");
  EXPECT_EQ(seen[0].progress, 1.0);
  EXPECT_TRUE(seen[0].has_total);
  EXPECT_EQ(seen[0].total, 2.0);
  EXPECT_EQ(seen[0].message, "sleeping");
  EXPECT_EQ(seen[1].progress, 2.0);
  EXPECT_EQ(seen[1].message, "woke up");
}

// Cancel: a slow call cancelled by its call id fails at once with
// errc::cancelled; the connection stays up and serves the next call.
TEST_F(connection_test, ACallCancelledByItsIdFailsAtOnce) {
  auto c = start(server({{"command", test_server}}));
  auto u = settled();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  auto started_at = std::chrono::steady_clock::now();
  auto slow = (*self)->request(c, 60s, atom::call_v, std::string("sleep"), json_value{json{{"ms", 30000}}},
                               std::string("slow"), progress_sink_actor{});
  bool unknown = true;
  (*self)->request(c, 10s, atom::cancel_v, std::string("nope")).receive([&](bool b) { unknown = b; },
                                                                         [](caf::error&) {});
  EXPECT_FALSE(unknown) << "no call has that id";
  bool cancelled = false;
  (*self)->request(c, 10s, atom::cancel_v, std::string("slow")).receive([&](bool b) { cancelled = b; },
                                                                         [](caf::error&) {});
  EXPECT_TRUE(cancelled);
  std::optional<caf::error> err;
  slow.receive([](json_value&) { ADD_FAILURE() << "a cancelled call answered"; }, [&](caf::error& e) { err = e; });
  ASSERT_TRUE(err);
  EXPECT_EQ(err->category(), caf::atom("mcprt"));
  EXPECT_EQ(static_cast<errc>(err->code()), errc::cancelled) << sys.render(*err);
  EXPECT_LT(std::chrono::steady_clock::now() - started_at, 20s) << "the call waited for the server";
  auto r = call(c, "echo", {{"text", "still here"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
}

TEST_F(connection_test, ExitOnInitializeIsAnErrorWithTheExitCodeAndStderr) {
  start(server({{"command", test_server}, {"args", {"--exit-on-initialize"}}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("exit code 4"), std::string::npos) << u->error;
  EXPECT_NE(u->error.find("last stderr"), std::string::npos) << u->error;
}

TEST_F(connection_test, HangOnInitializeTimesOutDiscovery) {
  start(server({{"command", test_server}, {"args", {"--hang-on-initialize"}}, {"discoveryTimeoutMs", 300}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("timed out"), std::string::npos) << u->error;
}

TEST_F(connection_test, ACrashAfterConnectingIsReportedWithExitCode) {
  // The crash must come after the handshake: 400 ms was too little under
  // TSan on a loaded 2-core machine.
  auto c = start(server({{"command", test_server}, {"args", {"--crash-after-ms", "1500", "--stderr-lines", "2"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("exit code 3"), std::string::npos) << u->error;
  EXPECT_EQ(info(c).status, connection_status::error);
}

TEST_F(connection_test, AServerThatClosesStdoutButKeepsRunningIsAFailedConnection) {
  // Without --prompts the tools/list answer completes discovery: the
  // connection is up before the server goes silent.
  auto c = start(server({{"command", test_server}, {"args", {"--close-stdout-after-ms", "0"}}}));
  auto up = settled();
  ASSERT_TRUE(up);
  ASSERT_EQ(up->status, connection_status::connected) << up->error;
  auto pid = up->pid;
  auto down = settled(30s);
  ASSERT_TRUE(down) << "a silent server was never reported";
  EXPECT_EQ(down->status, connection_status::error);
  EXPECT_EQ(down->error.rfind("server closed its stdout but kept running", 0), 0u) << down->error;
  EXPECT_TRUE(wait_gone(pid)) << "its process was not killed";
  auto r = call(c, "echo", {{"text", "x"}});
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("closed its stdout"), std::string::npos) << std::get<std::string>(r);
}

TEST_F(connection_test, GarbageOnStdoutIsTolerated) {
  auto c = start(server({{"command", test_server}, {"args", {"--garbage"}}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::connected) << u->error;
  EXPECT_TRUE(std::holds_alternative<json>(call(c, "echo", {{"text", "x"}})));
}

TEST_F(connection_test, ListChangedIsRelistedAndPublished) {
  auto c = start(server({{"command", test_server}, {"args", {"--list-changed-after-ms", "100"}}}));
  auto first = settled();
  ASSERT_EQ(first->status, connection_status::connected);
  auto second = settled();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, connection_status::connected);
  EXPECT_EQ(second->tools, first->tools + 1);
  auto tools = info(c).tools;
  EXPECT_TRUE(std::any_of(tools.begin(), tools.end(), [](auto& t) { return t.name == "late_tool"; }));
}

TEST_F(connection_test, StderrIsKeptAsATail) {
  auto c = start(server({{"command", test_server}, {"args", {"--stderr-lines", "3"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  // stderr and stdout travel apart; a call round trip orders nothing, so
  // ask until the lines are in (bounded).
  auto deadline = std::chrono::steady_clock::now() + 5s;
  std::vector<std::string> tail;
  while (std::chrono::steady_clock::now() < deadline) {
    tail = info(c).stderr_tail;
    if (std::any_of(tail.begin(), tail.end(), [](auto& l) { return l.find("stderr line 3") != std::string::npos; }))
      break;
    call(c, "echo", {{"text", "x"}});
  }
  EXPECT_TRUE(std::any_of(tail.begin(), tail.end(), [](auto& l) { return l.find("stderr line 3") != std::string::npos; }));
}

TEST_F(connection_test, UnsupportedServerRequestsAreAnsweredWithAnError) {
  auto c = start(server({{"command", test_server}, {"args", {"--request-sampling"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto deadline = std::chrono::steady_clock::now() + 8s;
  bool answered = false;
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    for (auto& l : info(c).stderr_tail)
      answered = answered || l.find("answered with error") != std::string::npos;
    if (!answered) call(c, "echo", {{"text", "x"}});
  }
  EXPECT_TRUE(answered) << "sampling/createMessage was left hanging";
}

TEST_F(connection_test, StopEscalatesForAServerThatIgnoresSigterm) {
  auto c = start(server({{"command", test_server}, {"args", {"--ignore-sigterm"}}}));
  auto u = settled();
  ASSERT_EQ(u->status, connection_status::connected);
  bool stopped = false;
  (*self)->request(c, 15s, atom::stop_v).receive([&](bool ok) { stopped = ok; }, [](caf::error&) {});
  EXPECT_TRUE(stopped);
  EXPECT_TRUE(wait_gone(u->pid));
  started.clear();
}

TEST_F(connection_test, StopLeavesNoGrandchild) {
  auto c = start(server({{"command", test_server}, {"args", {"--spawn-child"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  pid_t grandchild = 0;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!grandchild && std::chrono::steady_clock::now() < deadline) {
    for (auto& l : info(c).stderr_tail)
      if (auto p = l.find("child pid "); p != std::string::npos) grandchild = std::stoi(l.substr(p + 10));
    if (!grandchild) call(c, "echo", {{"text", "x"}});
  }
  ASSERT_GT(grandchild, 0);
  (*self)->request(c, 15s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  started.clear();
  EXPECT_TRUE(wait_gone(grandchild));
}

TEST_F(connection_test, FilterEditsRefilterWithoutReconnecting) {
  auto c = start(server({{"command", test_server}}));
  auto u = settled();
  ASSERT_EQ(u->status, connection_status::connected);
  tool_filter_spec f;
  f.has_include = true;
  f.include = {"echo"};
  (*self)->send(c, atom::filter_v, f);
  auto v = settled();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->tools, 1u);
  EXPECT_EQ(v->pid, u->pid) << "a filter edit must not restart the server";
  auto r = call(c, "add", {{"a", 1}, {"b", 2}});
  ASSERT_TRUE(std::holds_alternative<std::string>(r)) << "filtered tool must not be callable";
}

TEST_F(connection_test, AMissingCommandIsASpawnError) {
  start(server({{"command", "mcprt-no-such-server"}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("spawn failed"), std::string::npos) << u->error;
}

TEST_F(connection_test, LegacySseToNobodyIsAConnectError) {
  // `url` without `type` is the legacy HTTP+SSE transport: it connects (here
  // to a port nobody listens on) instead of refusing the transport.
  start(server({{"url", "http://127.0.0.1:9/sse"}, {"headers", {{"Authorization", "Bearer SECRET-9"}}}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("GET http://127.0.0.1:9/sse: cannot connect"), std::string::npos) << u->error;
  EXPECT_EQ(u->error.find("not supported"), std::string::npos) << u->error;
  EXPECT_EQ(u->error.find("SECRET"), std::string::npos) << u->error;
}

TEST_F(connection_test, StreamableHttpAgainstTheTestServer) {
  auto proc = io::child_process::spawn({test_server, {"--http", "0", "--tools", "2"}, {}, {}});
  std::string line;
  char ch;
  while (::read(proc.stdout_fd(), &ch, 1) == 1 && ch != '\n')
    line.push_back(ch);
  auto at = line.find("http://");
  ASSERT_NE(at, std::string::npos) << line;
  auto c = start(server({{"httpUrl", line.substr(at)}, {"headers", {{"Authorization", "Bearer SECRET-1"}}}}, "web"));
  auto u = settled();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  EXPECT_EQ(u->tools, 6u);
  EXPECT_EQ(u->pid, -1);
  auto r = call(c, "echo", {{"text", "over http"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  EXPECT_EQ(text_of(std::get<json>(r)), "over http");
  (*self)->request(c, 10s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  started.clear();
  proc.shutdown(2s, 2s);
}

// A streamable-HTTP server that announces no listChanged still sends
// requests on the standalone GET stream (elicitation/create, ping): the
// connection opens that stream for every session and POSTs the answer.
TEST_F(connection_test, RequestOnTheGetStreamIsAnsweredByPost) {
  // Declared before the server, so they outlive its handler threads.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> answers;
  int gets = 0;
  httplib::Server svr;
  svr.Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    auto msg = json::parse(req.body, nullptr, false);
    res.set_header("Mcp-Session-Id", "s-1");
    if (!msg.is_object() || !msg.contains("method")) {
      {
        std::lock_guard<std::mutex> lock(mu);
        answers.push_back(msg);
      }
      cv.notify_all();
      res.status = 202;
      return;
    }
    if (!msg.contains("id")) {
      res.status = 202;
      return;
    }
    json result = json::object();
    auto method = msg["method"].get<std::string>();
    if (method == "initialize")
      result = {{"protocolVersion", "2025-06-18"},
                {"capabilities", {{"tools", json::object()}}},
                {"serverInfo", {{"name", "no-list-changed"}, {"version", "1"}}}};
    else if (method == "tools/list")
      result = {{"tools", json::array()}};
    res.set_content(json{{"jsonrpc", "2.0"}, {"id", msg["id"]}, {"result", result}}.dump(), "application/json");
  });
  svr.Get("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    if (++gets > 1) {
      res.status = 405;
      return;
    }
    res.set_content("id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}\n\n", "text/event-stream");
  });
  int port = svr.bind_to_any_port("127.0.0.1");
  std::thread th([&] { svr.listen_after_bind(); });
  auto c = start(server({{"httpUrl", "http://127.0.0.1:" + std::to_string(port) + "/mcp"}}, "web"));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::connected) << u->error;
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 20s, [&] { return !answers.empty(); })) << "no answer was POSTed; GETs: " << gets;
    if (!answers.empty()) {
      EXPECT_EQ(answers[0].value("id", 0), 77) << answers[0].dump();
      EXPECT_TRUE(answers[0].contains("result")) << answers[0].dump();
    }
  }
  (*self)->request(c, 10s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  started.clear();
  svr.stop();
  th.join();
}

TEST_F(connection_test, HttpConnectionRefusedNamesTheUrlButNoHeaderValue) {
  start(server({{"httpUrl", "http://127.0.0.1:9/mcp"}, {"headers", {{"Authorization", "Bearer SECRET-2"}}}}, "web"));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("127.0.0.1:9"), std::string::npos) << u->error;
  EXPECT_EQ(u->error.find("SECRET-2"), std::string::npos) << u->error;
}

// -- the npm reference servers ------------------------------------------------

TEST_F(connection_test, ServerEverythingOverStdio) {
  auto bin = peer_bin("mcp-server-everything");
  if (!bin) GTEST_SKIP() << "npm peers not installed (scripts/setup.sh installs them)";
  auto c = start(server({{"command", "node"}, {"args", {bin->string(), "stdio"}}}, "everything"));
  auto u = settled(60s);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  EXPECT_GE(u->tools, 10u);
  EXPECT_GE(u->prompts, 1u);
  auto r = call(c, "echo", {{"message", "hi from mcprt"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  EXPECT_NE(std::get<json>(r).dump().find("hi from mcprt"), std::string::npos);
  // It sends an unsolicited tools/list_changed after init: still connected.
  EXPECT_EQ(info(c).status, connection_status::connected);
}

TEST_F(connection_test, ServerFilesystemReadsAFile) {
  auto bin = peer_bin("mcp-server-filesystem");
  if (!bin) GTEST_SKIP() << "npm peers not installed";
  auto dir = fs::temp_directory_path() / ("mcprt-fs-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "note.txt") << "written by the test";
  auto c = start(server({{"command", "node"}, {"args", {bin->string(), dir.string()}}}, "fs"));
  auto u = settled(60s);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  auto tools = info(c).tools;
  std::string tool = "read_text_file";
  if (std::none_of(tools.begin(), tools.end(), [&](auto& t) { return t.name == tool; })) tool = "read_file";
  auto r = call(c, tool, {{"path", (fs::canonical(dir) / "note.txt").string()}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  EXPECT_NE(std::get<json>(r).dump().find("written by the test"), std::string::npos) << std::get<json>(r).dump();
  fs::remove_all(dir);
}

TEST_F(connection_test, ServerMemoryStoresAnEntity) {
  auto bin = peer_bin("mcp-server-memory");
  if (!bin) GTEST_SKIP() << "npm peers not installed";
  auto dir = fs::temp_directory_path() / ("mcprt-mem-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto c = start(server({{"command", "node"}, {"args", {bin->string()}},
                         {"env", {{"MEMORY_FILE_PATH", (dir / "memory.jsonl").string()}}}}, "memory"));
  auto u = settled(60s);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  auto r = call(c, "create_entities",
                {{"entities", {{{"name", "mcprt"}, {"entityType", "project"}, {"observations", {"written in C++"}}}}}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  auto g = call(c, "read_graph", json::object());
  ASSERT_TRUE(std::holds_alternative<json>(g));
  EXPECT_NE(std::get<json>(g).dump().find("written in C++"), std::string::npos);
  fs::remove_all(dir);
}

TEST_F(connection_test, NamePrefixRenamesEveryTool) {
  auto c = start(server({{"command", test_server}, {"args", {"--name-prefix", "v2_"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto tools = info(c).tools;
  ASSERT_FALSE(tools.empty());
  for (auto& t : tools)
    EXPECT_EQ(t.name.rfind("v2_", 0), 0u) << t.name;
  EXPECT_TRUE(std::holds_alternative<json>(call(c, "v2_echo", {{"text", "x"}})));
}

TEST_F(connection_test, ASlowStartWithinTheDiscoveryTimeoutConnects) {
  start(server({{"command", test_server}, {"args", {"--startup-delay-ms", "300"}}}));
  EXPECT_EQ(settled()->status, connection_status::connected);
}

TEST_F(connection_test, ASlowStartBeyondTheDiscoveryTimeoutFails) {
  start(server({{"command", test_server}, {"args", {"--startup-delay-ms", "3000"}}, {"discoveryTimeoutMs", 200}}));
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::error);
  EXPECT_NE(u->error.find("timed out"), std::string::npos) << u->error;
}

TEST_F(connection_test, PingsFromTheServerAreAnswered) {
  auto c = start(server({{"command", test_server}, {"args", {"--ping-client-after-ms", "50"}}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  auto deadline = std::chrono::steady_clock::now() + 8s;
  bool answered = false;
  while (!answered && std::chrono::steady_clock::now() < deadline) {
    for (auto& l : info(c).stderr_tail)
      answered = answered || l.find("answered with result") != std::string::npos;
    if (!answered) call(c, "echo", {{"text", "x"}});
  }
  EXPECT_TRUE(answered);
}

// The server forgets the session (it restarted on the same port): the
// connection re-initializes once and carries on.
TEST_F(connection_test, HttpSessionLostIsReinitializedOnce) {
  auto first = io::child_process::spawn({test_server, {"--http", "0"}, {}, {}});
  std::string line;
  char ch;
  while (::read(first.stdout_fd(), &ch, 1) == 1 && ch != '\n')
    line.push_back(ch);
  auto url = line.substr(line.find("http://"));
  auto port = url.substr(url.rfind(':') + 1);
  port = port.substr(0, port.find('/'));
  auto c = start(server({{"httpUrl", url}}, "web"));
  ASSERT_EQ(settled()->status, connection_status::connected);
  first.shutdown(2s, 2s);
  auto second = io::child_process::spawn({test_server, {"--http", port}, {}, {}});
  line.clear();
  while (::read(second.stdout_fd(), &ch, 1) == 1 && ch != '\n')
    line.push_back(ch);
  ASSERT_NE(line.find(port), std::string::npos) << line;
  // The first call meets the 404 and fails; the connection starts over.
  auto r = call(c, "echo", {{"text", "lost"}});
  auto u = settled();
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, connection_status::connected) << u->error;
  auto again = call(c, "echo", {{"text", "found"}});
  ASSERT_TRUE(std::holds_alternative<json>(again)) << std::get<std::string>(again);
  EXPECT_EQ(text_of(std::get<json>(again)), "found");
  (*self)->request(c, 10s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  started.clear();
  second.shutdown(2s, 2s);
}

TEST_F(connection_test, ServerEverythingOverStreamableHttp) {
  auto bin = peer_bin("mcp-server-everything");
  if (!bin) GTEST_SKIP() << "npm peers not installed";
  int port = mcprt::test::unused_port();
  auto proc = io::child_process::spawn({"node", {fs::canonical(*bin).string(), "streamableHttp"},
                                        {{"PORT", std::to_string(port)}}, {}});
  // It says on stderr when it listens.
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < deadline) {
    pollfd p{proc.stderr_fd(), POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char ch;
    if (::read(proc.stderr_fd(), &ch, 1) != 1) break;
    if (ch != '\n') {
      line.push_back(ch);
      continue;
    }
    up = line.find("listening on port") != std::string::npos;
    line.clear();
  }
  ASSERT_TRUE(up) << "server-everything did not start";
  auto c = start(server({{"httpUrl", "http://127.0.0.1:" + std::to_string(port) + "/mcp"}}, "everything-http"));
  auto u = settled(30s);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->status, connection_status::connected) << u->error;
  EXPECT_GE(u->tools, 10u);
  EXPECT_GE(u->prompts, 1u);
  auto r = call(c, "echo", {{"message", "over streamable http"}});
  ASSERT_TRUE(std::holds_alternative<json>(r)) << std::get<std::string>(r);
  EXPECT_NE(std::get<json>(r).dump().find("over streamable http"), std::string::npos);
  (*self)->request(c, 10s, atom::stop_v).receive([](bool) {}, [](caf::error&) {});
  started.clear();
  proc.shutdown(2s, 2s);
}

TEST_F(connection_test, PingsTheServerAndReportsTheRoundTrip) {
  auto c = start(server({{"command", test_server}}));
  ASSERT_EQ(settled()->status, connection_status::connected);
  int64_t rtt = -1;
  (*self)->request(c, 10s, atom::ping_v).receive([&](int64_t us) { rtt = us; },
                                                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_GE(rtt, 0);
  EXPECT_LT(rtt, 10'000'000);
}

TEST_F(connection_test, PingBeforeConnectingIsAnError) {
  auto c = start(server({{"command", test_server}, {"args", {"--hang-on-initialize"}}, {"discoveryTimeoutMs", 5000}}));
  bool failed = false;
  (*self)->request(c, 10s, atom::ping_v).receive([](int64_t) {}, [&](caf::error&) { failed = true; });
  EXPECT_TRUE(failed);
}
