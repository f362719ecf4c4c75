// The HTTP client against real servers on loopback: an in-process httplib
// server, a forward proxy (tests/server/forward-proxy.mjs, Node) for plain
// requests and CONNECT tunnels, and nghttpx (Debian's nghttp2-proxy) as an
// HTTP/2 TLS front of the in-process server.

#include "io/http_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "tests/io/transport_test_support.hpp"

namespace mcprt::io {
namespace {

using namespace std::chrono_literals;
using test::local_server;
namespace fs = std::filesystem;

// A helper program whose stdout lines the test reads; killed (with its
// process group) when the test ends.
class helper_process {
public:
  explicit helper_process(const std::vector<std::string>& argv) {
    int out[2], in[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], 1);
      ::dup2(in[0], 0);
      std::vector<char*> args;
      for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(in[0]);
    stdin_ = in[1];
    reader_ = std::thread([this, fd = out[0]] {
      std::string buf;
      char chunk[4096];
      for (;;) {
        auto n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0) break;
        buf.append(chunk, static_cast<std::size_t>(n));
        for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(buf.substr(0, nl));
          buf.erase(0, nl + 1);
          cv_.notify_all();
        }
      }
      ::close(fd);
    });
  }
  ~helper_process() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdin_ >= 0) ::close(stdin_);
    if (reader_.joinable()) reader_.join();
  }
  // The first line starting with `prefix`, waiting up to `timeout`.
  std::optional<std::string> line_with(const std::string& prefix, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<std::string> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& l : lines_)
        if (l.rfind(prefix, 0) == 0) {
          found = l;
          return true;
        }
      return false;
    });
    return found;
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

bool have_program(const char* name) {
  return std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0;
}

int unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

bool port_accepts(int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return true;
    // A helper that is starting: poll its port again shortly.
    ::poll(nullptr, 0, 20);
  }
  return false;
}

// Sets an environment variable for one test and restores it after.
class scoped_env {
public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

private:
  const char* name_;
  std::optional<std::string> old_;
};

// Every environment proxy unset for the test's duration (CI machines may
// have some).
struct no_env_proxies {
  std::vector<std::unique_ptr<scoped_env>> vars;
  no_env_proxies() {
    for (const char* n : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                          "no_proxy", "NO_PROXY"}) {
      vars.push_back(std::make_unique<scoped_env>(n, ""));
    }
  }
};

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
  http_client client;
  std::vector<std::unique_ptr<exchange>> slow_ones;
  for (int i = 0; i < 64; ++i) {
    slow_ones.push_back(std::make_unique<exchange>());
    client.start(get(ls.url("/slow")), slow_ones.back()->handlers());
  }
  // (httplib listens with a backlog of 5: some of the 64 connect after a
  // SYN retransmission, a second later.)
  ASSERT_TRUE(slow.wait_waiting(64)) << "all 64 reached the server at once; " << slow.waiting << " did";
  exchange quick;
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
  std::promise<void> started;
  client.post([&] { started.set_value(); });
  started.get_future().wait();
  id = client.start(get(ls.url("/held")), h);
  ASSERT_TRUE(ex.wait_body("first"));
  EXPECT_TRUE(client.wait_idle(5s)) << "the cancelled request is gone";
  // Anything the loop had queued for it has run by now.
  client.run_sync([] {});
  EXPECT_FALSE(ex.outcome.has_value()) << "no on_done after a cancel";
  hold.release();
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
  std::unique_ptr<helper_process> start_proxy(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{"node", std::string(MCPRT_SOURCE_DIR) + "/tests/server/forward-proxy.mjs"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<helper_process>(argv);
    auto line = p->line_with("listening ");
    if (!line) return nullptr;
    proxy_port = std::stoi(line->substr(10));
    return p;
  }
  int proxy_port = 0;
};

TEST_F(proxied, PlainHttpGoesThroughTheEnvironmentsProxyAndNoProxyExemptsAHost) {
  no_env_proxies clean;
  local_server ls([](httplib::Server& s) {
    s.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("via", "text/plain"); });
  });
  auto proxy = start_proxy();
  ASSERT_TRUE(proxy);
  // mcp.test resolves nowhere but in the proxy: an answer proves the way.
  const auto url = "http://mcp.test:" + std::to_string(ls.port()) + "/hello";
  {
    scoped_env env("HTTP_PROXY", "http://127.0.0.1:" + std::to_string(proxy_port));
    http_client client;
    auto r = client.fetch(get(url));
    ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
    EXPECT_EQ(r.body, "via");
    EXPECT_TRUE(proxy->line_with("GET " + url, 2s));
  }
  {
    scoped_env env("HTTP_PROXY", "http://127.0.0.1:" + std::to_string(proxy_port));
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
  auto proxy = start_proxy({"--auth", "me:s3cret"});
  ASSERT_TRUE(proxy);
  http_client client;
  auto req = get("http://mcp.test:" + std::to_string(ls.port()) + "/hello");
  req.proxy = "http://me:s3cret@127.0.0.1:" + std::to_string(proxy_port);
  auto r = client.fetch(req);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
  EXPECT_EQ(r.body, "auth");
  req.proxy = "http://me:wrong@127.0.0.1:" + std::to_string(proxy_port);
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
    if (!have_program("nghttpx") && !fs::exists("/usr/sbin/nghttpx"))
      GTEST_SKIP() << "nghttpx is not installed (scripts/setup.sh installs nghttp2-proxy)";
    dir = fs::temp_directory_path() / ("mcprt-h2-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto d = dir.string();
    // A CA of our own and a certificate for mcp.test and 127.0.0.1 it signs.
    auto cmd = "cd '" + d + "' && "
               "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem "
               "-days 2 -subj /CN=test-ca 2>/dev/null && "
               "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr "
               "-subj /CN=mcp.test 2>/dev/null && "
               "printf 'subjectAltName=DNS:mcp.test,IP:127.0.0.1\\n' > ext && "
               "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 "
               "-extfile ext 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    backend = std::make_unique<local_server>([this](httplib::Server& s) {
      s.new_task_queue = [] { return new httplib::ThreadPool(16); };
      s.Get("/held", [this](const httplib::Request&, httplib::Response& res) {
        held.pass();
        res.set_content("held", "text/plain");
      });
      s.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("h2", "text/plain"); });
    });
    port = unused_port();
    const std::string exe = have_program("nghttpx") ? "nghttpx" : "/usr/sbin/nghttpx";
    front = std::make_unique<helper_process>(std::vector<std::string>{
      exe, "--frontend=127.0.0.1," + std::to_string(port), "--backend=127.0.0.1," + std::to_string(backend->port()),
      "--workers=1", "--conf=/dev/null", "--no-ocsp", "--log-level=ERROR", "--errorlog-file=/dev/stderr",
      d + "/srv.key", d + "/srv.pem"});
    ASSERT_TRUE(port_accepts(port, 10s)) << "nghttpx did not start";
  }
  void TearDown() override {
    held.release();
    front.reset();
    backend.reset();
    if (!dir.empty()) fs::remove_all(dir);
  }
  std::string ca() const { return (dir / "ca.pem").string(); }

  fs::path dir;
  gate held;
  std::unique_ptr<local_server> backend;
  std::unique_ptr<helper_process> front;
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
  auto proxy = start_proxy();
  ASSERT_TRUE(proxy);
  scoped_env env("HTTPS_PROXY", "http://127.0.0.1:" + std::to_string(proxy_port));
  http_client client;
  auto req = get("https://mcp.test:" + std::to_string(port) + "/hello");
  req.ca_file = ca();
  auto r = client.fetch(req);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.reason;
  EXPECT_EQ(r.body, "h2");
  EXPECT_EQ(r.head.http_version, 2) << "HTTP/2 inside the tunnel";
  EXPECT_TRUE(proxy->line_with("CONNECT mcp.test:" + std::to_string(port), 2s));
}

} // namespace
} // namespace mcprt::io
