// Black-box tests of `mcprt gateway`: MCP over stdio bridged to streamable
// HTTP. Against mcprt-test-server --http (a real MCP server), against a
// scripted endpoint in this process (to see the headers, the DELETE and
// the failures), and against the workspace daemon. Every wait is on a
// condition with a deadline.

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

// -- a gateway with its stdin and stdout as pipes ------------------------------------------

/// `mcprt gateway ARGS...`.
std::vector<std::string> gateway_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{MCPRT_BIN, "gateway"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

/// The gateway's stdio bridge alone, in front of `url` (the gateway itself
/// bridges only to a daemon it verified), sending the token in `token_file`.
std::vector<std::string> bridge_to(const std::string& url, const std::string& token_file = {}) {
  std::vector<std::string> argv{MCPRT_BRIDGE_BIN, url};
  if (!token_file.empty()) argv.push_back(token_file);
  return argv;
}

class gateway_proc {
public:
  /// `argv` run with HOME=`home`, in `cwd` when it is given.
  gateway_proc(std::vector<std::string> argv_s, const fs::path& home, const fs::path& cwd = {},
               const std::vector<std::string>& extra_env = {}) {
    auto env_s = environment_without([](const std::string& key) { return key == "HOME" || key.rfind("MCPRT_", 0) == 0; });
    env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
    env_s.push_back("HOME=" + home.string());
    exec_image image(std::move(argv_s), std::move(env_s));
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      image.exec();
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in_fd_ = in[1];
    out_fd_ = out[0];
    err_fd_ = err[0];
    err_reader_ = std::thread([this] {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(err_fd_, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0) continue;
        std::lock_guard<std::mutex> guard{mtx_};
        err_.append(buf, static_cast<size_t>(n));
      }
    });
  }

  ~gateway_proc() {
    close_stdin();
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
    if (err_reader_.joinable()) err_reader_.join();
    ::close(out_fd_);
    ::close(err_fd_);
  }

  bool send(const std::string& line) { return send_all_fd(line + "\n"); }
  bool send(const char* line) { return send(std::string(line)); }
  bool send(const json& msg) { return send(msg.dump()); }
  bool send_raw(const std::string& bytes) { return send_all_fd(bytes); }

  void close_stdin() {
    if (in_fd_ >= 0) ::close(in_fd_);
    in_fd_ = -1;
  }

  /// The next stdout line, or nullopt at EOF / deadline.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      auto nl = out_.find('\n');
      if (nl != std::string::npos) {
        auto l = out_.substr(0, nl);
        out_.erase(0, nl + 1);
        return l;
      }
      auto left = left_until(deadline).count();
      if (left <= 0) return std::nullopt;
      pollfd p{out_fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      out_.append(buf, static_cast<size_t>(n));
    }
  }

  /// The next stdout message that `pred` accepts; the others read on the
  /// way are kept in `skipped`. A null json at the deadline.
  json message(const std::function<bool(const json&)>& pred, std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      auto l = line(left_until(deadline));
      if (!l) break;
      auto j = json::parse(*l, nullptr, false);
      if (!j.is_discarded() && pred(j)) return j;
      skipped.push_back(*l);
    }
    return json(nullptr);
  }

  /// The response with this id.
  json response(const json& id, std::chrono::milliseconds timeout = 30s) {
    return message(
      [&](const json& j) { return j.is_object() && !j.contains("method") && j.value("id", json()) == id; },
      timeout);
  }

  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (exited_) return code_;
    if (!mcprt::test::wait_for_exit(pid_, timeout)) return std::nullopt;
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return std::nullopt;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (err_reader_.joinable()) err_reader_.join();
    return code_;
  }

  std::string err() {
    std::lock_guard<std::mutex> guard{mtx_};
    return err_;
  }
  pid_t pid() const { return pid_; }

  std::vector<std::string> skipped;

private:
  bool send_all_fd(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      auto n = ::write(in_fd_, bytes.data() + off, bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::string out_;
  std::mutex mtx_;
  std::string err_;
  std::thread err_reader_;
  bool exited_ = false;
  int code_ = -1;
};

json request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json initialize(int id, const std::string& version = "2025-06-18") {
  return request(id, "initialize",
                 {{"protocolVersion", version},
                  {"capabilities", {{"roots", {{"listChanged", true}}}}},
                  {"clientInfo", {{"name", "gateway-test"}, {"version", "1"}}}});
}

const json initialized = {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}};

std::string tool_text(const json& response) {
  if (!response.is_object() || !response.contains("result")) return "<no result: " + response.dump() + ">";
  std::string out;
  for (auto& c : response["result"].value("content", json::array()))
    if (c.value("type", "") == "text") out += c.value("text", "");
  return out;
}

// -- against mcprt-test-server --http ------------------------------------------------------

class GatewayTestServer : public cli_test {
protected:
  /// Starts the test server on a free port with `args`; its /mcp URL.
  std::string start_server(std::vector<std::string> args) {
    std::vector<std::string> all{"--http", "0"};
    all.insert(all.end(), args.begin(), args.end());
    server_ = std::make_unique<spawned>(all, home_, std::map<std::string, std::string>{}, test_server);
    auto first = server_->line(30s);
    if (!first || first->rfind("listening on ", 0) != 0) {
      ADD_FAILURE() << "the test server did not start: " << server_->err();
      return {};
    }
    return first->substr(std::string("listening on ").size());
  }

  /// A gateway on `url`, initialized (initialize answered, initialized sent).
  std::unique_ptr<gateway_proc> initialized_gateway(const std::string& url) {
    auto gw = std::make_unique<gateway_proc>(bridge_to(url), home_);
    gw->send(initialize(1));
    auto init = gw->response(1);
    EXPECT_TRUE(init.contains("result")) << init.dump() << "\n" << gw->err();
    EXPECT_EQ(init["result"].value("protocolVersion", ""), "2025-06-18") << init.dump();
    gw->send(initialized);
    return gw;
  }

  std::unique_ptr<spawned> server_;
};

TEST_F(GatewayTestServer, BridgesInitializeListAndCallThenExitsOnEof) {
  auto url = start_server({"--tools", "1"});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);

  gw->send(request(2, "tools/list"));
  auto list = gw->response(2);
  ASSERT_TRUE(list.contains("result")) << list.dump() << gw->err();
  std::set<std::string> names;
  for (auto& t : list["result"]["tools"])
    names.insert(t.value("name", ""));
  EXPECT_TRUE(names.count("echo")) << list.dump();
  EXPECT_TRUE(names.count("tool_1")) << list.dump();

  gw->send(request(3, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "through the gateway"}}}}));
  auto call = gw->response(3);
  EXPECT_NE(tool_text(call).find("through the gateway"), std::string::npos) << call.dump();

  gw->close_stdin();
  EXPECT_EQ(gw->wait_exit(15s), 0) << gw->err();
  EXPECT_TRUE(gw->skipped.empty()) << gw->skipped.front();
}

TEST_F(GatewayTestServer, LinesWrittenBeforeInitializeIsAnsweredWaitForItsSession) {
  auto url = start_server({});
  ASSERT_FALSE(url.empty());
  gateway_proc gw(bridge_to(url), home_);
  // All at once, as a script piping its lines would: the later ones need
  // the session id the initialize answer brings.
  gw.send_raw(initialize(1).dump() + "\n" + initialized.dump() + "\n" + request(2, "tools/list").dump() + "\n");
  EXPECT_TRUE(gw.response(1).contains("result")) << gw.err();
  auto list = gw.response(2);
  EXPECT_TRUE(list.contains("result")) << list.dump() << gw.err();
}

TEST_F(GatewayTestServer, SseAnswersAreForwardedOneLineEach) {
  auto url = start_server({"--tools", "1", "--sse-responses"});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);
  gw->send(request(2, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "line1\nline2"}}}}));
  auto call = gw->response(2);
  EXPECT_NE(tool_text(call).find("line1\nline2"), std::string::npos) << call.dump();
}

TEST_F(GatewayTestServer, BadLinesGetErrorsAndTheBridgeGoesOn) {
  auto url = start_server({});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);

  gw->send("this is not json");
  auto parse = gw->message([](const json& j) { return j.is_object() && j.contains("error"); });
  ASSERT_TRUE(parse.is_object()) << gw->err();
  EXPECT_EQ(parse["error"].value("code", 0), -32700) << parse.dump();
  EXPECT_TRUE(parse["id"].is_null()) << parse.dump();

  // A cut message whose id can be read is answered under that id.
  gw->send(R"({"jsonrpc":"2.0","id":41,"method":"tools/list","params":{)");
  auto cut = gw->response(41);
  EXPECT_EQ(cut["error"].value("code", 0), -32700) << cut.dump();

  // Longer than 4 MiB: refused under its id, the rest of the line skipped.
  std::string big =
    R"({"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":")"
    + std::string((4u << 20) + 1000, 'x') + "\"}}}";
  ASSERT_TRUE(gw->send(big));
  auto too_big = gw->response(42);
  EXPECT_EQ(too_big["error"].value("code", 0), -32600) << too_big.dump().substr(0, 300);

  gw->send(request(43, "ping"));
  auto ping = gw->response(43);
  EXPECT_TRUE(ping.contains("result")) << ping.dump() << gw->err();
}

TEST_F(GatewayTestServer, ALongCallDoesNotHoldBackAPing) {
  auto url = start_server({});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);
  gw->send(request(2, "tools/call", {{"name", "sleep"}, {"arguments", {{"ms", 3000}}}}));
  gw->send(request(3, "ping"));
  // The first answer to arrive is the ping's.
  auto first = gw->message([](const json& j) { return j.is_object() && j.contains("id"); });
  EXPECT_EQ(first.value("id", json()), 3) << first.dump();
  auto call = gw->response(2);
  EXPECT_TRUE(call.contains("result")) << call.dump();
}

TEST_F(GatewayTestServer, TheEventStreamIsForwarded) {
  auto url = start_server({"--list-changed-after-ms", "50"});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);
  auto note =
    gw->message([](const json& j) { return j.value("method", "") == "notifications/tools/list_changed"; });
  EXPECT_TRUE(note.is_object()) << gw->err();
}

TEST_F(GatewayTestServer, AServerRequestIsAnsweredThroughTheGateway) {
  auto url = start_server({"--client-tool"});
  ASSERT_FALSE(url.empty());
  auto gw = initialized_gateway(url);
  gw->send(request(2, "tools/call", {{"name", "ask_client"}, {"arguments", {{"method", "roots/list"}}}}));
  auto ask = gw->message([](const json& j) { return j.value("method", "") == "roots/list" && j.contains("id"); });
  ASSERT_TRUE(ask.is_object()) << gw->err();
  gw->send(
    json{{"jsonrpc", "2.0"}, {"id", ask["id"]}, {"result", {{"roots", {{{"uri", "file:///w"}, {"name", "w"}}}}}}});
  auto call = gw->response(2);
  EXPECT_NE(tool_text(call).find("file:///w"), std::string::npos) << call.dump();
}

// -- against a scripted endpoint -------------------------------------------------------------

struct seen_request {
  std::string method;
  std::map<std::string, std::string> headers; // names lower case
  std::string body;
};

/// A streamable HTTP endpoint at /mcp that records every request and
/// answers as `script` says (default: initialize gets a session, requests
/// get an empty result, the rest 202; GET 405; DELETE 200).
class scripted_endpoint {
public:
  using script_fn = std::function<bool(const httplib::Request&, httplib::Response&)>;

  explicit scripted_endpoint(script_fn script = {}, script_fn get_script = {})
      : script_(std::move(script)), get_script_(std::move(get_script)) {
    auto record = [this](const httplib::Request& req) {
      seen_request s{req.method, {}, req.body};
      for (auto& [k, v] : req.headers) {
        std::string key;
        for (char c : k)
          key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        s.headers[key] = v;
      }
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(std::move(s));
      cv_.notify_all();
    };
    svr_.Post("/mcp", [this, record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      if (script_ && script_(req, res)) return;
      auto j = json::parse(req.body, nullptr, false);
      if (j.value("method", "") == "initialize") {
        res.set_header("Mcp-Session-Id", "session-abc123");
        res.set_content(json{{"jsonrpc", "2.0"},
                             {"id", j["id"]},
                             {"result",
                              {{"protocolVersion", "2025-03-26"},
                               {"capabilities", json::object()},
                               {"serverInfo", {{"name", "scripted"}, {"version", "1"}}}}}}
                          .dump(),
                        "application/json");
      } else if (j.contains("method") && j.contains("id")) {
        res.set_content(json{{"jsonrpc", "2.0"}, {"id", j["id"]}, {"result", json::object()}}.dump(),
                        "application/json");
      } else {
        res.status = 202;
      }
    });
    svr_.Get("/mcp", [this, record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      if (get_script_ && get_script_(req, res)) return;
      res.status = 405;
    });
    svr_.Delete("/mcp", [record](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 200;
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    // Listening since the bind: connections queue until the loop runs.
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~scripted_endpoint() {
    // stop() before the loop runs would be lost: an answered request (a 404
    // for a path no test uses; it queues since the bind) proves it runs.
    httplib::Client probe("127.0.0.1", port_);
    probe.set_connection_timeout(5, 0);
    probe.set_read_timeout(5, 0);
    probe.Get("/ready");
    svr_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

  /// Waits until a request passes `pred`; a copy of it.
  std::optional<seen_request> wait_for(const std::function<bool(const seen_request&)>& pred,
                                       std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<seen_request> found;
    cv_.wait_for(lock, timeout, [&] {
      for (auto& s : seen_)
        if (pred(s)) {
          found = s;
          return true;
        }
      return false;
    });
    return found;
  }

  std::vector<seen_request> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

private:
  script_fn script_, get_script_;
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<seen_request> seen_;
};

std::string header(const seen_request& s, const std::string& name) {
  auto it = s.headers.find(name);
  return it == s.headers.end() ? std::string() : it->second;
}

bool has_method(const seen_request& s, const std::string& method) {
  auto j = json::parse(s.body, nullptr, false); // GET and DELETE have none
  return j.is_object() && j.value("method", "") == method;
}

class GatewayScripted : public cli_test {
protected:
  fs::path token_file(const std::string& token) {
    auto p = root_ / "token";
    write_file(p, token + "\n");
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
    return p;
  }
};

TEST_F(GatewayScripted, SendsTheHeadersAndDeletesTheSessionOnEof) {
  scripted_endpoint ep;
  const std::string token = "gw-token-5d1e9a";
  gateway_proc gw(bridge_to(ep.url(), token_file(token).string()), home_);
  gw.send(initialize(1, "2025-03-26"));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  gw.send(initialized);
  gw.send(request(2, "tools/list"));
  ASSERT_TRUE(gw.response(2).contains("result")) << gw.err();

  auto init = ep.wait_for([](const seen_request& s) { return has_method(s, "initialize"); });
  ASSERT_TRUE(init);
  EXPECT_EQ(header(*init, "authorization"), "Bearer " + token);
  EXPECT_EQ(header(*init, "mcp-session-id"), "");
  EXPECT_EQ(header(*init, "content-type"), "application/json");
  auto accept = header(*init, "accept");
  EXPECT_NE(accept.find("application/json"), std::string::npos) << accept;
  EXPECT_NE(accept.find("text/event-stream"), std::string::npos) << accept;

  auto list = ep.wait_for([](const seen_request& s) { return has_method(s, "tools/list"); });
  ASSERT_TRUE(list);
  EXPECT_EQ(header(*list, "mcp-session-id"), "session-abc123");
  EXPECT_EQ(header(*list, "mcp-protocol-version"), "2025-03-26");
  EXPECT_EQ(header(*list, "authorization"), "Bearer " + token);
  auto note = ep.wait_for([](const seen_request& s) { return has_method(s, "notifications/initialized"); });
  ASSERT_TRUE(note);
  EXPECT_EQ(header(*note, "mcp-protocol-version"), "2025-03-26");
  // The event stream was tried, once: 405 means none.
  EXPECT_TRUE(ep.wait_for([](const seen_request& s) { return s.method == "GET"; }));

  gw.close_stdin();
  auto del = ep.wait_for([](const seen_request& s) { return s.method == "DELETE"; });
  ASSERT_TRUE(del) << gw.err();
  EXPECT_EQ(header(*del, "mcp-session-id"), "session-abc123");
  EXPECT_EQ(header(*del, "authorization"), "Bearer " + token);
  EXPECT_EQ(gw.wait_exit(15s), 0) << gw.err();
  int gets = 0;
  for (auto& s : ep.seen())
    gets += s.method == "GET";
  EXPECT_EQ(gets, 1);
}

// A line over the bridge's 4 MiB limit is never sent upstream; its request
// gets an error answer naming its id (kept from the line's start), and the
// next line goes through.
TEST_F(GatewayScripted, AnOversizedLineIsAnsweredByItsIdAndTheNextOneGoesThrough) {
  scripted_endpoint ep;
  gateway_proc gw(bridge_to(ep.url()), home_);
  gw.send(initialize(1, "2025-03-26"));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  gw.send(initialized);
  gw.send(R"({"jsonrpc":"2.0","id":42,"method":"tools/list","params":{"pad":")" + std::string(5u << 20, 'x') + R"("}})");
  auto refused = gw.response(42);
  ASSERT_TRUE(refused.contains("error")) << refused.dump().substr(0, 300) << gw.err();
  gw.send(request(43, "tools/list"));
  ASSERT_TRUE(gw.response(43).contains("result")) << gw.err();
  // Lines go upstream in order: had 42 gone, it would be in before 43 was.
  EXPECT_FALSE(ep.wait_for([](const seen_request& s) { return s.body.size() > (4u << 20); }, 0ms))
    << "the oversized line went upstream";
}

TEST_F(GatewayScripted, TheEventStreamIsResumedWithLastEventId) {
  std::atomic<int> gets{0};
  scripted_endpoint ep({}, [&](const httplib::Request&, httplib::Response& res) {
    int n = ++gets;
    if (n > 2) return false; // 405: no more
    // Each stream carries one event and ends; `retry` keeps the test quick.
    auto note = json{{"jsonrpc", "2.0"}, {"method", "notifications/message"}, {"params", {{"n", n}}}};
    res.set_content("retry: 100\nid: ev-" + std::to_string(n) + "\nevent: message\ndata: " + note.dump() + "\n\n",
                    "text/event-stream");
    return true;
  });
  gateway_proc gw(bridge_to(ep.url()), home_);
  gw.send(initialize(1));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  gw.send(initialized);
  for (int n : {1, 2}) {
    auto note = gw.message([&](const json& j) { return j.value("method", "") == "notifications/message"; });
    ASSERT_TRUE(note.is_object()) << gw.err();
    EXPECT_EQ(note["params"].value("n", 0), n);
  }
  auto second =
    ep.wait_for([](const seen_request& s) { return s.method == "GET" && !header(s, "last-event-id").empty(); });
  ASSERT_TRUE(second);
  EXPECT_EQ(header(*second, "last-event-id"), "ev-1");
  EXPECT_EQ(header(*second, "mcp-session-id"), "session-abc123");
  // The third GET gets 405: the gateway stops asking, and goes on.
  EXPECT_TRUE(ep.wait_for([](const seen_request& s) { return header(s, "last-event-id") == "ev-2"; }));
  gw.send(request(2, "ping"));
  EXPECT_TRUE(gw.response(2).contains("result"));
  gw.close_stdin();
  EXPECT_EQ(gw.wait_exit(15s), 0) << gw.err();
  EXPECT_EQ(gets.load(), 3);
}

TEST_F(GatewayScripted, SigtermDeletesTheSessionAndExitsZero) {
  scripted_endpoint ep;
  gateway_proc gw(bridge_to(ep.url()), home_);
  gw.send(initialize(1));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  ::kill(gw.pid(), SIGTERM);
  auto del = ep.wait_for([](const seen_request& s) { return s.method == "DELETE"; });
  ASSERT_TRUE(del) << gw.err();
  EXPECT_EQ(header(*del, "mcp-session-id"), "session-abc123");
  EXPECT_EQ(gw.wait_exit(15s), 0) << gw.err();
}

TEST_F(GatewayScripted, AFailedPostAnswersItsRequestAndKeepsTheTokenOutOfStderr) {
  const std::string token = "gw-token-echoed-77f0";
  scripted_endpoint ep([&](const httplib::Request& req, httplib::Response& res) {
    auto j = json::parse(req.body, nullptr, false);
    if (j.value("method", "") != "tools/list") return false;
    // A broken server that echoes what it got, token included.
    res.status = 500;
    res.set_content("internal error for " + req.get_header_value("Authorization") + " and " + token, "text/plain");
    return true;
  });
  gateway_proc gw(bridge_to(ep.url(), token_file(token).string()), home_);
  gw.send(initialize(1));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  gw.send(initialized);
  gw.send(request(2, "tools/list"));
  auto failed = gw.response(2);
  ASSERT_TRUE(failed.contains("error")) << failed.dump();
  auto message = failed["error"].value("message", "");
  EXPECT_NE(message.find("HTTP 500"), std::string::npos) << message;
  EXPECT_EQ(message.find(token), std::string::npos) << message;
  gw.send(request(3, "ping"));
  EXPECT_TRUE(gw.response(3).contains("result")) << gw.err();
  gw.close_stdin();
  EXPECT_EQ(gw.wait_exit(15s), 0);
  EXPECT_NE(gw.err().find("HTTP 500"), std::string::npos) << gw.err();
  EXPECT_EQ(gw.err().find(token), std::string::npos) << gw.err();
}

TEST_F(GatewayScripted, AForgottenSessionFailsThePendingRequestAndExits) {
  scripted_endpoint ep([](const httplib::Request& req, httplib::Response& res) {
    auto j = json::parse(req.body, nullptr, false);
    if (j.value("method", "") != "tools/list") return false;
    res.status = 404; // the daemon restarted: it knows no such session
    res.set_content(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}})",
                    "application/json");
    return true;
  });
  gateway_proc gw(bridge_to(ep.url()), home_);
  gw.send(initialize(1));
  ASSERT_TRUE(gw.response(1).contains("result")) << gw.err();
  gw.send(initialized);
  gw.send(request(2, "tools/list"));
  auto failed = gw.response(2);
  ASSERT_TRUE(failed.contains("error")) << failed.dump() << gw.err();
  EXPECT_NE(failed["error"].value("message", "").find("gone"), std::string::npos) << failed.dump();
  EXPECT_EQ(gw.wait_exit(15s), 1) << gw.err();
  EXPECT_NE(gw.err().find("start it again"), std::string::npos) << gw.err();
  // No DELETE for a session the server no longer knows.
  for (auto& s : ep.seen())
    EXPECT_NE(s.method, "DELETE");
}

TEST_F(GatewayScripted, AnUnreachableEndpointAnswersEachRequest) {
  // A port nobody listens on: bound (not listening), then closed.
  int port = 0;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    ::close(fd);
  }
  gateway_proc gw(bridge_to("http://127.0.0.1:" + std::to_string(port) + "/mcp"), home_);
  gw.send(initialize(1));
  auto failed = gw.response(1);
  ASSERT_TRUE(failed.contains("error")) << failed.dump() << gw.err();
  gw.send(request(2, "ping"));
  EXPECT_TRUE(gw.response(2).contains("error")) << gw.err();
  gw.close_stdin();
  EXPECT_EQ(gw.wait_exit(15s), 0) << gw.err();
}

TEST_F(GatewayScripted, BadFlagsAreRefused) {
  auto r = mcprt({"gateway", "--set", "no/slash"}, ws_);
  EXPECT_EQ(r.code, 2) << describe(r);
  r = mcprt({"gateway", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("mcpServers"), std::string::npos) << r.out;
  // It offers the flags it passes on to a daemon it starts, and no other.
  EXPECT_NE(r.out.find("--allowed-mcp-server-names"), std::string::npos) << r.out;
  for (auto refused : {"--budget", "--url", "--token-file", "--home", "--elicitation"})
    EXPECT_EQ(r.out.find(refused), std::string::npos) << refused << " in:\n" << r.out;
}

/// The serve flags `mcprt serve --help` lists.
std::set<std::string> serve_flags_listed(const run_result& help) {
  std::set<std::string> out;
  std::istringstream in(help.out);
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find_first_not_of(' ');
    if (at == std::string::npos || line[at] != '-') continue;
    auto first = line.substr(at, line.find(' ', at) - at);
    auto dashes = first.find("--");
    if (dashes == std::string::npos) continue;
    out.insert(first.substr(dashes, first.find(',', dashes) - dashes));
  }
  return out;
}

// A gateway's arguments are what a repository's .mcp.json wrote: only those
// that select or narrow what the owner's own files allow are taken. Every
// other serve flag, whatever it is called (a flag added later included),
// is refused by name before a daemon starts.
TEST_F(GatewayScripted, EveryServeFlagButThoseThatNarrowIsRefusedBeforeAnythingStarts) {
  auto listed = serve_flags_listed(mcprt({"serve", "--help"}));
  ASSERT_GT(listed.size(), 20u);
  const std::set<std::string> taken{"--workspace", "--help", "--profile", "--allowed-mcp-server-names", "--untrusted",
                                    "--log-level", "--log-format"};
  // The hidden ones too.
  for (auto hidden : {"--sse-keepalive-ms", "--sse-queue", "--sndbuf", "--event-history"})
    listed.insert(hidden);
  int refused = 0;
  for (auto& flag : listed) {
    if (taken.count(flag)) continue;
    // As a flag, or with a value: one of the two is how it is written.
    auto alone = mcprt({"gateway", flag}, ws_);
    auto valued = mcprt({"gateway", flag + "=1"}, ws_);
    bool named = alone.err.find("does not take " + flag + ":") != std::string::npos
                 || valued.err.find("does not take " + flag + ":") != std::string::npos;
    EXPECT_TRUE(named) << flag << ":\n" << describe(alone) << "\n" << describe(valued);
    EXPECT_EQ(alone.code, 2) << flag;
    EXPECT_EQ(valued.code, 2) << flag;
    refused += named;
  }
  EXPECT_GE(refused, 25);
  // Nothing was started: the gateway makes <ws>/.mcprt (its lock) first.
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt"));
}

// The attacks a repository's gateway entry made, each written as it was:
// a guessable token, the owner's secrets sent to a URL, loosened trust.
TEST_F(GatewayScripted, ARepositorysGatewayEntryChoosesNoTokenNoURLAndNoTrustSetting) {
  write_file(home_ / ".mcprt" / "mcp-approvals.json", "{\n  \"version\": 1\n}\n");
  write_file(home_ / ".git-credentials", "https://alice:ghp_0123456789abcdef0123456789abcdef0123@github.com\n");
  write_file(home_ / ".mcprt" / "token", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n");
  for (auto f : {"mcprt/mcp-approvals.json", "git-credentials", "mcprt/token"})
    fs::permissions(home_ / (std::string(".") + f), fs::perms::owner_read | fs::perms::owner_write);
  scripted_endpoint listener;
  const std::vector<std::vector<std::string>> attacks{
    {"--workspace", ".", "--token-file", (home_ / ".mcprt" / "mcp-approvals.json").string()},
    {"--url", listener.url(), "--token-file", (home_ / ".mcprt" / "token").string()},
    {"--url", listener.url(), "--token-file", (home_ / ".git-credentials").string()},
    {"--url", listener.url()},
    {"--elicitation", "accept-defaults"},
    {"--sampling", "ask"},
    {"--budget-mode", "off"},
    {"--max-streams", "100000"},
    {"--max-body-bytes", "1000000000"},
    {"--request-timeout-ms", "100000000"},
    {"--threads", "64"},
    {"--listen", "127.0.0.1:0"},
  };
  for (auto& attack : attacks) {
    std::vector<std::string> args{"gateway"};
    args.insert(args.end(), attack.begin(), attack.end());
    auto r = mcprt(args, ws_);
    EXPECT_EQ(r.code, 2) << describe(r);
    auto flag = attack[0] == "--workspace" ? attack[2] : attack[0];
    EXPECT_NE(r.err.find("does not take " + flag), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("ghp_"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(listener.seen().empty()) << "the listener was sent " << listener.seen().size() << " requests";
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt"));
}

// One repository's gateway cannot reach (or start) another workspace's
// daemon: --workspace is the directory it runs in or one above it.
TEST_F(GatewayScripted, AGatewayServesOnlyTheWorkspaceItRunsIn) {
  auto other = root_ / "other";
  fs::create_directories(other);
  fs::create_symlink(other, ws_ / "link-to-other");
  for (auto requested : {std::string("../other"), other.string(), std::string("link-to-other"),
                         std::string("link-to-other/../other"), (ws_ / "link-to-other").string()}) {
    auto r = mcprt({"gateway", "--workspace", requested}, ws_);
    EXPECT_EQ(r.code, 2) << requested << ": " << describe(r);
    EXPECT_NE(r.err.find("does not contain the gateway's working directory"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(other / ".mcprt"));
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt"));
}

// -- against the workspace daemon --------------------------------------------------------------

/// The `mcprt serve` processes of `ws` (their cmdline names it).
/// A /proc file's text, or "" once its process is gone: a read that fails
/// with ESRCH would throw out of an istreambuf_iterator.
std::string read_proc_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    auto got = ::read(fd, buf, sizeof buf);
    if (got <= 0) break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return out;
}

pid_t parent_of(pid_t pid) {
  auto stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The daemons serving `ws`. A daemon's child between fork and exec (a
// server being started) still shows the daemon's command line; it is not
// another daemon.
std::vector<pid_t> serve_processes(const fs::path& ws) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto cmd = read_proc_file(e.path() / "cmdline");
    std::vector<std::string> args;
    std::string cur;
    for (char c : cmd) {
      if (c == '\0') {
        args.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
    if (args.size() >= 4 && args[1] == "serve" && args[2] == "--workspace" && args[3] == ws.string()) {
      // A zombie has an empty cmdline, so this one runs.
      found.push_back(static_cast<pid_t>(std::stoi(name)));
    }
  }
  std::vector<pid_t> out;
  for (pid_t pid : found)
    if (std::find(found.begin(), found.end(), parent_of(pid)) == found.end()) out.push_back(pid);
  return out;
}

class GatewayDaemon : public cli_test {
protected:
  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}.dump(2));
  }
  void TearDown() override {
    // The daemon outlives its gateways by design: stop it here.
    for (pid_t pid : serve_processes(ws_)) {
      ::kill(pid, SIGTERM);
      EXPECT_TRUE(gone_within(pid, 30s)) << "daemon " << pid << " did not stop";
    }
    cli_test::TearDown();
  }

  std::vector<std::string> gateway_args() const {
    // No --home (a gateway refuses it): HOME is home_ for every process here.
    return {"--workspace", ws_.string()};
  }
};

TEST_F(GatewayDaemon, TwoGatewaysStartedTogetherShareOneDaemon) {
  gateway_proc a(gateway_command(gateway_args()), home_, ws_);
  gateway_proc b(gateway_command(gateway_args()), home_, ws_);
  a.send(initialize(1));
  b.send(initialize(1));
  auto ra = a.response(1, 90s);
  auto rb = b.response(1, 90s);
  ASSERT_TRUE(ra.is_object()) << a.err();
  ASSERT_TRUE(rb.is_object()) << b.err();

  auto daemons = serve_processes(ws_);
  ASSERT_EQ(daemons.size(), 1u) << a.err() << "\n" << b.err();
  auto record = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  EXPECT_EQ(record.value("pid", 0), daemons.front());
  // Exactly one of them started it.
  int started = (a.err().find("started a daemon") != std::string::npos)
                + (b.err().find("started a daemon") != std::string::npos);
  EXPECT_EQ(started, 1) << a.err() << "\n" << b.err();

  if (ra.contains("error") && ra["error"].value("message", "").find("HTTP 404") != std::string::npos)
    GTEST_SKIP() << "the daemon does not serve /mcp yet (issue 17): the shared-daemon part passed, the MCP part "
                    "is skipped until it does";

  ASSERT_TRUE(ra.contains("result")) << ra.dump();
  ASSERT_TRUE(rb.contains("result")) << rb.dump();
  for (auto* gw : {&a, &b}) {
    gw->send(initialized);
    gw->send(request(2, "tools/list"));
    auto list = gw->response(2, 60s);
    EXPECT_TRUE(list.contains("result")) << list.dump();
  }
  a.close_stdin();
  b.close_stdin();
  EXPECT_EQ(a.wait_exit(15s), 0) << a.err();
  EXPECT_EQ(b.wait_exit(15s), 0) << b.err();
  // The daemon stays for the next client.
  EXPECT_EQ(serve_processes(ws_).size(), 1u);
}

TEST_F(GatewayDaemon, AStaleDaemonFileIsReplacedByANewDaemon) {
  // The file of a daemon that was killed: its pid is gone.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  write_file(
    ws_ / ".mcprt" / "daemon.json",
    json{{"url", "http://127.0.0.1:1"}, {"pid", dead}, {"instance", "0123"}, {"workspace", ws_.string()}}.dump());
  ::chmod((ws_ / ".mcprt" / "daemon.json").c_str(), 0600);
  gateway_proc gw(gateway_command(gateway_args()), home_, ws_);
  gw.send(request(1, "ping"));
  ASSERT_TRUE(gw.response(1, 90s).is_object()) << gw.err();
  EXPECT_NE(gw.err().find("started a daemon"), std::string::npos) << gw.err();
  auto daemons = serve_processes(ws_);
  ASSERT_EQ(daemons.size(), 1u);
  auto record = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  EXPECT_EQ(record.value("pid", 0), daemons.front());
}

// A cloned repository decides what <ws>/.mcprt holds. Links it planted
// there for the files the gateway and the daemon write are replaced, never
// followed: the file they point at keeps its content.
TEST_F(GatewayDaemon, LinksPlantedInTheWorkspacesMcprtDirectoryAreNotFollowed) {
  auto victim = root_ / "victim";
  write_file(victim, "keep");
  fs::create_directories(ws_ / ".mcprt");
  const char* names[] = {"daemon.log", "gateway.lock", "daemon.lock", "daemon.json"};
  for (auto* name : names)
    fs::create_symlink(victim, ws_ / ".mcprt" / name);
  gateway_proc gw(gateway_command(gateway_args()), home_, ws_);
  gw.send(request(1, "ping"));
  ASSERT_TRUE(gw.response(1, 90s).is_object()) << gw.err();
  EXPECT_NE(gw.err().find("started a daemon"), std::string::npos) << gw.err();
  EXPECT_EQ(slurp(victim), "keep");
  for (auto* name : names) {
    EXPECT_FALSE(fs::is_symlink(ws_ / ".mcprt" / name)) << name;
    EXPECT_TRUE(fs::is_regular_file(ws_ / ".mcprt" / name)) << name;
  }
  auto record = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  ASSERT_EQ(serve_processes(ws_).size(), 1u);
  EXPECT_EQ(record.value("pid", 0), serve_processes(ws_).front());
}

// <ws>/.mcprt itself a link to a directory elsewhere: the gateway says so and
// writes nothing there.
TEST_F(GatewayDaemon, AnMcprtDirectoryThatIsALinkIsRefused) {
  auto elsewhere = root_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, ws_ / ".mcprt");
  gateway_proc gw(gateway_command(gateway_args()), home_, ws_);
  auto code = gw.wait_exit(60s);
  ASSERT_TRUE(code) << gw.err();
  EXPECT_EQ(*code, 1) << gw.err();
  EXPECT_NE(gw.err().find("is a symbolic link"), std::string::npos) << gw.err();
  EXPECT_TRUE(fs::is_empty(elsewhere));
  EXPECT_TRUE(serve_processes(ws_).empty());
}

TEST_F(GatewayDaemon, ALaterGatewayUsesTheRunningDaemon) {
  {
    gateway_proc first(gateway_command(gateway_args()), home_, ws_);
    first.send(request(1, "ping"));
    ASSERT_TRUE(first.response(1, 90s).is_object()) << first.err();
    first.close_stdin();
    EXPECT_EQ(first.wait_exit(15s), 0) << first.err();
  }
  auto daemons = serve_processes(ws_);
  ASSERT_EQ(daemons.size(), 1u);
  gateway_proc second(gateway_command(gateway_args()), home_, ws_);
  second.send(request(1, "ping"));
  ASSERT_TRUE(second.response(1, 60s).is_object()) << second.err();
  EXPECT_EQ(second.err().find("started a daemon"), std::string::npos) << second.err();
  EXPECT_EQ(serve_processes(ws_), daemons);
}

// The owner's own ways to run it: from the workspace with `.` or no flag,
// from a subdirectory with the workspace above it. One daemon serves all.
TEST_F(GatewayDaemon, TheWorkspaceItRunsInOrOneAboveItIsServed) {
  fs::create_directories(ws_ / "src" / "deep");
  for (auto [args, cwd] : {std::pair{std::vector<std::string>{"--workspace", "."}, ws_},
                           std::pair{std::vector<std::string>{}, ws_},
                           std::pair{std::vector<std::string>{"--workspace", "../.."}, ws_ / "src" / "deep"},
                           std::pair{std::vector<std::string>{"--workspace", ws_.string()}, ws_ / "src"}}) {
    gateway_proc gw(gateway_command(args), home_, cwd);
    gw.send(initialize(1));
    auto init = gw.response(1, 90s);
    ASSERT_TRUE(init.contains("result")) << init.dump() << "\n" << gw.err();
    gw.send(initialized);
    gw.send(request(2, "tools/list"));
    auto list = gw.response(2, 60s);
    ASSERT_TRUE(list.contains("result")) << list.dump() << "\n" << gw.err();
    gw.close_stdin();
    EXPECT_EQ(gw.wait_exit(15s), 0) << gw.err();
    EXPECT_EQ(serve_processes(ws_).size(), 1u) << gw.err();
  }
  EXPECT_TRUE(serve_processes(ws_ / "src").empty());
}

// An .mcp.json entry's "env" sets the gateway's environment: the limits
// MCPRT_BUDGET and its kind set do not reach a daemon the gateway starts.
TEST_F(GatewayDaemon, ADaemonTheGatewayStartsTakesNoMcprtVariable) {
  gateway_proc gw(gateway_command(gateway_args()), home_, ws_,
                  {"MCPRT_BUDGET=1000", "MCPRT_BUDGET_MODE=off", "MCPRT_NO_POOL=1"});
  gw.send(request(1, "ping"));
  ASSERT_TRUE(gw.response(1, 90s).is_object()) << gw.err();
  auto daemons = serve_processes(ws_);
  ASSERT_EQ(daemons.size(), 1u) << gw.err();
  auto environ_text = read_proc_file("/proc/" + std::to_string(daemons.front()) + "/environ");
  ASSERT_FALSE(environ_text.empty());
  EXPECT_EQ(environ_text.find("MCPRT_"), std::string::npos);
}

// An entry's "env" may also set HOME, where a daemon reads the user
// settings it trusts: a home in the repository, or another user's, starts
// no daemon, and the repository's user-scope server never runs.
TEST_F(GatewayDaemon, ADaemonIsNotStartedWithAHomeTheRepositoryChose) {
  auto ran = root_ / "ran";
  auto planted = json{{"mcpServers", {{"planted", {{"command", "touch"}, {"args", {ran.string()}}}}}}}.dump();
  auto in_repo = ws_ / "fake-home";
  write_file(in_repo / ".mcprt" / "settings.json", planted);
  std::vector<fs::path> homes{in_repo};
  if (::geteuid() == 0) {
    auto strangers = root_ / "strangers-home";
    write_file(strangers / ".mcprt" / "settings.json", planted);
    for (auto& p : {strangers, strangers / ".mcprt", strangers / ".mcprt" / "settings.json"})
      ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
    homes.push_back(strangers);
  }
  for (auto& home : homes) {
    gateway_proc gw(gateway_command(gateway_args()), home, ws_);
    auto code = gw.wait_exit(60s);
    ASSERT_TRUE(code) << gw.err();
    EXPECT_EQ(*code, 1) << gw.err();
    EXPECT_NE(gw.err().find("HOME ("), std::string::npos) << gw.err();
    EXPECT_TRUE(serve_processes(ws_).empty());
  }
  EXPECT_FALSE(fs::exists(ran));
}

} // namespace
} // namespace mcprt_cli_test
