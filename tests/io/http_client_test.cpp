// The HTTP client against real servers on loopback: an in-process httplib
// server, a forward proxy (tests/server/forward-proxy.mjs, Node) for plain
// requests and CONNECT tunnels, and nghttpx (Debian's nghttp2-proxy) as an
// HTTP/2 TLS front of the in-process server.

#include "io/http_client.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/io/transport_test_support.hpp"
#include "tests/support/remote_fronts.hpp"

namespace mcprt::io {
namespace {

using namespace std::chrono_literals;
using test::local_server;

using mcprt::test::forward_proxy;
using mcprt::test::h2_front;
using mcprt::test::have_program;
using mcprt::test::no_env_proxies;
using mcprt::test::scoped_env;
using mcprt::test::unused_port;

// What one request reported, in order.
struct exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order; // "sent", "head", "data", "done"
  http_response_head head;
  std::string body;
  std::optional<http_outcome> outcome;
  int done_count = 0;

  http_handlers handlers() {
    http_handlers h;
    h.on_body_sent = [this] { note("sent"); };
    h.on_head = [this](const http_response_head& hd) {
      note("head", [&] { head = hd; });
      return true;
    };
    h.on_data = [this](std::string_view b) {
      note("data", [&] { body.append(b); });
      return true;
    };
    h.on_done = [this](const http_outcome& o) {
      note("done", [&] {
        outcome = o;
        ++done_count;
      });
    };
    return h;
  }
  void note(const char* what, const std::function<void()>& f = {}) {
    std::lock_guard<std::mutex> lock(mu);
    if (order.empty() || order.back() != what) order.push_back(what);
    if (f) f();
    cv.notify_all();
  }
  bool wait_done(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return outcome.has_value(); });
  }
  bool wait_body(const std::string& text, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return body.find(text) != std::string::npos; });
  }
};

http_request get(const std::string& url) {
  http_request r;
  r.url = url;
  return r;
}

// A gate the server's handlers wait at until the test opens it.
struct gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void pass() {
    std::unique_lock<std::mutex> lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait_for(lock, 30s, [&] { return open; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  bool wait_waiting(int n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return waiting >= n; });
  }
};

TEST(HttpClient, AGetDeliversItsHeadThenItsBodyThenEndsOnce) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("X-Answer", "42");
      res.set_content("hello there", "text/plain; charset=utf-8");
    });
  });
  http_client client;
  EXPECT_EQ(client.thread_count(), 0u) << "no thread before the first request";
  exchange ex;
  client.start(get(ls.url("/hello")), ex.handlers());
  ASSERT_TRUE(ex.wait_done());
  EXPECT_TRUE(ex.outcome->ok()) << ex.outcome->reason;
  EXPECT_EQ(ex.head.status, 200);
  EXPECT_EQ(ex.head.header("x-answer"), "42");
  EXPECT_EQ(ex.head.media_type(), "text/plain");
  EXPECT_EQ(ex.head.http_version, 1);
  EXPECT_EQ(ex.body, "hello there");
  EXPECT_EQ(ex.order, (std::vector<std::string>{"sent", "head", "data", "done"}));
  EXPECT_EQ(client.thread_count(), 1u);
  EXPECT_TRUE(client.wait_idle(5s));
  EXPECT_EQ(ex.done_count, 1);
}

TEST(HttpClient, APostBodyIsSentWholeBeforeItsAnswerArrives) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, req.get_header_value("Content-Type"));
      res.set_header("X-Length", req.get_header_value("Content-Length"));
    });
  });
  http_client client;
  std::string big(1 << 20, 'x');
  big.back() = 'y';
  http_request req;
  req.method = "POST";
  req.url = ls.url("/echo");
  req.headers = {{"Content-Type", "application/json"}};
  req.body = big;
  exchange ex;
  client.start(req, ex.handlers());
  ASSERT_TRUE(ex.wait_done());
  ASSERT_TRUE(ex.outcome->ok()) << ex.outcome->reason;
  EXPECT_EQ(ex.head.header("X-Length"), std::to_string(big.size())) << "sent with a Content-Length, not chunked";
  EXPECT_EQ(ex.body.size(), big.size());
  EXPECT_EQ(ex.body.back(), 'y');
  ASSERT_FALSE(ex.order.empty());
  EXPECT_EQ(ex.order.front(), "sent");
}

TEST(HttpClient, AStreamedResponseArrivesPieceByPieceWhileTheServerStillWrites) {
  no_env_proxies clean;
  gate second;
  local_server ls([&](httplib::Server& s) {
    s.Get("/stream", [&](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [&](std::size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          sink.write("data: one\n\n", 11);
          return true;
        }
        second.pass();
        sink.write("data: two\n\n", 11);
        sink.done();
        return true;
      });
    });
  });
  http_client client;
  exchange ex;
  client.start(get(ls.url("/stream")), ex.handlers());
  ASSERT_TRUE(ex.wait_body("data: one")) << "the first event comes before the server wrote the second";
  EXPECT_FALSE(ex.outcome.has_value());
  second.release();
  ASSERT_TRUE(ex.wait_done());
  EXPECT_TRUE(ex.outcome->ok()) << ex.outcome->reason;
  EXPECT_EQ(ex.body, "data: one\n\ndata: two\n\n");
}

TEST(HttpClient, OneThreadAnswersAQuickRequestWhileSixtyFourSlowOnesWait) {
  no_env_proxies clean;
  gate slow;
  local_server ls([&](httplib::Server& s) {
    s.new_task_queue = [] { return new httplib::ThreadPool(80); };
    s.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
      slow.pass();
      res.set_content("slow", "text/plain");
    });
    s.Get("/quick", [](const httplib::Request&, httplib::Response& res) { res.set_content("quick", "text/plain"); });
  });
  // Declared before the client, so the client (and its handlers) go first.
  std::vector<std::unique_ptr<exchange>> slow_ones;
  exchange quick;
  http_client client;
  for (int i = 0; i < 64; ++i) {
    slow_ones.push_back(std::make_unique<exchange>());
    client.start(get(ls.url("/slow")), slow_ones.back()->handlers());
  }
  ASSERT_TRUE(slow.wait_waiting(64, 30s)) << "all 64 reached the server at once; " << slow.waiting << " did";
  client.start(get(ls.url("/quick")), quick.handlers());
  ASSERT_TRUE(quick.wait_done(5s));
  EXPECT_TRUE(quick.outcome->ok());
  EXPECT_EQ(quick.body, "quick");
  EXPECT_EQ(client.active_requests(), 64u);
  EXPECT_EQ(client.thread_count(), 1u);
  slow.release();
  for (auto& e : slow_ones) {
    ASSERT_TRUE(e->wait_done());
    EXPECT_EQ(e->body, "slow");
  }
}

TEST(HttpClient, ASilentServerEndsTheRequestAfterTheIdleTimeout) {
  no_env_proxies clean;
  gate never;
  local_server ls([&](httplib::Server& s) {
    s.Get("/silent", [&](const httplib::Request&, httplib::Response& res) {
      never.pass();
      res.set_content("late", "text/plain");
    });
  });
  http_client client;
  auto req = get(ls.url("/silent"));
  req.idle_timeout = 300ms;
  exchange ex;
  auto t0 = std::chrono::steady_clock::now();
  client.start(req, ex.handlers());
  ASSERT_TRUE(ex.wait_done());
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(ex.outcome->failure, http_failure::idle_timeout);
  EXPECT_NE(ex.outcome->reason.find("timed out"), std::string::npos) << ex.outcome->reason;
  EXPECT_NE(ex.outcome->reason.find("300 ms"), std::string::npos) << ex.outcome->reason;
  EXPECT_GE(took, 300ms);
  never.release();
}

TEST(HttpClient, ACancelledRequestReportsNothingMoreAndIsGone) {
  no_env_proxies clean;
  gate hold;
  local_server ls([&](httplib::Server& s) {
    s.Get("/held", [&](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [&](std::size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          sink.write("first", 5);
          return true;
        }
        hold.pass();
        sink.done();
        return true;
      });
    });
  });
  http_client client;
  // Cancelled from its own data handler, on the loop thread.
  exchange ex;
  http_client::request_id id = 0;
  auto h = ex.handlers();
  auto inner = h.on_data;
  h.on_data = [&, inner](std::string_view b) {
    inner(b);
    client.cancel(id);
    return true;
  };
  // Started on the loop thread, so the id is set before any handler of
  // the request can run there (from the test thread the first bytes could
  // come before start() returned, and the handler would cancel id 0).
  client.run_sync([&] { id = client.start(get(ls.url("/held")), h); });
  ASSERT_TRUE(ex.wait_body("first"));
  EXPECT_TRUE(client.wait_idle(5s)) << "the cancelled request is gone";
  // Anything the loop had queued for it has run by now.
  client.run_sync([] {});
  EXPECT_FALSE(ex.outcome.has_value()) << "no on_done after a cancel";
  hold.release();
}

TEST(HttpClient, DestroyingTheClientEndsAWaitingFetchAndRunsNoOtherHandler) {
  no_env_proxies clean;
  gate never;
  local_server ls([&](httplib::Server& s) {
    s.Get("/silent", [&](const httplib::Request&, httplib::Response& res) {
      never.pass();
      res.set_content("late", "text/plain");
    });
  });
  exchange ex;
  std::optional<http_client::response> fetched;
  std::thread fetcher;
  {
    http_client client;
    client.start(get(ls.url("/silent")), ex.handlers());
    fetcher = std::thread([&] { fetched = client.fetch(get(ls.url("/silent"))); });
    // Both at the server: the fetch is waiting for its answer.
    EXPECT_TRUE(never.wait_waiting(2));
  }
  fetcher.join();
  ASSERT_TRUE(fetched);
  EXPECT_EQ(fetched->outcome.failure, http_failure::aborted);
  EXPECT_FALSE(ex.outcome.has_value()) << "a handler ran after the client's destruction began";
  never.release();
}

TEST(HttpClient, ARefusedConnectionAndAnUntrustedCertificateAreNamed) {
  no_env_proxies clean;
  http_client client;
  exchange refused;
  client.start(get("http://127.0.0.1:" + std::to_string(unused_port()) + "/"), refused.handlers());
  ASSERT_TRUE(refused.wait_done());
  EXPECT_EQ(refused.outcome->failure, http_failure::connect);
  EXPECT_NE(refused.outcome->reason.find("cannot connect"), std::string::npos);
  EXPECT_FALSE(refused.outcome->got_head);

  exchange bad_url;
  client.start(get("ftp://example.com/"), bad_url.handlers());
  ASSERT_TRUE(bad_url.wait_done());
  EXPECT_EQ(bad_url.outcome->failure, http_failure::other);
}

TEST(HttpClient, ARedirectIsHandedBackNotFollowed) {
  no_env_proxies clean;
  std::atomic<int> elsewhere{0};
  local_server ls([&](httplib::Server& s) {
    s.Get("/moved", [](const httplib::Request&, httplib::Response& res) {
      res.status = 302;
      res.set_header("Location", "/elsewhere");
    });
    s.Get("/elsewhere", [&](const httplib::Request&, httplib::Response& res) {
      ++elsewhere;
      res.set_content("x", "text/plain");
    });
  });
  http_client client;
  exchange ex;
  client.start(get(ls.url("/moved")), ex.handlers());
  ASSERT_TRUE(ex.wait_done());
  EXPECT_TRUE(ex.outcome->ok());
  EXPECT_EQ(ex.head.status, 302);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(HttpClient, SequentialRequestsReuseOneKeptAliveConnection) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/n", [](const httplib::Request&, httplib::Response& res) { res.set_content("n", "text/plain"); });
  });
  http_client client;
  for (int i = 0; i < 5; ++i) {
    auto r = client.fetch(get(ls.url("/n")));
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
    EXPECT_EQ(r.body, "n");
  }
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, FetchCutsABodyAtItsBound) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(100000, 'b'), "text/plain");
    });
  });
  http_client client;
  auto r = client.fetch(get(ls.url("/big")), 1000);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.body.size(), 1000u);
  EXPECT_EQ(r.head.status, 200);
}

// ---------------------------------------------------------------------------
// Through a forward proxy
// ---------------------------------------------------------------------------

class proxied : public ::testing::Test {
protected:
  void SetUp() override {
    if (!have_program("node")) GTEST_SKIP() << "node is not installed (scripts/setup.sh installs it)";
  }
};

TEST_F(proxied, PlainHttpGoesThroughTheEnvironmentsProxyAndNoProxyExemptsAHost) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("via", "text/plain"); });
  });
  forward_proxy proxy(MCPRT_SOURCE_DIR);
  ASSERT_TRUE(proxy.ok());
  // mcp.test resolves nowhere but in the proxy: an answer proves the way.
  const auto url = "http://mcp.test:" + std::to_string(ls.port()) + "/hello";
  {
    scoped_env env("HTTP_PROXY", proxy.url());
    http_client client;
    auto r = client.fetch(get(url));
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
    EXPECT_EQ(r.body, "via");
    EXPECT_TRUE(proxy.forwarded("GET " + url));
  }
  {
    scoped_env env("HTTP_PROXY", proxy.url());
    scoped_env no("NO_PROXY", "example.org,.test");
    http_client client;
    auto r = client.fetch(get(url));
    EXPECT_EQ(r.outcome.failure, http_failure::resolve) << "NO_PROXY sends it direct, where mcp.test is unknown";
  }
}

TEST_F(proxied, AServersOwnProxyWithCredentialsIsUsedAndARefusalIsNamed) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("auth", "text/plain"); });
  });
  forward_proxy proxy(MCPRT_SOURCE_DIR, "me:s3cret");
  ASSERT_TRUE(proxy.ok());
  http_client client;
  auto req = get("http://mcp.test:" + std::to_string(ls.port()) + "/hello");
  req.proxy = proxy.url("me:s3cret");
  auto r = client.fetch(req);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
  EXPECT_EQ(r.body, "auth");
  req.proxy = proxy.url("me:wrong");
  auto refused = client.fetch(req);
  EXPECT_EQ(refused.head.status, 407) << "a plain-HTTP proxy answers for the server";
}

// ---------------------------------------------------------------------------
// nghttpx: TLS with our own CA, HTTP/2, CONNECT
// ---------------------------------------------------------------------------

class behind_nghttpx : public proxied {
protected:
  void SetUp() override {
    proxied::SetUp();
    if (IsSkipped()) return;
    backend = std::make_unique<local_server>([this](httplib::Server& s) {
      s.new_task_queue = [] { return new httplib::ThreadPool(16); };
      s.Get("/held", [this](const httplib::Request&, httplib::Response& res) {
        held.pass();
        res.set_content("held", "text/plain");
      });
      s.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("h2", "text/plain"); });
    });
    front = std::make_unique<h2_front>(backend->port());
    if (!front->why_not().empty()) GTEST_SKIP() << front->why_not();
    port = front->port();
  }
  void TearDown() override {
    held.release();
    front.reset();
    backend.reset();
  }
  std::string ca() const { return front->ca_file(); }

  gate held;
  std::unique_ptr<local_server> backend;
  std::unique_ptr<h2_front> front;
  int port = 0;
};

TEST_F(behind_nghttpx, AServerOfferingHttp2GetsConcurrentRequestsMultiplexedOnOneConnection) {
  no_env_proxies clean;
  http_client client;
  const auto url = "https://127.0.0.1:" + std::to_string(port) + "/held";
  std::vector<std::unique_ptr<exchange>> calls;
  for (int i = 0; i < 8; ++i) {
    calls.push_back(std::make_unique<exchange>());
    auto req = get(url);
    req.ca_file = ca();
    client.start(req, calls.back()->handlers());
  }
  ASSERT_TRUE(held.wait_waiting(8)) << "all eight are at the server at once";
  held.release();
  for (auto& c : calls) {
    ASSERT_TRUE(c->wait_done());
    ASSERT_TRUE(c->outcome->ok()) << c->outcome->reason;
    EXPECT_EQ(c->head.http_version, 2);
    EXPECT_EQ(c->body, "held");
  }
  EXPECT_EQ(client.connections_opened(), 1u) << "eight streams, one connection";
}

TEST_F(behind_nghttpx, ACertificateFromAnUnknownCaIsRefusedUnlessItsCaFileIsGiven) {
  no_env_proxies clean;
  http_client client;
  auto req = get("https://127.0.0.1:" + std::to_string(port) + "/hello");
  auto refused = client.fetch(req);
  EXPECT_EQ(refused.outcome.failure, http_failure::tls);
  EXPECT_FALSE(refused.outcome.got_head);
  req.ca_file = ca();
  auto r = client.fetch(req);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
  EXPECT_EQ(r.body, "h2");
}

TEST_F(behind_nghttpx, HttpsGoesThroughTheEnvironmentsProxyInAConnectTunnel) {
  no_env_proxies clean;
  forward_proxy proxy(MCPRT_SOURCE_DIR);
  ASSERT_TRUE(proxy.ok());
  scoped_env env("HTTPS_PROXY", proxy.url());
  http_client client;
  auto req = get("https://mcp.test:" + std::to_string(port) + "/hello");
  req.ca_file = ca();
  auto r = client.fetch(req);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
  EXPECT_EQ(r.body, "h2");
  EXPECT_EQ(r.head.http_version, 2) << "HTTP/2 inside the tunnel";
  EXPECT_TRUE(proxy.forwarded("CONNECT mcp.test:" + std::to_string(port)));
}

} // namespace
} // namespace mcprt::io
