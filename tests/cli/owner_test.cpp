// Black-box: only the person who started the daemon commands it. Every
// door of the real daemon asks for the owner's bearer token, loopback
// included; the owner's own commands find it with no extra step; another
// local user (uid nobody, run through setpriv when the suite runs as root)
// gets nowhere.

#include <sys/stat.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

class owner_test : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}.dump(2));
    write_file(project_file(),
               json{{"mcpServers", {{"project-tools", test_server_config({"--name-prefix", "project_"})}}}}.dump(2));
  }

  fs::path token_file() const { return home_ / ".mcprt" / "token"; }

  /// Every route of the daemon, as a stranger would send it.
  struct door {
    std::string method, target, body;
  };
  std::vector<door> doors() const {
    const std::string init =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}})";
    return {{"GET", "/healthz", ""},
            {"GET", "/workspace/mcp", ""},
            {"GET", "/workspace/mcp/events", ""},
            {"POST", "/workspace/mcp/tools/call", R"({"server":"echo","tool":"echo","arguments":{"text":"x"}})"},
            {"POST", "/workspace/mcp/calls/c1/cancel", ""},
            {"POST", "/workspace/mcp/project-tools/approve", ""},
            {"POST", "/workspace/mcp/project-tools/reject", ""},
            {"POST", "/workspace/mcp/echo/restart", ""},
            {"POST", "/workspace/mcp/echo/auth", ""},
            {"DELETE", "/workspace/mcp/echo/auth", ""},
            {"GET", "/workspace/mcp/echo/resources", ""},
            {"POST", "/workspace/mcp/echo/prompts/get", R"({"name":"p"})"},
            {"POST", "/workspace/mcp/elicitations/00112233445566778899aabbccddeeff", R"({"action":"decline"})"},
            {"POST", "/workspace/mcp/sampling/00112233445566778899aabbccddeeff", R"({"error":{"message":"no"}})"},
            {"POST", "/mcp", init},
            {"GET", "/mcp", ""},
            {"DELETE", "/mcp", ""},
            {"GET", "/sse", ""},
            {"POST", "/messages?sessionId=00112233445566778899aabbccddeeff", init}};
  }

  /// Runs the mcprt program as uid/gid 65534 (nobody) with its own HOME.
  run_result as_nobody(std::vector<std::string> args) const { return as_nobody_running(MCPRT_BIN, std::move(args)); }
  /// curl as nobody, as a stranger's own client.
  run_result as_nobody_curl(std::vector<std::string> args) const { return as_nobody_running("/usr/bin/curl", args); }
  run_result as_nobody_running(const std::string& program, std::vector<std::string> args) const {
    fs::path home = root_ / "nobody-home";
    fs::create_directories(home);
    if (::chown(home.c_str(), 65534, 65534) != 0) return {};
    std::vector<std::string> all{"--reuid=65534", "--regid=65534", "--clear-groups", program};
    all.insert(all.end(), args.begin(), args.end());
    spawned p(all, home, {}, "/usr/bin/setpriv");
    run_result r;
    std::string out;
    while (auto l = p.line(60s))
      out += *l + "\n";
    r.code = p.wait_exit(60s).value_or(-1);
    r.out = out;
    r.err = p.err();
    return r;
  }
};

TEST_F(owner_test, every_route_refuses_a_request_without_the_owners_token_and_does_nothing) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));
  ASSERT_EQ(server("project-tools").value("approval", ""), "pending");
  auto pid_before = server("echo").value("pid", json(nullptr));

  for (auto& d : doors()) {
    std::vector<std::string> headers{"Content-Type: application/json", "Accept: application/json, text/event-stream"};
    auto none = raw_request_as_is(port_, http_text(d.method, d.target, port_, headers, d.body));
    EXPECT_EQ(none.status, 401) << d.method << " " << d.target << ": " << none.head;
    EXPECT_NE(none.head.find("WWW-Authenticate: Bearer"), std::string::npos) << none.head;
    headers.push_back("Authorization: Bearer " + std::string(64, '0'));
    auto wrong = raw_request_as_is(port_, http_text(d.method, d.target, port_, headers, d.body));
    EXPECT_EQ(wrong.status, 401) << d.method << " " << d.target << ": " << wrong.head;
    // A token in another form (a cookie, a query parameter) is no token.
    auto cookie = raw_request_as_is(
      port_, http_text(d.method, d.target, port_, {"Content-Type: application/json", "Cookie: token=" + token_}, d.body));
    EXPECT_EQ(cookie.status, 401) << d.method << " " << d.target;
  }
  auto query = raw_request_as_is(port_, http_text("GET", "/workspace/mcp?token=" + token_, port_));
  EXPECT_EQ(query.status, 401);

  // Nothing happened: the project server is still pending and never ran,
  // the user server was not restarted.
  EXPECT_EQ(server("project-tools").value("approval", ""), "pending");
  EXPECT_TRUE(server("project-tools").value("pid", json(nullptr)).is_null());
  EXPECT_EQ(server("echo").value("pid", json(nullptr)), pid_before);
  // The owner's token opens every door.
  auto h = get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto approve = post("/workspace/mcp/project-tools/approve");
  ASSERT_TRUE(approve);
  EXPECT_EQ(approve->status, 200) << approve->body;
}

TEST_F(owner_test, the_owners_token_is_made_once_in_a_file_only_the_owner_can_read) {
  ASSERT_TRUE(start());
  struct stat st {};
  ASSERT_EQ(::lstat(token_file().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  auto token = slurp(token_file());
  ASSERT_EQ(token.size(), 65u) << token; // 256 bits as hex and a newline
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), 64u);
  // daemon.json names the file, never the token.
  auto record = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  EXPECT_EQ(record.value("token_file", ""), token_file().string()) << record.dump();
  EXPECT_EQ(record.dump().find(token.substr(0, 64)), std::string::npos);
  // The next daemon keeps it: a client configured by hand goes on working.
  stop();
  ASSERT_TRUE(start());
  EXPECT_EQ(slurp(token_file()), token);
  EXPECT_EQ(token_, token.substr(0, 64));
  auto s = get("/workspace/mcp");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
}

TEST_F(owner_test, the_owners_commands_find_the_token_with_no_extra_step) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));
  auto status = cli({"status"});
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find("echo"), std::string::npos) << status.out;
  auto call = cli({"call", "echo", "echo", R"({"text":"owner call"})"});
  EXPECT_EQ(call.code, 0) << call.err;
  EXPECT_NE(call.out.find("owner call"), std::string::npos) << call.out;
  auto approve = cli({"approve", "project-tools"});
  EXPECT_EQ(approve.code, 0) << approve.err;
  EXPECT_NE(approve.out.find("through the daemon"), std::string::npos) << approve.out;
  // An explicit --url is the user's own choice of where to send: the token
  // goes there only when named.
  auto bare = cli({"status", "--url", url_});
  EXPECT_NE(bare.code, 0);
  EXPECT_NE(bare.err.find("401"), std::string::npos) << bare.err;
  EXPECT_NE(bare.err.find(".mcprt/token"), std::string::npos) << bare.err;
  auto named = cli({"status", "--url", url_, "--token-file", token_file().string()});
  EXPECT_EQ(named.code, 0) << named.err;
}

TEST_F(owner_test, a_token_file_or_directory_others_can_reach_is_refused) {
  // Others can read the token: the daemon does not start with it.
  fs::create_directories(token_file().parent_path());
  write_file(token_file(), std::string(64, 'a') + "\n");
  ::chmod(token_file().c_str(), 0644);
  {
    spawned p({"serve", "--workspace", ws_.string(), "--home", home_.string()}, home_);
    EXPECT_EQ(p.wait_exit(30s), 1);
    EXPECT_NE(p.err().find("chmod 600"), std::string::npos) << p.err();
  }
  // Others can write the directory, so they could swap the file.
  ::chmod(token_file().c_str(), 0600);
  ::chmod(token_file().parent_path().c_str(), 0777);
  {
    spawned p({"serve", "--workspace", ws_.string(), "--home", home_.string()}, home_);
    EXPECT_EQ(p.wait_exit(30s), 1);
    EXPECT_NE(p.err().find("chmod go-w"), std::string::npos) << p.err();
  }
  ::chmod(token_file().parent_path().c_str(), 0755);
  // A token the owner put there by hand is used as it is.
  ASSERT_TRUE(start());
  EXPECT_EQ(token_, std::string(64, 'a'));
}

// A repository's gateway entry once named the owner's approvals store as
// the daemon's token file: its first line, `{`, became the token, and any
// local user who guessed it approved and ran the repository's server. No
// way in takes such a file now, and `Bearer {` opens no door.
TEST_F(owner_test, a_file_whose_first_line_is_no_secret_never_becomes_the_token) {
  write_file(approvals_file(), "{\n  \"version\": 1,\n  \"approvals\": []\n}\n");
  write_file(home_ / ".claude.json", "{\n  \"numStartups\": 3,\n  \"mcpServers\": {}\n}\n");
  for (auto& f : {approvals_file(), home_ / ".claude.json"}) {
    ::chmod(f.c_str(), 0600);
    auto gw = mcprt({"gateway", "--workspace", ".", "--token-file", f.string()}, ws_);
    EXPECT_EQ(gw.code, 2) << describe(gw);
    EXPECT_NE(gw.err.find("does not take --token-file"), std::string::npos) << gw.err;
    auto serve = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--token-file", f.string()});
    EXPECT_EQ(serve.code, 2) << describe(serve);
    EXPECT_NE(serve.err.find("openssl rand -hex 32"), std::string::npos) << serve.err;
    EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
  }
  ASSERT_TRUE(start());
  for (auto& d : doors()) {
    auto guessed = raw_request_as_is(
      port_, http_text(d.method, d.target, port_,
                       {"Content-Type: application/json", "Accept: application/json, text/event-stream",
                        "Authorization: Bearer {"},
                       d.body));
    EXPECT_EQ(guessed.status, 401) << d.method << " " << d.target << ": " << guessed.head;
  }
  EXPECT_EQ(server("project-tools").value("approval", ""), "pending");
  EXPECT_TRUE(server("project-tools").value("pid", json(nullptr)).is_null());
  if (::geteuid() == 0) {
    // The same from another uid, as the attack was made.
    for (auto& p : {root_, ws_, home_})
      fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec
                           | fs::perms::others_read | fs::perms::others_exec);
    auto approve = as_nobody_curl({"-s", "-o", "/dev/null", "-w", "%{http_code}\n", "-X", "POST", "-H",
                                   "Authorization: Bearer {", url_ + "/workspace/mcp/project-tools/approve"});
    EXPECT_EQ(approve.out, "401\n") << describe(approve);
    EXPECT_EQ(server("project-tools").value("approval", ""), "pending");
  }
}

TEST_F(owner_test, another_local_user_cannot_command_the_daemon) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a second uid (setpriv to nobody); the suite runs as uid "
                                     << ::geteuid();
  // Everything is reachable by path: only the token keeps the stranger out.
  for (auto& p : {root_, ws_, home_})
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read
                         | fs::perms::others_exec);
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));

  // The token file: not readable, whatever the stranger tries.
  auto named = as_nobody({"status", "--url", url_, "--token-file", token_file().string()});
  EXPECT_NE(named.code, 0);
  EXPECT_NE(named.err.find("Permission denied"), std::string::npos) << named.err;
  // Through the workspace: its .mcprt is the owner's alone (mode 0700), and
  // daemon.json too (0600) when the directory is opened up.
  auto found = as_nobody({"status", "--workspace", ws_.string()});
  EXPECT_NE(found.code, 0);
  EXPECT_EQ(found.out.find("echo"), std::string::npos) << found.out;
  fs::permissions(ws_ / ".mcprt", fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read
                                    | fs::perms::others_exec, fs::perm_options::add);
  found = as_nobody({"status", "--workspace", ws_.string()});
  EXPECT_NE(found.code, 0);
  EXPECT_NE(found.err.find("not using"), std::string::npos) << found.err;
  // Straight at the port: 401.
  auto bare = as_nobody({"status", "--url", url_});
  EXPECT_NE(bare.code, 0);
  EXPECT_NE(bare.err.find("401"), std::string::npos) << bare.err;
  as_nobody({"approve", "project-tools", "--workspace", ws_.string()});
  as_nobody({"restart", "echo", "--workspace", ws_.string()});
  as_nobody({"call", "echo", "echo", R"({"text":"x"})", "--workspace", ws_.string()});
  EXPECT_EQ(server("project-tools").value("approval", ""), "pending");
  EXPECT_TRUE(server("project-tools").value("pid", json(nullptr)).is_null());
  // Nor does the stranger's gateway reach the owner's servers.
  fs::path nobody_home = root_ / "nobody-home";
  std::vector<std::string> gw{"--reuid=65534", "--regid=65534", "--clear-groups", MCPRT_BIN,
                              "gateway",       "--workspace",   ws_.string()};
  spawned g(gw, nobody_home, {}, "/usr/bin/setpriv", true);
  g.write(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}})"
          "\n");
  g.close_stdin();
  std::string out;
  while (auto l = g.line(60s))
    out += *l + "\n";
  EXPECT_NE(g.wait_exit(60s).value_or(0), 0) << out << g.err();
  EXPECT_EQ(out.find("\"result\""), std::string::npos) << out;
  EXPECT_EQ(server("project-tools").value("approval", ""), "pending");
}

} // namespace
} // namespace mcprt_cli_test
