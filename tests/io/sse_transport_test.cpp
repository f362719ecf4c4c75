#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/sse_transport.hpp"
#include "transport_test_support.hpp"

using namespace mcprt::io;
using namespace std::chrono_literals;

namespace {

using test::contains;
using test::recorder;

// An in-process legacy HTTP+SSE server: GET /sse streams what the test
// pushes (the endpoint event first, unless told otherwise), POST /message
// records each body and its headers and, by default, answers a request on
// the stream with an empty result.
class legacy_server {
 public:
  explicit legacy_server(std::string endpoint = "/message?sessionId=SESSION-77") : endpoint_(std::move(endpoint)) {}

  ~legacy_server() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }

  std::string url(const std::string& path = "/sse") const { return srv_.url(path); }

  int port() const { return srv_.port(); }
  void push(std::string raw_sse) {
    std::lock_guard<std::mutex> lock(mu_);
    outgoing_.push_back(std::move(raw_sse));
    cv_.notify_all();
  }
  void end_stream() {
    std::lock_guard<std::mutex> lock(mu_);
    end_ = true;
    cv_.notify_all();
  }
  void set_post_status(int s) {
    std::lock_guard<std::mutex> lock(mu_);
    post_status_ = s;
  }
  std::vector<std::string> posts() {
    std::lock_guard<std::mutex> lock(mu_);
    return posts_;
  }
  std::vector<std::string> post_auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return post_auth_;
  }
  std::vector<std::string> post_query() {
    std::lock_guard<std::mutex> lock(mu_);
    return post_query_;
  }
  std::vector<std::string> get_auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return get_auth_;
  }
  httplib::Server& svr() { return srv_.svr(); }

 private:
  void routes(httplib::Server& svr) {
    svr.Get("/sse", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        get_auth_.push_back(req.get_header_value("Authorization"));
        if (!endpoint_.empty()) outgoing_.push_back("event: endpoint\ndata: " + endpoint_ + "\n\n");
      }
      res.set_chunked_content_provider("text/event-stream", [this](std::size_t, httplib::DataSink& sink) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, 50ms, [&] { return stopping_ || end_ || !outgoing_.empty(); });
        if (stopping_) return false;
        while (!outgoing_.empty()) {
          auto chunk = std::move(outgoing_.front());
          outgoing_.pop_front();
          if (!sink.write(chunk.data(), chunk.size())) return false;
        }
        if (end_) sink.done();
        return sink.is_writable();
      });
    });
    svr.Post("/message", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      posts_.push_back(req.body);
      post_auth_.push_back(req.get_header_value("Authorization"));
      post_query_.push_back(req.get_param_value("sessionId"));
      if (post_status_ != 202) {
        res.status = post_status_;
        res.set_content("no; you sent " + req.get_header_value("Authorization"), "text/plain");
        return;
      }
      auto id = req.body.find("\"id\":");
      if (id != std::string::npos) {
        auto end = req.body.find_first_of(",}", id);
        outgoing_.push_back("event: message\ndata: {\"jsonrpc\":\"2.0\"," + req.body.substr(id, end - id)
                            + ",\"result\":{}}\n\n");
      }
      cv_.notify_all();
      res.status = 202;
      res.set_content("Accepted", "text/plain");
    });
  }

  std::string endpoint_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> outgoing_;
  bool end_ = false;
  bool stopping_ = false;
  int post_status_ = 202;
  std::vector<std::string> posts_, post_auth_, post_query_, get_auth_;
  // Last: it stops (and its threads end) before the state above goes.
  test::local_server srv_{[this](httplib::Server& svr) { routes(svr); }};
};

std::string request_line(int id, const std::string& method) {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + method + R"(","params":{}})";
}

const std::map<std::string, std::string> k_auth = {{"Authorization", "Bearer SECRET-123"}};

} // namespace

TEST(SseTransport, PostsToTheEndpointInOrderAndReadsAnswersFromTheStream) {
  legacy_server ls;
  http_client pool;
  recorder r;
  {
    sse_transport t(ls.url(), k_auth, r.events(), pool);
    // Sent before the endpoint can be known: queued, then POSTed in order.
    t.send(request_line(1, "initialize"));
    t.send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    t.send(request_line(2, "tools/list"));
    ASSERT_TRUE(r.wait([&] { return r.messages.size() == 2; }));
    auto msgs = r.message_list();
    EXPECT_TRUE(contains(msgs[0], "\"id\":1")) << msgs[0];
    EXPECT_TRUE(contains(msgs[1], "\"id\":2")) << msgs[1];
    auto posts = ls.posts();
    ASSERT_EQ(posts.size(), 3u);
    EXPECT_TRUE(contains(posts[0], "initialize"));
    EXPECT_TRUE(contains(posts[1], "notifications/initialized"));
    EXPECT_TRUE(contains(posts[2], "tools/list"));
    for (auto& a : ls.post_auth())
      EXPECT_EQ(a, "Bearer SECRET-123");
    for (auto& q : ls.post_query())
      EXPECT_EQ(q, "SESSION-77");
    ASSERT_EQ(ls.get_auth().size(), 1u);
    EXPECT_EQ(ls.get_auth()[0], "Bearer SECRET-123");

    // Server-initiated messages come on the same stream.
    ls.push("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n");
    ASSERT_TRUE(r.wait([&] { return r.messages.size() == 3; }));
    EXPECT_TRUE(contains(r.message_list()[2], "list_changed"));

    t.close();
    ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  }
  EXPECT_TRUE(r.error_list().empty()) << r.error_list()[0];
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s)) << "close stops the stream";
}

TEST(SseTransport, AnEndpointOnAnotherOriginIsRefusedAndNothingIsPosted) {
  // Another port of the same host is another origin; a real server waits
  // there to catch a POST that should never come.
  legacy_server elsewhere;
  legacy_server ls(elsewhere.url("/message?sessionId=S"));
  http_client pool;
  recorder r;
  sse_transport t(ls.url(), k_auth, r.events(), pool);
  t.send(request_line(1, "initialize"));
  ASSERT_TRUE(r.wait_error());
  auto e = r.error_list()[0];
  EXPECT_TRUE(contains(e, "another origin")) << e;
  EXPECT_TRUE(contains(e, "GET " + ls.url())) << e;
  EXPECT_FALSE(contains(e, "SECRET")) << e;
  t.send(request_line(2, "tools/list"));
  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  EXPECT_TRUE(elsewhere.posts().empty());
  EXPECT_TRUE(ls.posts().empty());
  EXPECT_EQ(r.error_list().size(), 1u) << "one error, then silence";
}

TEST(SseTransport, AnOversizeEventIsAnError) {
  legacy_server ls;
  http_client pool;
  recorder r;
  sse_transport_options o;
  o.max_message_bytes = 1024;
  sse_transport t(ls.url(), {}, r.events(), pool, o);
  ls.push("event: message\ndata: {\"ok\":1}\n\n");
  ls.push("event: message\ndata: " + std::string(4096, 'x') + "\n\n");
  ASSERT_TRUE(r.wait_error());
  EXPECT_TRUE(contains(r.error_list()[0], "exceeds 1024 bytes")) << r.error_list()[0];
  auto msgs = r.message_list();
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0], "{\"ok\":1}");
}

TEST(SseTransport, AStreamThatEndsIsAnError) {
  legacy_server ls;
  http_client pool;
  recorder r;
  sse_transport t(ls.url(), {}, r.events(), pool);
  t.send(request_line(1, "initialize"));
  ASSERT_TRUE(r.wait([&] { return r.messages.size() == 1; }));
  ls.end_stream();
  ASSERT_TRUE(r.wait_error());
  EXPECT_TRUE(contains(r.error_list()[0], "ended the event stream")) << r.error_list()[0];
  // Further sends go nowhere; close still reports.
  t.send(request_line(2, "ping"));
  t.close();
  ASSERT_TRUE(r.wait([&] { return r.closed == 1; }));
  EXPECT_EQ(ls.posts().size(), 1u);
}

TEST(SseTransport, ASilentStreamIsAnErrorAfterTheIdleTimeout) {
  legacy_server ls;
  http_client pool;
  recorder r;
  sse_transport_options o;
  o.stream_idle_timeout = 300ms;
  sse_transport t(ls.url(), {}, r.events(), pool, o);
  ASSERT_TRUE(r.wait_error());
  EXPECT_TRUE(contains(r.error_list()[0], "silent for 300 ms")) << r.error_list()[0];
}

TEST(SseTransport, RefusalsAndFailedPostsNameTheUrlButNoSecret) {
  http_client pool;
  {
    // No stream at this path.
    legacy_server ls;
    recorder r;
    sse_transport t(ls.url("/nowhere?token=abc"), k_auth, r.events(), pool);
    ASSERT_TRUE(r.wait_error());
    auto e = r.error_list()[0];
    EXPECT_TRUE(contains(e, "GET " + ls.url("/nowhere"))) << e;
    EXPECT_TRUE(contains(e, "HTTP 404")) << e;
    EXPECT_FALSE(contains(e, "token=abc")) << e;
  }
  {
    // Nobody listening.
    int port;
    {
      legacy_server gone;
      port = gone.port();
    }
    recorder r;
    sse_transport t("http://127.0.0.1:" + std::to_string(port) + "/sse", k_auth, r.events(), pool);
    ASSERT_TRUE(r.wait_error());
    EXPECT_TRUE(contains(r.error_list()[0], "cannot connect")) << r.error_list()[0];
  }
  {
    // A POST refused, by a server that echoes our credentials back.
    legacy_server ls;
    ls.set_post_status(500);
    recorder r;
    sse_transport t(ls.url(), k_auth, r.events(), pool);
    t.send(request_line(1, "initialize"));
    ASSERT_TRUE(r.wait_error());
    auto e = r.error_list()[0];
    EXPECT_TRUE(contains(e, "POST " + ls.url("/message?…"))) << e;
    EXPECT_TRUE(contains(e, "HTTP 500")) << e;
    EXPECT_TRUE(contains(e, "no; you sent")) << e;
    EXPECT_FALSE(contains(e, "SECRET")) << e;
    EXPECT_FALSE(contains(e, "SESSION-77")) << e;
  }
  {
    recorder r;
    sse_transport t("ftp://x/sse", {}, r.events(), pool);
    ASSERT_TRUE(r.wait_error());
    EXPECT_TRUE(contains(r.error_list()[0], "invalid URL")) << r.error_list()[0];
  }
}

TEST(SseTransport, NotAnEventStreamIsAnError) {
  legacy_server ls;
  ls.svr().Get("/json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  http_client pool;
  recorder r;
  sse_transport t(ls.url("/json"), {}, r.events(), pool);
  ASSERT_TRUE(r.wait_error());
  EXPECT_TRUE(contains(r.error_list()[0], "not an event stream")) << r.error_list()[0];
}

TEST(SseTransport, DestroyingWithTheStreamOpenIsQuickAndSilent) {
  legacy_server ls;
  http_client pool;
  recorder r;
  auto started = std::chrono::steady_clock::now();
  {
    sse_transport t(ls.url(), {}, r.events(), pool);
    t.send(request_line(1, "initialize"));
    ASSERT_TRUE(r.wait([&] { return r.messages.size() == 1; }));
  }
  pool.run_sync([] {}); // what was posted before has started
  EXPECT_TRUE(pool.wait_idle(10s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  ls.push("event: message\ndata: {}\n\n");
  EXPECT_EQ(r.message_list().size(), 1u);
  EXPECT_TRUE(r.error_list().empty());
  EXPECT_EQ(r.closed, 0);
}
