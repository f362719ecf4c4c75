// The daemon's HTTP surface tried as an attacker would (issue #13, section
// 1), black-box against the real `mcprt serve`: a web page in the user's
// browser (DNS rebinding, cross-origin requests), any bytes anywhere in a
// request, clients that hold connections, send slowly or send too much, a
// stuck MCP server, and a repository that ships its own daemon.json. Raw
// sockets send what a well-behaved client library would not. Every wait is
// on a condition with a deadline.

#include <fcntl.h>
#include <sys/stat.h>

#include <regex>

#include "core/untrusted_text.hpp"
#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using mcprt::escape_for_display;

class hostile_http : public daemon_test {
protected:
  /// The daemon with debug logging, so refused requests are logged too.
  void start_logging(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--log-level", "debug"});
    start(extra);
  }

  raw_reply send(const std::string& method, const std::string& target, std::vector<std::string> headers = {},
                 const std::string& body = {}) const {
    return raw_request(port_, http_text(method, target, port_, std::move(headers), body));
  }

  raw_reply post_json(const std::string& target, const std::string& body = "{}",
                      std::vector<std::string> headers = {}) const {
    headers.push_back("Content-Type: application/json");
    return send("POST", target, headers, body);
  }

  /// The daemon still answers, and never logged a line that starts with
  /// what a request carried (a forged line) or a raw control character.
  void expect_alive_and_log_clean(const std::string& token = {}) {
    auto h = send("GET", "/healthz", token.empty() ? std::vector<std::string>{} : std::vector<std::string>{"Authorization: Bearer " + token});
    EXPECT_EQ(h.status, 200) << h.head;
    EXPECT_FALSE(daemon_->wait_exit(0ms)) << "the daemon died\n" << daemon_->err();
    std::istringstream in(daemon_->err());
    std::string line;
    static const std::regex stamped(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} \S+ .*)");
    while (std::getline(in, line)) {
      EXPECT_TRUE(std::regex_match(line, stamped)) << "a log line without the daemon's own prefix: " << line;
      for (unsigned char c : line)
        EXPECT_TRUE(c >= 0x20 && c != 0x7F) << "a raw control character in the log: " << line;
    }
  }

  std::string approval_of(const std::string& name) const { return server(name).value("approval", ""); }
};

// -- browsers -----------------------------------------------------------------------------------

TEST_F(hostile_http, a_dns_rebinding_host_is_refused_on_every_route) {
  start_logging();
  auto host = "Host: evil.example:" + std::to_string(port_);
  struct probe {
    const char* method;
    const char* target;
  };
  for (auto p : {probe{"GET", "/healthz"}, probe{"GET", "/workspace/mcp"}, probe{"GET", "/workspace/mcp/events"},
                 probe{"POST", "/workspace/mcp/project-tools/approve"}, probe{"POST", "/workspace/mcp/reload"},
                 probe{"POST", "/workspace/mcp/echo/restart"}, probe{"POST", "/workspace/mcp/tools/call"},
                 probe{"GET", "/no/such/route"}}) {
    auto r = send(p.method, p.target, {host, "Content-Type: application/json"},
                  std::string(p.method) == "POST" ? R"({"server":"echo","tool":"echo"})" : "");
    EXPECT_EQ(r.status, 403) << p.method << " " << p.target << "\n" << r.head;
    EXPECT_TRUE(r.is_error("host_not_allowed")) << r.body;
    EXPECT_EQ(r.body.find("\"servers\""), std::string::npos) << "the snapshot leaked";
  }
  EXPECT_EQ(approval_of("project-tools"), "pending") << "a rebinding page approved a server";
  EXPECT_FALSE(fs::exists(approvals_file()));
  // Its own names, with its port, pass; the wrong port does not.
  auto port = std::to_string(port_);
  for (auto ok : {"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port})
    EXPECT_EQ(send("GET", "/healthz", {"Host: " + ok}).status, 200) << ok;
  for (auto bad : {"127.0.0.1:" + std::to_string(port_ + 1), std::string("127.0.0.1"), std::string("localhost"),
                   "127.0.0.1:" + port + ".evil.example", std::string("evil.example")})
    EXPECT_EQ(send("GET", "/healthz", {"Host: " + bad}).status, 403) << bad;
  // No Host at all (HTTP/1.0, and HTTP/1.1 which requires one): refused.
  auto r = raw_request(port_, "GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.status, 400) << r.head;
  r = raw_request(port_, "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.status, 400) << r.head;
  // Two Host headers: refused.
  r = send("GET", "/healthz", {"Host: 127.0.0.1:" + port, host});
  EXPECT_EQ(r.status, 400) << r.head;
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, a_web_page_of_another_origin_is_refused) {
  start_logging();
  for (auto origin : {"http://evil.example", "null", "http://127.0.0.1:1", "file://"}) {
    auto o = std::string("Origin: ") + origin;
    auto r = send("GET", "/workspace/mcp", {o});
    EXPECT_EQ(r.status, 403) << origin;
    EXPECT_TRUE(r.is_error("origin_not_allowed")) << r.body;
    EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "") << "CORS answer for a refused origin";
    r = post_json("/workspace/mcp/project-tools/approve", "{}", {o});
    EXPECT_EQ(r.status, 403) << origin;
    r = post_json("/workspace/mcp/tools/call", R"({"server":"echo","tool":"echo","arguments":{"text":"x"}})", {o});
    EXPECT_EQ(r.status, 403) << origin;
    // A preflight gets no CORS answer either.
    r = send("OPTIONS", "/workspace/mcp/tools/call", {o, "Access-Control-Request-Method: POST"});
    EXPECT_EQ(r.status, 403) << origin;
    EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  }
  EXPECT_EQ(approval_of("project-tools"), "pending") << "a web page approved a server";
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, an_allowed_origin_gets_cors_answers) {
  start({"--allow-origin", "http://app.example:3000"});
  auto o = "Origin: http://app.example:3000";
  auto r = send("GET", "/workspace/mcp", {o});
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "http://app.example:3000");
  EXPECT_EQ(r.header("Vary"), "Origin");
  r = send("OPTIONS", "/workspace/mcp/tools/call",
           {o, "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type"});
  EXPECT_EQ(r.status, 204) << r.head;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "http://app.example:3000");
  EXPECT_EQ(r.header("Access-Control-Allow-Methods"), "POST");
  EXPECT_NE(r.header("Access-Control-Allow-Headers").find("Content-Type"), std::string::npos);
  r = post_json("/workspace/mcp/tools/call", R"({"server":"echo","tool":"echo","arguments":{"text":"cors"}})", {o});
  ASSERT_TRUE(connected("echo"));
  r = post_json("/workspace/mcp/tools/call", R"({"server":"echo","tool":"echo","arguments":{"text":"cors"}})", {o});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "http://app.example:3000");
  // Another origin is still refused, and without a CORS answer.
  r = send("GET", "/workspace/mcp", {"Origin: http://app.example:3001"});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  // No Origin (curl, the CLI): no CORS headers.
  r = send("GET", "/workspace/mcp");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "");
  auto bad = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--allow-origin", "*"});
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_NE(bad.err.find("--allow-origin"), std::string::npos) << bad.err;
}

TEST_F(hostile_http, a_simple_cross_origin_post_is_415_and_changes_nothing) {
  start_logging();
  // What a page can send without a preflight: text/plain, a form, multipart,
  // or no type at all.
  for (auto type : {"Content-Type: text/plain", "Content-Type: application/x-www-form-urlencoded",
                    "Content-Type: multipart/form-data; boundary=x", "Content-Type: text/plain; charset=application/json",
                    "Content-Type: application/json-seq", "-"}) {
    std::vector<std::string> h;
    if (std::string(type) != "-") h.push_back(type);
    for (auto target : {"/workspace/mcp/project-tools/approve", "/workspace/mcp/reload", "/workspace/mcp/echo/restart"}) {
      auto r = send("POST", target, h, "{}");
      EXPECT_EQ(r.status, 415) << type << " " << target;
      EXPECT_TRUE(r.is_error("unsupported_media_type")) << r.body;
      r = send("POST", target, h); // an empty body needs the type too
      EXPECT_EQ(r.status, 415) << type << " " << target << " (empty body)";
    }
    auto r = send("POST", "/workspace/mcp/tools/call", h, R"({"server":"echo","tool":"echo","arguments":{"text":"x"}})");
    EXPECT_EQ(r.status, 415) << type;
  }
  EXPECT_EQ(approval_of("project-tools"), "pending");
  EXPECT_FALSE(fs::exists(approvals_file())) << "a refused request wrote the approvals store";
  // application/json, with or without its charset, is what works.
  auto r = send("POST", "/workspace/mcp/project-tools/approve", {"Content-Type: application/json; charset=utf-8"});
  EXPECT_EQ(r.status, 200) << r.body;
  expect_alive_and_log_clean();
}

// -- any bytes, anywhere --------------------------------------------------------------------------

TEST_F(hostile_http, any_bytes_in_the_path_get_a_4xx_and_never_abort_the_daemon) {
  start_logging();
  const std::vector<std::string> targets{
    "/%FF", "/%00", "/%C0%AF", "/%ED%A0%80", "/%F4%90%80%80", "/%", "/%G0", "/%E2%80%AE", "/%C2%85",
    "/workspace/mcp/%FF/approve", "/workspace/mcp/%00/restart", "/workspace/mcp/a%0Ab/restart",
    "/workspace/mcp/x%0AFORGED%20line/restart", "/workspace/mcp/%1B%5B31m/approve", "/workspace%2Fmcp",
    "/\xFF", "/\xC3", "/a\x7F", "/workspace/mcp/\xE2\x80\xAE/approve", "//", "/healthz/", "/./healthz",
    "/../../etc/passwd", "*", "http://evil.example/healthz", std::string(3000, '/'),
    "/" + std::string(5000, 'a'), "/workspace/mcp/" + std::string(600, 'n') + "/restart"};
  for (auto& t : targets) {
    for (auto method : {"GET", "POST"}) {
      auto r = send(method, t, {"Content-Type: application/json"});
      EXPECT_GE(r.status, 400) << method << " " << escape_for_display(t) << " -> " << r.head;
      EXPECT_LT(r.status, 500) << method << " " << escape_for_display(t) << " -> " << r.head;
    }
  }
  auto r = send("GET", "/%FF");
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(r.is_error("bad_path")) << r.body;
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, any_bytes_in_the_request_line_and_headers) {
  write_file(root_ / "token", "tok-123-5be0f7a9c1d2e3f4a6\n");
  fs::permissions(root_ / "token", fs::perms::owner_read | fs::perms::owner_write);
  // Incomplete requests are cut off after 2 s.
  start_logging({"--token-file", (root_ / "token").string(), "--request-timeout-ms", "2000"});
  auto host = "Host: 127.0.0.1:" + std::to_string(port_);
  const std::string nul(1, '\0');
  const std::vector<std::string> requests{
    "GET /healthz" + nul + " HTTP/1.1\r\n" + host + "\r\n\r\n",
    "G\x01T /healthz HTTP/1.1\r\n" + host + "\r\n\r\n",
    "GET /healthz HTTP/9.9\r\n" + host + "\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\nX-Evil: \x01\x02\x1b[31m\xff\xfe\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\nAuthorization: Bearer \xff\x01\nFORGED\r\n\r\n",
    // libmicrohttpd cuts a header value at a NUL: what is before it must
    // still be right (the token below is not).
    "GET /healthz HTTP/1.1\r\n" + host + "\r\nAuthorization: Bearer tok-12" + nul + "3\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\nX-Nul: a" + nul + "b\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\n\xff\xfe: x\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\nNo-Colon-Here\r\n\r\n",
    "GET /healthz HTTP/1.1\r\n" + host + "\r\n folded: continuation\r\n\r\n",
    "\r\n\r\n\r\n",
    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", // a TLS hello
    "GET /workspace/mcp/events HTTP/1.1\r\n" + host + "\r\nAuthorization: Bearer tok-123-5be0f7a9c1d2e3f4a6\r\nLast-Event-ID: \xff\x01\r\n\r\n",
  };
  for (auto& req : requests) {
    auto r = raw_request(port_, req, 20s);
    // 505 is libmicrohttpd's answer to an unknown HTTP version.
    EXPECT_TRUE(r.status == 0 || (r.status >= 400 && r.status < 500) || r.status == 505)
      << escape_for_display(req) << " -> " << r.head;
  }
  // Control characters and invalid UTF-8 inside a JSON body.
  auto auth = "Authorization: Bearer tok-123-5be0f7a9c1d2e3f4a6";
  for (std::string body : {std::string("{\"server\":\"echo\xff\",\"tool\":\"echo\"}"),
                           std::string("{\"server\":\"echo\",\"tool\":\"e\xc0\xafo\"}"),
                           std::string("{\"server\":\"echo\\u0000\",\"tool\":\"echo\"}"),
                           std::string("{\"server\":\"echo\",\"tool\":\"x\\nFORGED line\"}"),
                           std::string("{\"server\":\"\\u001b[31mecho\",\"tool\":\"echo\"}"),
                           std::string("{\"server\":\"echo\",\"tool\":\"echo\"}\0trailing", 40)}) {
    auto r = post_json("/workspace/mcp/tools/call", body, {auth});
    EXPECT_EQ(r.status, 400) << escape_for_display(body) << " -> " << r.body;
    EXPECT_TRUE(r.is_error("bad_request")) << r.body;
    EXPECT_EQ(mcprt::first_invalid_utf8(r.body), std::nullopt) << escape_for_display(r.body);
    for (unsigned char c : r.body)
      EXPECT_TRUE(c >= 0x20 || c == '\n') << "a raw control character in the answer " << escape_for_display(r.body);
  }
  expect_alive_and_log_clean("tok-123-5be0f7a9c1d2e3f4a6");
  EXPECT_EQ(daemon_->err().find("tok-123-5be0f7a9c1d2e3f4a6"), std::string::npos) << "the token was logged";
}

TEST_F(hostile_http, json_logs_stay_one_object_per_line_whatever_the_request) {
  start({"--log-level", "debug", "--log-format", "json"});
  for (auto t : {"/%FF", "/x%0A{\"FORGED\":1}", "/\xFF\xFE", "/%1B%5B2J"})
    send("GET", t);
  post_json("/workspace/mcp/tools/call", "{\"server\":\"echo\",\"tool\":\"a\\nb\"}");
  send("GET", "/healthz", {"Host: evil\x01.example"});
  auto h = send("GET", "/healthz");
  EXPECT_EQ(h.status, 200);
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  std::istringstream in(daemon_->err());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto j = json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("msg")) << line;
    EXPECT_EQ(line.find("{\"FORGED\""), std::string::npos) << line;
    ++n;
  }
  EXPECT_GT(n, 5);
}

TEST_F(hostile_http, the_log_sink_escapes_what_other_components_log_raw) {
  // A server name from the settings is refused, and the warning that
  // names its key path quotes it: the sink escapes it, in both formats.
  write_file(user_settings(), json{{"mcpServers", {{"evil\nFORGED line \x1b[31m\u202e", test_server_config({"--exit-on-initialize"})}}}}.dump());
  for (auto format : {"text", "json"}) {
    start({"--log-format", format});
    ASSERT_TRUE(daemon_->err_contains("a server name must be 1 to 64 bytes", 30s)) << daemon_->err();
    EXPECT_NE(daemon_->err().find("FORGED line"), std::string::npos) << daemon_->err();
    daemon_->signal(SIGTERM);
    ASSERT_TRUE(daemon_->wait_exit(30s));
    std::istringstream in(daemon_->err());
    std::string line;
    while (std::getline(in, line)) {
      EXPECT_NE(line.rfind("FORGED", 0), 0u) << "a forged log line";
      for (unsigned char c : line)
        EXPECT_TRUE(c >= 0x20 && c != 0x7F) << "a raw control character: " << escape_for_display(line);
      EXPECT_EQ(line.find("\xE2\x80\xAE"), std::string::npos) << "a raw right-to-left override";
      if (std::string(format) == "json") {
        EXPECT_TRUE(json::parse(line, nullptr, false).is_object()) << line;
      }
    }
    daemon_.reset();
  }
}

// -- limits on all a client controls -------------------------------------------------------------

TEST_F(hostile_http, bodies_over_the_limit_are_413_chunked_ones_too) {
  start_logging();
  auto big = std::string(2 << 20, 'x');
  auto r = post_json("/workspace/mcp/tools/call", big);
  EXPECT_EQ(r.status, 413) << r.head;
  EXPECT_TRUE(r.is_error("payload_too_large")) << r.body;
  // A declared length far over the limit is refused before any body byte.
  r = raw_request(port_, "POST /workspace/mcp/tools/call HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_)
                           + "\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n",
                  10s);
  EXPECT_EQ(r.status, 413) << r.head;
  // Chunked: counted as it comes.
  auto chunked = [&](std::size_t total, std::size_t chunk) {
    std::string req = "POST /workspace/mcp/tools/call HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port_)
                      + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    char hex[32];
    std::snprintf(hex, sizeof hex, "%zx\r\n", chunk);
    std::string piece = hex + std::string(chunk, 'y') + "\r\n";
    for (std::size_t sent = 0; sent < total; sent += chunk)
      req += piece;
    return req + "0\r\n\r\n";
  };
  r = raw_request(port_, chunked(3 << 20, 64 << 10), 30s);
  EXPECT_EQ(r.status, 413) << r.head;
  // An endless chunked body is cut off (no hang, no growth).
  {
    int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    auto head = chunked(0, 1);
    head = with_daemon_token(port_, head.substr(0, head.find("\r\n\r\n") + 4));
    ASSERT_TRUE(send_all(fd, head));
    std::string piece = "10000\r\n" + std::string(0x10000, 'z') + "\r\n";
    auto t0 = clock_type::now();
    bool cut = false;
    while (clock_type::now() - t0 < 60s)
      if (!send_all(fd, piece)) {
        cut = true;
        break;
      }
    ::close(fd);
    EXPECT_TRUE(cut) << "an endless body was read for a minute";
  }
  // A body within the limit still works.
  ASSERT_TRUE(connected("echo"));
  r = post_json("/workspace/mcp/tools/call", json{{"server", "echo"}, {"tool", "echo"}, {"arguments", {{"text", std::string(500000, 'k')}}}}.dump());
  EXPECT_EQ(r.status, 200) << r.head;
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, deeply_nested_json_is_refused_before_a_tree_is_built) {
  start_logging();
  ASSERT_TRUE(connected("echo"));
  auto nested = [](std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  for (std::size_t depth : {65u, 1000u, 500000u}) {
    auto body = R"({"server":"echo","tool":"echo","arguments":{"text":"x","deep":)" + nested(depth) + "}}";
    auto r = post_json("/workspace/mcp/tools/call", body);
    EXPECT_EQ(r.status, 400) << depth << ": " << r.head;
    EXPECT_NE(r.body.find("nested deeper"), std::string::npos) << r.body;
  }
  for (auto target : {"/workspace/mcp/reload", "/workspace/mcp/echo/restart", "/workspace/mcp/project-tools/approve"}) {
    auto r = post_json(target, nested(200000));
    EXPECT_EQ(r.status, 400) << target;
  }
  auto ok = R"({"server":"echo","tool":"echo","arguments":{"text":"fine","deep":)" + nested(50) + "}}";
  auto r = post_json("/workspace/mcp/tools/call", ok);
  EXPECT_EQ(r.status, 200) << r.body;
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, header_count_and_size_are_bounded) {
  start_logging();
  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i)
    many.push_back("X-H" + std::to_string(i) + ": v");
  auto r = send("GET", "/healthz", many);
  EXPECT_EQ(r.status, 431) << r.head;
  r = send("GET", "/healthz", {"X-Big: " + std::string(40000, 'b')});
  EXPECT_EQ(r.status, 431) << r.head;
  r = send("GET", "/healthz?" + std::string(40000, 'q'));
  EXPECT_TRUE(r.status == 414 || r.status == 431) << r.head;
  std::vector<std::string> fine;
  for (int i = 0; i < 40; ++i)
    fine.push_back("X-H" + std::to_string(i) + ": v");
  EXPECT_EQ(send("GET", "/healthz", fine).status, 200);
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, a_client_that_trickles_its_request_is_cut_off_at_the_deadline) {
  start_logging({"--request-timeout-ms", "1500"});
  // One byte every 200 ms: each resets an idle timer, not the deadline.
  int fd = connect_to(port_);
  ASSERT_GE(fd, 0);
  auto req = http_text("GET", "/healthz", port_);
  auto t0 = clock_type::now();
  bool cut = false;
  for (std::size_t i = 0; i < req.size() - 4 && clock_type::now() - t0 < 30s; ++i) {
    if (!send_all(fd, req.substr(i, 1))) {
      cut = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) == 1) {
      char c;
      if (::recv(fd, &c, 1, MSG_PEEK) <= 0) {
        cut = true;
        break;
      }
    }
  }
  auto took = clock_type::now() - t0;
  ::close(fd);
  EXPECT_TRUE(cut) << "a trickling client kept its connection";
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 15s);
  // A client that connects and sends nothing is cut off as well.
  fd = connect_to(port_);
  ASSERT_GE(fd, 0);
  auto idle = read_reply(fd, 20s);
  EXPECT_TRUE(idle.closed) << "an idle connection stayed open";
  ::close(fd);
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, a_flood_of_slow_clients_does_not_lock_out_healthz_or_the_snapshot) {
  start_logging({"--max-connections", "16", "--max-streams", "4", "--request-timeout-ms", "60000"});
  // Far more connections than allowed, each stuck halfway through its head.
  std::vector<int> flood;
  for (int i = 0; i < 80; ++i) {
    int fd = connect_to(port_);
    if (fd < 0) continue;
    send_all(fd, "GET /healthz HTTP/1.1\r\nX-Slow: ");
    flood.push_back(fd);
  }
  for (int round = 0; round < 5; ++round) {
    auto t0 = clock_type::now();
    auto h = send("GET", "/healthz");
    EXPECT_EQ(h.status, 200) << "round " << round;
    auto s = send("GET", "/workspace/mcp");
    EXPECT_EQ(s.status, 200) << "round " << round;
    EXPECT_LT(clock_type::now() - t0, 10s) << "round " << round;
    // More of the flood arrives between the rounds.
    for (int i = 0; i < 16; ++i) {
      int fd = connect_to(port_);
      if (fd >= 0) {
        send_all(fd, "GET /healthz HTTP/1.1\r\nX-Slow: ");
        flood.push_back(fd);
      }
    }
  }
  // The oldest of the flood were closed to make room.
  int closed = 0;
  for (int fd : flood) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) ++closed;
    ::close(fd);
  }
  EXPECT_GT(closed, 40);
  expect_alive_and_log_clean();
}

TEST_F(hostile_http, hundreds_of_event_streams_leave_healthz_and_the_snapshot_answering) {
  // Keep-alives every second: a stream whose reader left is noticed then.
  start({"--max-streams", "200", "--max-connections", "400", "--sse-keepalive-ms", "1000"});
  ASSERT_TRUE(connected("echo"));
  std::vector<std::unique_ptr<sse_stream>> streams;
  for (int i = 0; i < 200; ++i) {
    streams.push_back(std::make_unique<sse_stream>(port_));
    ASSERT_EQ(streams.back()->status(), 200) << "stream " << i;
  }
  // One more is refused, clearly.
  sse_stream extra(port_);
  EXPECT_EQ(extra.status(), 503);
  auto t0 = clock_type::now();
  EXPECT_EQ(send("GET", "/healthz").status, 200);
  EXPECT_EQ(send("GET", "/workspace/mcp").status, 200);
  EXPECT_LT(clock_type::now() - t0, 10s);
  // An event reaches every stream.
  ASSERT_EQ(post_json("/workspace/mcp/echo/restart").status, 200);
  for (std::size_t i = 0; i < streams.size(); ++i)
    ASSERT_TRUE(streams[i]->wait_for("pool_entry_restarted")) << "stream " << i;
  // Streams whose readers left free their places: the daemon closes each
  // one it let go of, and a new stream then finds a place.
  auto deadline = clock_type::now() + 30s;
  for (std::size_t i = 100; i < streams.size(); ++i)
    streams[i]->hang_up();
  for (std::size_t i = 100; i < streams.size(); ++i)
    ASSERT_TRUE(streams[i]->closed_within(left_until(deadline))) << "stream " << i << " was never let go";
  streams.resize(100);
  sse_stream again(port_);
  EXPECT_EQ(again.status(), 200);
}

TEST_F(hostile_http, a_stream_whose_reader_left_frees_its_place_at_once) {
  // Keep-alives only every 15 s: the place must not wait for the next one.
  start({"--max-streams", "1"});
  for (int i = 0; i < 5; ++i) {
    sse_stream s(port_);
    ASSERT_EQ(s.status(), 200) << "round " << i << ": the last reader's place was held";
    auto t0 = clock_type::now();
    s.hang_up();
    EXPECT_TRUE(s.closed_within(10s)) << "round " << i << ": the daemon kept a stream whose reader left";
    EXPECT_LT(clock_type::now() - t0, 5s) << "round " << i << ": the daemon noticed the hang-up only late";
  }
}

TEST_F(hostile_http, every_kind_of_stream_counts_against_one_limit) {
  start({"--max-streams", "2"});
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  sse_stream legacy(port_, {}, 0, "/sse");
  ASSERT_EQ(legacy.status(), 200);
  // Full: no kind gets a third.
  sse_stream events2(port_);
  EXPECT_EQ(events2.status(), 503);
  sse_stream legacy2(port_, {}, 0, "/sse");
  EXPECT_EQ(legacy2.status(), 503);
  // A stream that ends gives its place to any kind.
  legacy.hang_up();
  EXPECT_TRUE(legacy.closed_within(10s));
  int status = 0;
  for (auto deadline = clock_type::now() + 10s; clock_type::now() < deadline && status != 200;) {
    sse_stream again(port_);
    status = again.status();
  }
  EXPECT_EQ(status, 200) << "the ended stream's place did not come back";
}

TEST_F(hostile_http, a_stuck_server_holds_no_thread_and_its_calls_are_bounded) {
  start_logging({"--max-calls-per-server", "40"});
  ASSERT_TRUE(connected("echo") && connected("calc"));
  auto threads_before = thread_count(daemon_->pid());
  ASSERT_GT(threads_before, 0);
  // 40 calls that take long: every one in flight, none with a thread.
  std::vector<int> waiting;
  auto sleep_call = http_text("POST", "/workspace/mcp/tools/call", port_, {"Content-Type: application/json"},
                              R"({"server":"echo","tool":"sleep","arguments":{"ms":60000}})");
  for (int i = 0; i < 40; ++i) {
    int fd = connect_to(port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, with_daemon_token(port_, sleep_call)));
    waiting.push_back(fd);
  }
  // The 41st is refused at once, naming the server (once all 40 are in).
  raw_reply r;
  auto deadline = clock_type::now() + 30s;
  while (clock_type::now() < deadline) {
    r = post_json("/workspace/mcp/tools/call", R"({"server":"echo","tool":"sleep","arguments":{"ms":0}})");
    if (r.status == 429) break;
  }
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_TRUE(r.is_error("too_many_calls")) << r.body;
  EXPECT_NE(r.body.find("echo"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_LE(thread_count(daemon_->pid()), threads_before + 3) << "calls in flight hold threads";
  // Everything else answers meanwhile.
  auto t0 = clock_type::now();
  EXPECT_EQ(send("GET", "/healthz").status, 200);
  EXPECT_EQ(send("GET", "/workspace/mcp").status, 200);
  auto calc = post_json("/workspace/mcp/tools/call", R"({"server":"calc","tool":"calc_add","arguments":{"a":2,"b":3}})");
  EXPECT_EQ(calc.status, 200) << calc.body;
  EXPECT_LT(clock_type::now() - t0, 10s);
  // Clients that give up free nothing on the server's side until it
  // answers, but the daemon stays healthy.
  for (int fd : waiting)
    ::close(fd);
  expect_alive_and_log_clean();
}

// -- who the client talks to ---------------------------------------------------------------------

/// A listener that records whether anyone connected and what arrived; it
/// answers like a daemon that echoes any instance.
class fake_daemon {
public:
  explicit fake_daemon(const std::string& addr = "127.0.0.1", int port = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int yes = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 16) == 0;
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_daemon() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }
  int connections() const { return connections_; }
  std::string received() {
    std::lock_guard<std::mutex> guard{mtx_};
    return received_;
  }

private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      std::string got;
      char buf[4096];
      pollfd q{c, POLLIN, 0};
      while (got.find("\r\n\r\n") == std::string::npos && ::poll(&q, 1, 2000) == 1) {
        auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, static_cast<std::size_t>(n));
      }
      {
        std::lock_guard<std::mutex> guard{mtx_};
        received_ += got;
      }
      std::string body = R"({"ok":true,"instance":"forged","servers":[]})";
      send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size())
                    + "\r\nConnection: close\r\n\r\n" + body);
      ::close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex mtx_;
  std::string received_;
  std::thread thread_;
};

class forged_daemon_file : public hostile_http {
protected:
  void SetUp() override {
    hostile_http::SetUp();
    token_ = root_ / "token";
    write_file(token_, "user-token-9f3a7c1e5b2d40\n");
    fs::permissions(token_, fs::perms::owner_read | fs::perms::owner_write);
  }

  void forge(const json& content) { write_file(ws_ / ".mcprt" / "daemon.json", content.dump()); }

  /// Every client command that sends the token, with the user's token file.
  std::vector<run_result> run_clients() const {
    std::vector<run_result> out;
    for (std::vector<std::string> args :
         {std::vector<std::string>{"status"}, {"restart", "echo"}, {"call", "echo", "echo", R"({"text":"x"})"}})
      out.push_back(cli(args_with_token(args)));
    return out;
  }

  std::vector<std::string> args_with_token(std::vector<std::string> args) const {
    args.push_back("--token-file");
    args.push_back(token_.string());
    return args;
  }

  fs::path token_;
};

TEST_F(forged_daemon_file, a_pid_that_is_not_an_mcprt_serve_gets_nothing) {
  fake_daemon fake;
  ASSERT_TRUE(fake.ok());
  // This test process, and a `sleep` of the user's: alive, but no daemon.
  pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (pid_t pid : {::getpid(), sleeper}) {
    forge({{"url", "http://127.0.0.1:" + std::to_string(fake.port())}, {"pid", pid}, {"instance", "forged"}});
    for (auto& r : run_clients()) {
      EXPECT_EQ(r.code, 1) << describe(r);
      EXPECT_NE(r.err.find("is not mcprt"), std::string::npos) << r.err;
    }
  }
  ::kill(sleeper, SIGKILL);
  ::waitpid(sleeper, nullptr, 0);
  // A pid that is gone: the file is stale, nobody runs.
  forge({{"url", "http://127.0.0.1:" + std::to_string(fake.port())}, {"pid", sleeper}, {"instance", "forged"}});
  auto r = cli(args_with_token({"status"}));
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("not running"), std::string::npos) << r.err;
  // approve writes the store itself instead.
  auto a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string(), "--token-file",
                  token_.string()});
  EXPECT_EQ(a.code, 0) << describe(a);
  EXPECT_TRUE(fs::exists(approvals_file()));
  EXPECT_EQ(fake.connections(), 0) << "a client connected to the forged URL:\n" << fake.received();
}

TEST_F(forged_daemon_file, a_real_daemons_pid_with_another_url_gets_nothing) {
  start();
  fake_daemon fake;
  ASSERT_TRUE(fake.ok());
  auto real = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"));
  forge({{"url", "http://127.0.0.1:" + std::to_string(fake.port())}, {"pid", daemon_->pid()},
         {"instance", real["instance"]}});
  for (auto& r : run_clients()) {
    EXPECT_EQ(r.code, 1) << describe(r);
    EXPECT_NE(r.err.find("listens on port " + std::to_string(fake.port())), std::string::npos) << r.err;
  }
  auto a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string(), "--token-file",
                  token_.string()});
  EXPECT_EQ(a.code, 0) << describe(a);
  EXPECT_NE(a.err.find("warning"), std::string::npos) << a.err;
  EXPECT_EQ(fake.connections(), 0) << "a client connected to the forged URL:\n" << fake.received();
}

TEST_F(forged_daemon_file, the_token_goes_to_the_daemons_own_socket_not_to_the_host_written) {
  start();
  // Same port, another loopback address: the file's host names the fake.
  fake_daemon fake("127.0.0.2", port_);
  ASSERT_TRUE(fake.ok()) << "cannot bind 127.0.0.2:" << port_;
  auto real = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"));
  real["url"] = "http://127.0.0.2:" + std::to_string(port_);
  forge(real);
  auto r = cli({"status"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(fake.connections(), 0) << fake.received();
}

TEST_F(forged_daemon_file, a_daemon_of_another_workspace_is_not_ours) {
  auto ws2 = root_ / "ws2";
  fs::create_directories(ws2);
  spawned other({"serve", "--workspace", ws2.string(), "--home", home_.string()}, home_);
  auto line = other.line(30s);
  ASSERT_TRUE(line) << other.err();
  auto theirs = json::parse(slurp(ws2 / ".mcprt" / "daemon.json"));
  forge(theirs);
  auto r = cli(args_with_token({"status"}));
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("serves another workspace"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(ws2.string()), std::string::npos);
}

TEST_F(forged_daemon_file, a_daemon_file_others_can_write_or_a_symlink_is_not_used) {
  start();
  auto file = ws_ / ".mcprt" / "daemon.json";
  fs::permissions(file, fs::perms::others_write, fs::perm_options::add);
  auto r = cli({"status"});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("others can write it"), std::string::npos) << r.err;
  fs::permissions(file, fs::perms::others_write | fs::perms::group_write, fs::perm_options::remove);
  EXPECT_EQ(cli({"status"}).code, 0);
  // A symlink to a good file is refused as well.
  auto copy = root_ / "elsewhere.json";
  fs::copy_file(file, copy);
  fs::remove(file);
  fs::create_symlink(copy, file);
  r = cli({"status"});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

TEST_F(forged_daemon_file, the_daemon_must_prove_the_instance_the_file_names) {
  start();
  auto real = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"));
  real["instance"] = "0000";
  forge(real);
  auto r = cli({"status"});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("instance id differs"), std::string::npos) << r.err;
  real.erase("instance");
  forge(real);
  r = cli({"status"});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("no instance id"), std::string::npos) << r.err;
}

TEST_F(forged_daemon_file, a_token_goes_to_an_explicit_url_only_from_a_command_the_owner_typed) {
  fake_daemon fake;
  ASSERT_TRUE(fake.ok());
  std::vector<std::string> args{"status", "--url", "http://127.0.0.1:" + std::to_string(fake.port()), "--token-file",
                                token_.string()};
  // From pipes, as an MCP client runs what a repository's .mcp.json wrote:
  // the listener is no daemon of the owner's, so it gets nothing at all.
  auto r = mcprt(args);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("not sending the token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not an `mcprt serve`"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("user-token-9f3a7c1e5b2d40"), std::string::npos) << r.err;
  EXPECT_EQ(fake.connections(), 0);
  // Typed at a terminal: the owner's own choice of where to send.
  auto typed = run_mcprt_at_terminal(args, home_);
  EXPECT_EQ(typed.code, 0) << typed.out;
  EXPECT_EQ(fake.connections(), 1);
  EXPECT_NE(fake.received().find("Authorization: Bearer user-token-9f3a7c1e5b2d40"), std::string::npos) << fake.received();
}

TEST_F(forged_daemon_file, a_token_goes_to_an_explicit_url_of_the_owners_own_daemon_from_any_command_line) {
  start();
  auto url = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"))["url"].get<std::string>();
  auto r = cli({"status", "--url", url, "--token-file", (home_ / ".mcprt" / "token").string()});
  EXPECT_EQ(r.code, 0) << describe(r);
}

TEST_F(forged_daemon_file, serve_replaces_a_stale_or_foreign_daemon_file) {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  for (auto content : {json{{"url", "http://127.0.0.1:9"}, {"pid", gone}, {"instance", "x"}},
                       json{{"url", "http://127.0.0.1:9"}, {"pid", ::getpid()}, {"instance", "x"}},
                       json("not an object"), json{{"url", 5}}}) {
    forge(content);
    start();
    auto now = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
    EXPECT_EQ(now.value("pid", 0), daemon_->pid()) << content.dump();
    EXPECT_EQ(cli({"status"}).code, 0);
    daemon_.reset();
  }
  // A URL that answers like a daemon does not make the file's pid one.
  {
    fake_daemon fake;
    ASSERT_TRUE(fake.ok());
    forge({{"url", "http://127.0.0.1:" + std::to_string(fake.port())}, {"pid", ::getpid()}, {"instance", "forged"}});
    start();
    EXPECT_EQ(json::parse(slurp(ws_ / ".mcprt" / "daemon.json")).value("pid", 0), daemon_->pid());
    daemon_.reset();
  }
  // Garbage bytes too.
  write_file(ws_ / ".mcprt" / "daemon.json", std::string("\xff\x00{[", 4));
  start();
  EXPECT_EQ(json::parse(slurp(ws_ / ".mcprt" / "daemon.json")).value("pid", 0), daemon_->pid());
}

// -- token files -------------------------------------------------------------------------------------

TEST_F(hostile_http, a_token_file_others_can_read_is_refused) {
  auto token = root_ / "token";
  write_file(token, "tok-6a1f0c9e2d4b8a7c5e3f01\n");
  for (auto mode : {fs::perms(0644), fs::perms(0640), fs::perms(0604), fs::perms(0660)}) {
    fs::permissions(token, mode);
    auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--token-file", token.string()});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
    auto c = cli({"status", "--token-file", token.string(), "--url", "http://127.0.0.1:9"});
    EXPECT_EQ(c.code, 1) << describe(c);
    EXPECT_NE(c.err.find("chmod 600"), std::string::npos) << c.err;
  }
  fs::permissions(token, fs::perms(0600));
  if (::geteuid() == 0) {
    // Owned by someone else: refused even at 0600.
    ASSERT_EQ(::chown(token.c_str(), 65534, 65534), 0);
    auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--token-file", token.string()});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("not to you"), std::string::npos) << r.err;
    ASSERT_EQ(::chown(token.c_str(), 0, 0), 0);
  }
  // A FIFO or a directory is refused without blocking.
  auto fifo = root_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (auto bad : {fifo, root_}) {
    auto t0 = clock_type::now();
    auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--token-file", bad.string()});
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_LT(clock_type::now() - t0, 10s);
  }
  // 0600 and ours: accepted.
  start({"--token-file", token.string()});
  EXPECT_EQ(cli({"status", "--token-file", token.string()}).code, 0);
}

} // namespace
} // namespace mcprt_cli_test
