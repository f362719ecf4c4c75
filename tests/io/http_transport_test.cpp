#include <gtest/gtest.h>

#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ports.hpp"
#include "io/child_process.hpp"
#include "io/http_transport.hpp"
#include "io/oauth_client.hpp"
#include "transport_test_support.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;


namespace {

const std::string test_server_bin = MCPRT_TEST_SERVER;

const std::string k_init =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
const std::string k_initialized = R"({"jsonrpc":"2.0","method":"notifications/initialized"})";

std::string request(int id, const std::string& method, const std::string& params = "{}") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method +
         R"(","params":)" + params + "}";
}

std::string id_tag(int id) { return "\"id\":" + std::to_string(id); }

using test::contains;
using test::recorder;

// Reads a child's pipe into lines on a background thread.
class pipe_reader {
 public:
  explicit pipe_reader(int fd) : fd_(fd), thread_([this] { run(); }) {}
  ~pipe_reader() { thread_.join(); }

  std::optional<std::string> wait_line(const std::string& needle,
                                       std::chrono::milliseconds timeout = 15s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<std::string> found;
    cv_.wait_for(lock, timeout, [&] {
      for (auto& l : lines_)
        if (contains(l, needle)) {
          found = l;
          return true;
        }
      return eof_;
    });
    return found;
  }

 private:
  void run() {
    std::string partial;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      std::lock_guard<std::mutex> lock(mu_);
      partial.append(buf, static_cast<std::size_t>(n));
      for (auto nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n')) {
        lines_.push_back(partial.substr(0, nl));
        partial.erase(0, nl + 1);
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    eof_ = true;
    cv_.notify_all();
  }

  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread thread_;
};

// Spawns children from one long-lived thread. child_process runs the child
// between clone(CLONE_VM | CLONE_VFORK) and exec on the calling thread's
// memory, TLS included, so under TSan the libc interceptors it passes
// through scribble on that thread's sanitizer state (later reports then
// show mutex-protected accesses as races). Keeping that off the test
// threads keeps TSan's picture of them right; the thread lives for the
// whole run because children die with the thread that spawned them.
class spawner {
 public:
  static child_process spawn(const spawn_options& opts) {
    static spawner instance;
    return instance.run(opts);
  }

 private:
  spawner() : thread_([this] { loop(); }) {}
  ~spawner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  child_process run(const spawn_options& opts) {
    std::optional<child_process> result;
    std::exception_ptr failure;
    bool done = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = [&] {
        try {
          result.emplace(child_process::spawn(opts));
        } catch (...) {
          failure = std::current_exception();
        }
        done = true;
      };
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done; });
    if (failure) std::rethrow_exception(failure);
    return std::move(*result);
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || job_; });
      if (stop_) return;
      auto job = std::move(job_);
      job_ = nullptr;
      job(); // under the lock: the caller waits anyway
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

// A server process (ours or a peer) whose stdout and stderr are drained.
class server_process {
 public:
  explicit server_process(spawn_options opts)
      : child_(spawner::spawn(opts)),
        out_(std::make_unique<pipe_reader>(child_.stdout_fd())),
        err_(std::make_unique<pipe_reader>(child_.stderr_fd())) {}
  ~server_process() { stop(); }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    // The readers must finish before shutdown closes the fds they read:
    // kill the group, let them see EOF, then reap.
    ::killpg(child_.pid(), SIGKILL);
    out_.reset(); // EOF once the process (the only writer) is gone
    err_.reset();
    child_.shutdown(0ms, 5s);
  }
  void kill9() {
    ::kill(child_.pid(), SIGKILL);
    stop();
  }
  pipe_reader& out() { return *out_; }
  pipe_reader& err() { return *err_; }
  pid_t pid() const { return child_.pid(); }

 private:
  child_process child_;
  std::unique_ptr<pipe_reader> out_;
  std::unique_ptr<pipe_reader> err_;
  bool stopped_ = false;
};

// mcprt-test-server --http 0 plus `flags`.
struct test_server {
  explicit test_server(std::vector<std::string> flags = {}) {
    std::vector<std::string> args{"--http", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    proc = std::make_unique<server_process>(spawn_options{test_server_bin, args, {}, {}});
    auto line = proc->out().wait_line("listening on ");
    if (!line) throw std::runtime_error("test server did not start");
    url = line->substr(line->find("http://"));
    auto colon = url.rfind(':');
    port = std::stoi(url.substr(colon + 1));
  }
  std::unique_ptr<server_process> proc;
  std::string url;
  int port = 0;
};

// Initializes `t` and waits for the answer; returns the result message.
std::string initialize(http_transport& t, recorder& r) {
  t.send(k_init);
  auto reply = r.message_with(id_tag(1));
  if (!reply) return {};
  t.set_protocol_version("2025-06-18");
  t.send(k_initialized);
  return *reply;
}

int free_port() {
  return mcprt::test::unused_port();
}

using test::local_server;

} // namespace

// ---------------------------------------------------------------------------
// Pieces
// ---------------------------------------------------------------------------

TEST(JsonBatch, SplitsTopLevelArraysOnly) {
  using detail::split_json_batch;
  EXPECT_TRUE(split_json_batch("").empty());
  EXPECT_TRUE(split_json_batch("  \n").empty());
  EXPECT_TRUE(split_json_batch("[]").empty());
  EXPECT_EQ(split_json_batch(R"( {"id":1} )"), std::vector<std::string>{R"({"id":1})"});
  auto parts = split_json_batch(R"([{"id":1,"s":"a],[}\"x"}, {"id":[2,{"z":3}]} ,7])");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], R"({"id":1,"s":"a],[}\"x"})");
  EXPECT_EQ(parts[1], R"({"id":[2,{"z":3}]})");
  EXPECT_EQ(parts[2], "7");
  // Malformed text is handed on whole, for the session to reject.
  EXPECT_EQ(split_json_batch("[{\"id\":1}"), std::vector<std::string>{"[{\"id\":1}"});
  EXPECT_EQ(split_json_batch("[1 2]"), std::vector<std::string>{"[1 2]"});
}

TEST(JsonBatch, RecognizesRequests) {
  using detail::is_json_rpc_request;
  EXPECT_TRUE(is_json_rpc_request(request(3, "ping")));
  EXPECT_FALSE(is_json_rpc_request(k_initialized));
  EXPECT_FALSE(is_json_rpc_request(R"({"jsonrpc":"2.0","id":3,"result":{}})"));
  EXPECT_FALSE(is_json_rpc_request(R"({"method":"x","id":null})"));
  EXPECT_FALSE(is_json_rpc_request(R"({"params":{"method":"x","id":1},"method":"n"})"));
  EXPECT_TRUE(is_json_rpc_request("[" + std::string(k_initialized) + "," + request(4, "ping") + "]"));
  EXPECT_FALSE(is_json_rpc_request("garbage"));
}

// ---------------------------------------------------------------------------
// Against mcprt-test-server
// ---------------------------------------------------------------------------

TEST(HttpTransport, InitializeCapturesSessionThenNotificationAndToolsList) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url, {{"Authorization", "Bearer SECRET-123"}}, r.events(), pool);
  EXPECT_EQ(t.display_url(), srv.url);
  EXPECT_FALSE(t.session_id());

  auto reply = initialize(t, r);
  ASSERT_FALSE(reply.empty()) << "no initialize result";
  EXPECT_TRUE(contains(reply, "\"result\"")) << reply;
  EXPECT_TRUE(contains(reply, "protocolVersion")) << reply;
  ASSERT_TRUE(t.session_id());
  EXPECT_EQ(t.session_id()->size(), 32u);

  // notifications/initialized got its 202 before tools/list went out and
  // produced no message.
  t.send(request(2, "tools/list"));
  auto tools = r.message_with(id_tag(2));
  ASSERT_TRUE(tools);
  EXPECT_TRUE(contains(*tools, "\"sleep\"")) << *tools;
  EXPECT_EQ(r.message_count(), 2u);
  EXPECT_TRUE(r.error_list().empty());
  EXPECT_FALSE(r.overlapped);
}

TEST(HttpTransport, ParsesSseResponses) {
  test_server srv({"--sse-responses"});
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  auto reply = initialize(t, r);
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply.front(), '{') << "the SSE framing is gone: " << reply;
  ASSERT_TRUE(t.session_id());
  t.send(request(2, "tools/call", R"({"name":"echo","arguments":{"text":"multi\nline"}})"));
  auto echo = r.message_with(id_tag(2));
  ASSERT_TRUE(echo);
  EXPECT_TRUE(contains(*echo, "multi\\nline")) << *echo;
  EXPECT_TRUE(r.error_list().empty());
}

TEST(HttpTransport, SlowCallDoesNotBlockPing) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  ASSERT_FALSE(initialize(t, r).empty());
  auto start = std::chrono::steady_clock::now();
  t.send(request(10, "tools/call", R"({"name":"sleep","arguments":{"ms":2000}})"));
  t.send(request(11, "ping"));
  ASSERT_TRUE(r.message_with(id_tag(11), 5s));
  auto ping_time = std::chrono::steady_clock::now() - start;
  EXPECT_LT(ping_time, 1500ms);
  EXPECT_FALSE(r.message_with(id_tag(10), 0ms)) << "the sleep answered before the ping";
  auto slept = r.message_with(id_tag(10), 10s);
  ASSERT_TRUE(slept);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2000ms);
  EXPECT_FALSE(r.overlapped) << "callbacks of one transport ran concurrently";
}

TEST(HttpTransport, ManyPipelinedRequestsAreAllAnswered) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  ASSERT_FALSE(initialize(t, r).empty());
  for (int i = 0; i < 40; ++i) t.send(request(100 + i, "ping"));
  ASSERT_TRUE(r.wait([&] { return r.messages.size() == 41; }, 20s));
  EXPECT_TRUE(r.error_list().empty());
  EXPECT_FALSE(r.overlapped);
}

TEST(HttpTransport, ServerKilledReportsErrorNamingUrlNeverHeaderValues) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url,
                   {{"Authorization", "Bearer SECRET-123"}, {"X-Api-Key", "key-SECRET-456"}},
                   r.events(), pool, 2000ms);
  ASSERT_FALSE(initialize(t, r).empty());
  auto sid = *t.session_id();
  srv.proc->kill9();
  t.send(request(2, "tools/list"));
  ASSERT_TRUE(r.wait_error());
  auto errors = r.error_list();
  EXPECT_TRUE(contains(errors[0], "POST " + srv.url)) << errors[0];
  for (auto& e : errors) {
    EXPECT_FALSE(contains(e, "SECRET")) << e;
    EXPECT_FALSE(contains(e, sid)) << e;
  }
}

TEST(HttpTransport, UnknownSessionReportsExpiryOnceThenReinitializes) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  ASSERT_FALSE(initialize(t, r).empty());
  auto sid = *t.session_id();

  // End the session behind the transport's back.
  httplib::Client raw("127.0.0.1", srv.port);
  auto del = raw.Delete("/mcp", {{"Mcp-Session-Id", sid}});
  ASSERT_TRUE(del);
  ASSERT_EQ(del->status, 200);

  t.send(request(2, "tools/list"));
  t.send(request(3, "ping"));
  ASSERT_TRUE(r.wait([&] { return r.expired >= 1; }));
  // Both requests got 404; the caller hears it once.
  ASSERT_TRUE(t.session_id());
  t.send(request(4, "ping")); // a third 404 for the same id
  t.reset_session();
  EXPECT_FALSE(t.session_id());
  t.send(R"({"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  ASSERT_TRUE(r.message_with(id_tag(5)));
  ASSERT_TRUE(t.session_id());
  EXPECT_NE(*t.session_id(), sid);
  t.send(request(6, "tools/list"));
  ASSERT_TRUE(r.message_with(id_tag(6)));
  EXPECT_EQ(r.expired_count(), 1);
  EXPECT_TRUE(r.error_list().empty()) << r.error_list()[0];
}

TEST(HttpTransport, CloseDeletesTheSession) {
  test_server srv;
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  ASSERT_FALSE(initialize(t, r).empty());
  auto sid = *t.session_id();
  t.close();
  t.close(); // idempotent
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  t.send(request(2, "ping")); // ignored after close
  EXPECT_FALSE(t.open_event_stream());

  httplib::Client raw("127.0.0.1", srv.port);
  auto res = raw.Post("/mcp", {{"Mcp-Session-Id", sid}, {"Accept", "application/json, text/event-stream"}},
                      request(3, "ping"), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(r.closed_count(), 1);
  EXPECT_EQ(r.message_count(), 1u);
  EXPECT_TRUE(r.error_list().empty());
}

TEST(HttpTransport, EventStreamDeliversListChanged) {
  test_server srv({"--list-changed-after-ms", "200"});
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, r.events(), pool);
  ASSERT_FALSE(initialize(t, r).empty());
  ASSERT_TRUE(t.open_event_stream());
  EXPECT_TRUE(t.open_event_stream()) << "idempotent";
  auto note = r.message_with("notifications/tools/list_changed");
  ASSERT_TRUE(note);
  EXPECT_GE(pool.active_requests(), 1u) << "the stream is open";
  t.send(request(2, "tools/list"));
  auto tools = r.message_with(id_tag(2));
  ASSERT_TRUE(tools);
  EXPECT_TRUE(contains(*tools, "late_tool")) << *tools;
  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s)) << "close() stops the stream";
  EXPECT_EQ(pool.active_requests(), 0u);
  EXPECT_TRUE(r.error_list().empty());
}

TEST(HttpTransport, DestroyingWithRequestsInFlightIsQuickAndSilent) {
  test_server srv({"--list-changed-after-ms", "60000"});
  http_client pool;
  recorder r;
  auto t = std::make_unique<http_transport>(srv.url, std::map<std::string, std::string>{},
                                            r.events(), pool);
  ASSERT_FALSE(initialize(*t, r).empty());
  ASSERT_TRUE(t->open_event_stream());
  t->send(request(2, "tools/call", R"({"name":"sleep","arguments":{"ms":5000}})"));
  t->send(request(3, "tools/call", R"({"name":"sleep","arguments":{"ms":5000}})"));
  auto before = r.message_count();
  auto start = std::chrono::steady_clock::now();
  t.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  // The client ends the aborted requests quickly and reports nothing.
  auto ran = std::make_shared<std::promise<void>>();
  auto done = ran->get_future();
  pool.post([ran] { ran->set_value(); });
  EXPECT_EQ(done.wait_for(3s), std::future_status::ready) << "aborted requests still hold the loop";
  EXPECT_EQ(r.message_count(), before);
  EXPECT_TRUE(r.error_list().empty());
}

TEST(HttpTransport, BadUrlReportsAtOnce) {
  http_client pool;
  recorder r;
  http_transport t("htp://user:pw-SECRET@example.com/mcp", {{"Authorization", "Bearer SECRET-123"}},
                   r.events(), pool);
  ASSERT_TRUE(r.wait_error(5s));
  auto e = r.error_list()[0];
  EXPECT_TRUE(contains(e, "invalid URL")) << e;
  EXPECT_FALSE(contains(e, "SECRET")) << e;
  t.send(request(1, "ping"));
  EXPECT_FALSE(t.open_event_stream());
  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  EXPECT_EQ(r.error_list().size(), 1u);
}

TEST(HttpTransport, ConnectionRefusedAndTlsFailuresNameTheUrl) {
  http_client pool;
  {
    recorder r;
    auto url = "http://127.0.0.1:" + std::to_string(free_port()) + "/mcp";
    http_transport t(url, {{"Authorization", "Bearer SECRET-123"}}, r.events(), pool);
    t.send(k_init);
    ASSERT_TRUE(r.wait_error());
    auto e = r.error_list()[0];
    EXPECT_TRUE(contains(e, url)) << e;
    EXPECT_TRUE(contains(e, "cannot connect")) << e;
    EXPECT_FALSE(contains(e, "SECRET")) << e;
  }
  {
    test_server srv; // plain HTTP: the TLS handshake fails
    recorder r;
    auto url = "https://127.0.0.1:" + std::to_string(srv.port) + "/mcp";
    http_transport t(url, {{"Authorization", "Bearer SECRET-123"}}, r.events(), pool, 3000ms);
    t.send(k_init);
    ASSERT_TRUE(r.wait_error());
    auto e = r.error_list()[0];
    EXPECT_TRUE(contains(e, url)) << e;
    EXPECT_TRUE(contains(e, "TLS") || contains(e, "connection lost")) << e;
    EXPECT_FALSE(contains(e, "SECRET")) << e;
  }
}

// ---------------------------------------------------------------------------
// Against an in-process server: shapes mcprt-test-server never produces
// ---------------------------------------------------------------------------

TEST(HttpTransport, HttpErrorsCarryABodyExcerptButNoHeaderValues) {
  local_server ls;
  ls.svr().Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    // A careless server that echoes credentials back.
    res.status = 500;
    res.set_content("boom; you sent " + req.get_header_value("Authorization") + " and key " +
                        req.get_header_value("X-Api-Key"),
                    "text/plain");
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/echo?token=abc"),
                   {{"Authorization", "Bearer SECRET-123"}, {"X-Api-Key", "key-SECRET-456"}},
                   r.events(), pool);
  t.send(request(1, "ping"));
  ASSERT_TRUE(r.wait_error());
  auto e = r.error_list()[0];
  EXPECT_TRUE(contains(e, "POST " + ls.url("/echo"))) << e;
  EXPECT_TRUE(contains(e, "HTTP 500")) << e;
  EXPECT_TRUE(contains(e, "boom; you sent")) << e;
  EXPECT_FALSE(contains(e, "SECRET")) << e;
  EXPECT_FALSE(contains(e, "token=abc")) << e;
}

TEST(HttpTransport, AnswerFailedRequestsCompletesEachRequestOfAFailedPost) {
  local_server ls;
  ls.svr().Post("/mcp", [](const httplib::Request& req, httplib::Response& res) {
    // A careless server that echoes the bare token back.
    auto auth = req.get_header_value("Authorization");
    res.status = 500;
    res.set_content("boom for " + auth.substr(auth.find(' ') + 1), "text/plain");
  });
  http_client pool;
  recorder r;
  http_transport_options o;
  o.answer_failed_requests = true;
  http_transport t(ls.url("/mcp"), {{"Authorization", "Bearer SECRET-123"}}, r.events(), pool, o);
  t.send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  t.send(request(7, "ping"));
  auto reply = r.message_with(id_tag(7));
  ASSERT_TRUE(reply);
  EXPECT_TRUE(contains(*reply, "-32000")) << *reply;
  EXPECT_TRUE(contains(*reply, "HTTP 500")) << *reply;
  EXPECT_FALSE(contains(*reply, "SECRET")) << *reply;
  // The notification failed too: reported, but it has no one to answer.
  ASSERT_TRUE(r.wait([&] { return r.errors.size() >= 2; }));
  EXPECT_EQ(r.message_list().size(), 1u);
  for (auto& e : r.error_list())
    EXPECT_FALSE(contains(e, "SECRET")) << e;
}

TEST(HttpTransport, SplitsBatchesAndToleratesMissingEventStream) {
  // Declared before the server, so they outlive its handler threads.
  std::mutex mu;
  std::vector<std::string> seen_accept, seen_version, seen_session;
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen_accept.push_back(req.get_header_value("Accept"));
      seen_version.push_back(req.get_header_value("MCP-Protocol-Version"));
      seen_session.push_back(req.get_header_value("Mcp-Session-Id"));
    }
    res.set_header("Mcp-Session-Id", "sess-42");
    res.set_content(R"([{"jsonrpc":"2.0","id":1,"result":{}}, {"jsonrpc":"2.0","method":"n"}])",
                    "application/json; charset=utf-8");
  });
  ls.svr().Get("/mcp", [](const httplib::Request&, httplib::Response& res) { res.status = 405; });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {{"Accept", "text/html"}}, r.events(), pool);
  t.send(request(1, "initialize"));
  ASSERT_TRUE(r.wait([&] { return r.messages.size() == 2; }));
  auto msgs = r.message_list();
  EXPECT_EQ(msgs[0], R"({"jsonrpc":"2.0","id":1,"result":{}})");
  EXPECT_EQ(msgs[1], R"({"jsonrpc":"2.0","method":"n"})");
  EXPECT_EQ(t.session_id(), "sess-42");
  t.set_protocol_version("2025-06-18");
  ASSERT_TRUE(t.open_event_stream());
  t.send(request(2, "ping"));
  ASSERT_TRUE(r.wait([&] { return r.messages.size() == 4; }));
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s)) << "405 ends the stream";
  EXPECT_EQ(pool.active_requests(), 0u);
  EXPECT_TRUE(r.error_list().empty());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen_accept.size(), 2u);
  EXPECT_EQ(seen_accept[0], "application/json, text/event-stream");
  EXPECT_EQ(seen_session[0], "");
  EXPECT_EQ(seen_version[0], "");
  EXPECT_EQ(seen_session[1], "sess-42");
  EXPECT_EQ(seen_version[1], "2025-06-18");
}

TEST(HttpTransport, EventStreamRefusedWith405IsTriedOnceAndNeverAgain) {
  // A server without a standalone stream answers its GET with 405: the
  // transport asks once, reports nothing, and does not ask again (no retry
  // storm), however often the stream is "opened".
  std::atomic<int> gets{0};
  local_server ls;
  ls.svr().Get("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    ++gets;
    res.status = 405;
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  ASSERT_TRUE(t.open_event_stream());
  // The stream ends after the 405; once it has, no GET can follow.
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s)) << "405 ends the stream";
  EXPECT_TRUE(t.open_event_stream()) << "idempotent";
  EXPECT_EQ(pool.active_requests(), 0u) << "a refused stream is not reopened";
  EXPECT_EQ(gets.load(), 1);
  EXPECT_TRUE(r.error_list().empty());
  EXPECT_EQ(r.message_count(), 0u);
}

// A server with sessions but no GET route answers the standalone stream
// 404: that is no expired session (the POSTs still work), the stream just ends.
TEST(HttpTransport, FirstEventStreamGetAnswered404IsNoSessionExpiry) {
  std::atomic<int> gets{0};
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    res.set_header("Mcp-Session-Id", "sess-1");
    res.set_content(R"({"jsonrpc":"2.0","id":1,"result":{}})", "application/json");
  });
  ls.svr().Get("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    ++gets;
    res.status = 404;
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  t.send(request(1, "initialize"));
  ASSERT_TRUE(r.message_with(id_tag(1)));
  ASSERT_TRUE(t.open_event_stream());
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s));
  EXPECT_EQ(gets.load(), 1);
  EXPECT_EQ(r.expired_count(), 0);
  EXPECT_TRUE(r.error_list().empty());
}

// SEP-1699: the server closes a POST's SSE stream after a priming event
// with an id and `retry: 500`, and answers on the GET that resumes it.
TEST(HttpTransport, PostStreamClosedEarlyIsResumedWithLastEventIdAfterRetry) {
  // Declared before the server, so they outlive its handler threads.
  std::mutex mu;
  std::vector<std::string> last_event_ids;
  std::chrono::steady_clock::time_point closed_at, got_at;
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [&](std::size_t, httplib::DataSink& sink) {
      static const std::string priming = "id: p1\nretry: 500\ndata: \n\n";
      sink.write(priming.data(), priming.size());
      {
        std::lock_guard<std::mutex> lock(mu);
        closed_at = std::chrono::steady_clock::now();
      }
      sink.done();
      return true;
    });
  });
  ls.svr().Get("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      got_at = std::chrono::steady_clock::now();
      last_event_ids.push_back(req.get_header_value("Last-Event-ID"));
    }
    res.set_content("id: p2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"ok\":true}}\n\n", "text/event-stream");
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  t.send(request(2, "tools/call", R"({"name":"slow"})"));
  auto m = r.message_with(id_tag(2), 20s);
  ASSERT_TRUE(m) << "the response did not arrive on the resumed stream";
  EXPECT_TRUE(contains(*m, "\"ok\":true")) << *m;
  EXPECT_TRUE(r.error_list().empty());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(last_event_ids.size(), 1u);
  EXPECT_EQ(last_event_ids[0], "p1");
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(got_at - closed_at);
  EXPECT_GE(waited.count(), 450) << "resumed before the server's retry delay";
  EXPECT_LE(waited.count(), 5000) << "resumed far later than the server's retry delay";
}

// A stream that ends before the response and never sent an event id cannot
// be resumed: that request fails at once with the reason, nothing else does.
TEST(HttpTransport, PostStreamClosedEarlyWithoutEventIdFailsTheRequest) {
  std::atomic<int> gets{0};
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", "text/event-stream");
  });
  ls.svr().Get("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    ++gets;
    res.status = 405;
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  t.send(request(7, "tools/call"));
  auto m = r.message_with(id_tag(7), 10s);
  ASSERT_TRUE(m) << "the request was left waiting";
  EXPECT_TRUE(contains(*m, "\"error\"")) << *m;
  EXPECT_TRUE(contains(*m, "no event id")) << *m;
  EXPECT_TRUE(contains(*m, ls.url("/mcp"))) << *m;
  EXPECT_EQ(gets.load(), 0);
  EXPECT_TRUE(r.error_list().empty()) << "one request failing does not fail the transport";
}

// A 2026-07-28 subscriptions/listen is a POST whose stream the server holds
// open: silence past the request timeout is waited out as the GET stream's
// is, and when it ends (here: silent past the stream timeout) only the
// listen is answered, with an error, while the transport goes on.
TEST(HttpTransport, AListenStreamOutlivesTheRequestTimeoutAndItsEndAnswersOnlyTheListen) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Mcp-Method") != "subscriptions/listen") {
      res.set_content(R"({"jsonrpc":"2.0","id":8,"result":{"resultType":"complete"}})", "application/json");
      return;
    }
    res.set_chunked_content_provider("text/event-stream", [&](std::size_t offset, httplib::DataSink& sink) {
      if (offset == 0) {
        static const std::string ack =
          "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\"}\n\n";
        sink.write(ack.data(), ack.size());
        return true;
      }
      // Then silence, until the client gives up on it or the test ends.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, 20s, [&] { return finished; });
      sink.done();
      return true;
    });
  });
  http_client pool;
  recorder r;
  http_transport_options o;
  o.request_timeout = 300ms;
  o.event_stream_idle_timeout = 1500ms;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool, o);
  t.set_protocol_version("2026-07-28");
  auto sent_at = std::chrono::steady_clock::now();
  t.send(request(7, "subscriptions/listen", R"({"notifications":{"toolsListChanged":true}})"),
         {{"Mcp-Method", "subscriptions/listen"}});
  ASSERT_TRUE(r.message_with("acknowledged", 10s));
  t.send(request(8, "tools/list"), {{"Mcp-Method", "tools/list"}});
  ASSERT_TRUE(r.message_with(id_tag(8), 10s)) << "other requests go on beside the listen";
  auto ended = r.message_with(id_tag(7), 20s);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sent_at);
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
  }
  cv.notify_all();
  ASSERT_TRUE(ended) << "the listen was left waiting";
  EXPECT_TRUE(contains(*ended, "\"error\"")) << *ended;
  EXPECT_GE(waited.count(), 1400) << "the listen was given up before the stream timeout";
  EXPECT_TRUE(r.error_list().empty()) << "the end of a listen is not the transport's failure";
}

// The resumed stream may end early too: it is resumed again from the newest
// event id, until the response comes.
TEST(HttpTransport, ResumedStreamThatEndsEarlyIsResumedAgain) {
  std::mutex mu;
  std::vector<std::string> last_event_ids;
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("id: a\nretry: 100\ndata: \n\n", "text/event-stream");
  });
  ls.svr().Get("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    std::size_t n;
    {
      std::lock_guard<std::mutex> lock(mu);
      last_event_ids.push_back(req.get_header_value("Last-Event-ID"));
      n = last_event_ids.size();
    }
    if (n < 3) res.set_content("id: g" + std::to_string(n) + "\ndata: \n\n", "text/event-stream");
    else res.set_content("data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n\n", "text/event-stream");
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  t.send(R"({"jsonrpc":"2.0","id":"x","method":"tools/call","params":{}})");
  auto m = r.message_with("\"id\":\"x\"", 20s);
  ASSERT_TRUE(m);
  EXPECT_FALSE(contains(*m, "error")) << *m;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(last_event_ids, (std::vector<std::string>{"a", "g1", "g2"}));
}

TEST(HttpTransport, NotificationsReachTheServerInOrder) {
  // A notification is issued only after the previous one was answered, so
  // the server sees them in order even though the pool has 4 workers.
  // Declared before the server, so they outlive its handler threads.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> bodies;
  local_server ls;
  ls.svr().Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      bodies.push_back(req.body);
    }
    cv.notify_all();
    res.status = 202;
  });
  http_client pool;
  recorder r;
  http_transport t(ls.url("/mcp"), {}, r.events(), pool);
  std::vector<std::string> sent;
  for (int i = 0; i < 30; ++i) {
    sent.push_back(R"({"jsonrpc":"2.0","method":"notifications/n","params":{"i":)" +
                   std::to_string(i) + "}}");
    t.send(sent.back());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return bodies.size() == sent.size(); }));
    EXPECT_EQ(bodies, sent);
  }
  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  EXPECT_EQ(r.message_count(), 0u);
  EXPECT_TRUE(r.error_list().empty());
}

// ---------------------------------------------------------------------------
// Against the reference server-everything (npm), when installed
// ---------------------------------------------------------------------------

TEST(HttpTransportPeer, ServerEverythingStreamableHttp) {
  namespace fs = std::filesystem;
  const fs::path peer = fs::path(MCPRT_PEERS_DIR) / ".bin/mcp-server-everything";
  if (!fs::exists(peer)) GTEST_SKIP() << "server-everything is not installed at " << peer;
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";

  int port = free_port();
  server_process proc(spawn_options{
      "node", {fs::canonical(peer).string(), "streamableHttp"}, {{"PORT", std::to_string(port)}}, {}});
  ASSERT_TRUE(proc.err().wait_line("listening on port", 30s)) << "server-everything did not start";

  http_client pool;
  recorder r;
  auto url = "http://127.0.0.1:" + std::to_string(port) + "/mcp";
  http_transport t(url, {}, r.events(), pool);
  auto reply = initialize(t, r);
  ASSERT_FALSE(reply.empty()) << (r.error_list().empty() ? "" : r.error_list()[0]);
  EXPECT_TRUE(contains(reply, "serverInfo")) << reply;
  ASSERT_TRUE(t.session_id());

  t.send(request(2, "tools/list"));
  auto tools = r.message_with(id_tag(2));
  ASSERT_TRUE(tools);
  std::size_t count = 0;
  for (auto pos = tools->find("\"inputSchema\""); pos != std::string::npos;
       pos = tools->find("\"inputSchema\"", pos + 1))
    ++count;
  EXPECT_GT(count, 5u) << *tools;

  t.send(request(3, "tools/call", R"({"name":"echo","arguments":{"message":"hello-peer"}})"));
  auto echo = r.message_with(id_tag(3));
  ASSERT_TRUE(echo);
  EXPECT_TRUE(contains(*echo, "hello-peer")) << *echo;

  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  EXPECT_TRUE(r.error_list().empty()) << r.error_list()[0];
}

// -- OAuth: the transport's http_auth against our test server's
// --oauth mode, which is its own authorization server and redirects at once,
// so curl following redirects plays the browser.

namespace {

struct oauth_fixture {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("mcprt-oauth-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
  std::filesystem::path log = dir / "oauth.log";
  std::filesystem::path revoke = dir / "revoke";
  std::shared_ptr<memory_credential_store> store = std::make_shared<memory_credential_store>();

  oauth_fixture() { std::filesystem::create_directories(dir); }
  ~oauth_fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  static std::atomic<int>& counter() {
    static std::atomic<int> n{0};
    return n;
  }
  std::vector<std::string> server_flags(std::vector<std::string> extra = {}) const {
    std::vector<std::string> f{"--oauth", "--oauth-log", log.string(), "--oauth-revoke-file", revoke.string()};
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  }
  std::shared_ptr<oauth_client> client(const std::string& url, bool interactive) const {
    oauth_interaction how;
    how.interactive = interactive;
    how.browser_command = "curl -fsS -o /dev/null -L";
    how.callback_timeout = std::chrono::seconds(20);
    return std::make_shared<oauth_client>(url, oauth_settings{}, how, store);
  }
  std::string log_text() const {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  int logged(const std::string& what) const {
    std::ifstream in(log);
    int n = 0;
    for (std::string line; std::getline(in, line);)
      n += line.rfind(what, 0) == 0;
    return n;
  }
};

// The recorder's events, with auth_required reported as an error "AUTH: ...".
http_events with_auth(recorder& r) {
  http_events ev = r.events();
  ev.on_auth_required = [&r](std::string why) { r.add([&] { r.errors.push_back("AUTH: " + why); }); };
  return ev;
}

http_transport_options auth_options(std::shared_ptr<http_auth> auth) {
  http_transport_options o;
  o.auth = std::move(auth);
  return o;
}

} // namespace

TEST(HttpTransportOAuth, AQuietClientReportsThatAPersonMustAuthorize) {
  oauth_fixture f;
  test_server srv(f.server_flags());
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, with_auth(r), pool, auth_options(f.client(srv.url, false)));
  t.send(k_init);
  ASSERT_TRUE(r.wait([&] { return !r.errors.empty(); }));
  auto errors = r.error_list();
  EXPECT_EQ(errors[0].rfind("AUTH: ", 0), 0u) << errors[0];
  EXPECT_TRUE(contains(errors[0], "401")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "mcprt auth")) << errors[0];
  EXPECT_EQ(r.message_count(), 0u);
  EXPECT_EQ(f.logged("authorize"), 0);
}

TEST(HttpTransportOAuth, AnInteractiveClientAuthorizesAndTheRequestGoesThrough) {
  oauth_fixture f;
  test_server srv(f.server_flags());
  http_client pool;
  recorder r;
  http_transport t(srv.url, {}, with_auth(r), pool, auth_options(f.client(srv.url, true)));
  auto reply = initialize(t, r);
  ASSERT_FALSE(reply.empty()) << (r.error_list().empty() ? "" : r.error_list()[0]);
  EXPECT_TRUE(contains(reply, "protocolVersion"));
  EXPECT_EQ(f.logged("register"), 1);
  EXPECT_EQ(f.logged("authorize"), 1);
  auto saved = f.store->load(srv.url, "dynamic");
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->access_token.rfind("mcprt-test-at-", 0), 0u);
  EXPECT_FALSE(saved->refresh_token.empty());

  // A second connection uses the stored token: no authorization at all.
  recorder r2;
  http_transport t2(srv.url, {}, with_auth(r2), pool, auth_options(f.client(srv.url, false)));
  ASSERT_FALSE(initialize(t2, r2).empty()) << (r2.error_list().empty() ? "" : r2.error_list()[0]);
  EXPECT_EQ(f.logged("authorize"), 1);
  EXPECT_TRUE(r2.error_list().empty());
}

TEST(HttpTransportOAuth, AnExpiringTokenIsRefreshedAndARevokedOneEndsInAuthRequired) {
  oauth_fixture f;
  // Tokens live 1 s: every token is "about to expire" and refreshed first.
  test_server srv(f.server_flags({"--oauth-token-ttl-s", "1"}));
  http_client pool;
  // tools/list goes out only once notifications/initialized was accepted,
  // so its answer means every refresh of this connection is done.
  auto settle = [](http_transport& t, recorder& r) {
    t.send(request(2, "tools/list"));
    return r.message_with(id_tag(2)).has_value();
  };
  {
    recorder r;
    http_transport t(srv.url, {}, with_auth(r), pool, auth_options(f.client(srv.url, true)));
    ASSERT_FALSE(initialize(t, r).empty());
    ASSERT_TRUE(settle(t, r));
  }
  auto before = f.store->load(srv.url, "dynamic");
  ASSERT_TRUE(before);
  {
    recorder r;
    http_transport t(srv.url, {}, with_auth(r), pool, auth_options(f.client(srv.url, false)));
    ASSERT_FALSE(initialize(t, r).empty()) << (r.error_list().empty() ? "" : r.error_list()[0]) << "\n" << f.log_text();
    ASSERT_TRUE(settle(t, r)) << f.log_text();
  }
  EXPECT_GE(f.logged("token refresh_token"), 1);
  auto after = f.store->load(srv.url, "dynamic");
  ASSERT_TRUE(after);
  EXPECT_NE(after->refresh_token, before->refresh_token) << "the server rotates refresh tokens";

  std::ofstream(f.revoke.string()).put('x');
  recorder r;
  http_transport t(srv.url, {}, with_auth(r), pool, auth_options(f.client(srv.url, false)));
  t.send(k_init);
  ASSERT_TRUE(r.wait([&] { return !r.errors.empty(); }));
  EXPECT_EQ(r.error_list()[0].rfind("AUTH: ", 0), 0u) << r.error_list()[0];
  EXPECT_TRUE(contains(r.error_list()[0], "refresh")) << r.error_list()[0];
  auto dropped = f.store->load(srv.url, "dynamic");
  ASSERT_TRUE(dropped);
  EXPECT_TRUE(dropped->access_token.empty());
  EXPECT_TRUE(dropped->refresh_token.empty());
  EXPECT_FALSE(dropped->client_id.empty()) << "the registration is kept";
}

TEST(HttpTransportOAuth, AConfiguredAuthorizationHeaderKeepsOAuthOut) {
  oauth_fixture f;
  test_server srv(f.server_flags());
  http_client pool;
  recorder r;
  http_transport t(srv.url, {{"Authorization", "Bearer not-issued"}}, with_auth(r), pool,
                   auth_options(f.client(srv.url, true)));
  t.send(k_init);
  ASSERT_TRUE(r.wait([&] { return !r.errors.empty(); }));
  EXPECT_EQ(r.error_list()[0].rfind("AUTH: ", 0), std::string::npos) << r.error_list()[0];
  EXPECT_EQ(f.logged("authorize"), 0);
}
