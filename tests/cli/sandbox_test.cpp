// Black-box tests of the sandbox (docs/sandbox.md): a hostile server that
// arrives with the workspace (.mcp.json) and is approved tries what such a
// server would, and the test confirms on the host that nothing happened:
// files unchanged, listeners never reached, the daemon unsignalled. Then
// the controls: the workspace can be read and written, real npm servers
// work sandboxed, and the owner's settings decide what a repository's
// cannot. The cases that matter run as the user the suite runs as and, when
// that is root, again as nobody (setpriv, with a home of its own).

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/cli/daemon_test_util.hpp"
#include "tests/support/wait_for.hpp"

namespace mcprt_cli_test {
namespace {

/// A listener on loopback (TCP) or an abstract unix socket that counts the
/// connections it accepts, on a thread of its own.
class counting_listener {
public:
  explicit counting_listener(const std::string& abstract_name = "") {
    if (abstract_name.empty()) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
      socklen_t len = sizeof a;
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    } else {
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path + 1, abstract_name.data(), abstract_name.size());
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_name.size()));
    }
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0) {
          int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c >= 0) {
            ::close(c);
            std::lock_guard<std::mutex> guard{mtx_};
            ++accepted_;
            grew_.notify_all();
          }
        }
      }
    });
  }
  ~counting_listener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() {
    std::lock_guard<std::mutex> guard{mtx_};
    return accepted_;
  }
  bool wait_accepted(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock{mtx_};
    return grew_.wait_for(lock, timeout, [&] { return accepted_ >= n; });
  }

private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mtx_;
  std::condition_variable grew_;
  int accepted_ = 0;
  std::thread thread_;
};

struct attack_result {
  bool answered = false;
  bool ok = false;
  std::string detail;
};

std::string random_name() {
  return "mcprt-sandbox-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand());
}

class sandbox_test : public bare_daemon_test {
protected:
  void SetUp() override {
    bare_daemon_test::SetUp();
    fs::create_directories(home_ / ".ssh");
    write_file(home_ / ".ssh" / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- sandbox-test\n");
    write_file(home_ / ".bashrc", "# the owner's\n");
    write_file(ws_ / "notes.txt", "workspace text\n");
  }

  void TearDown() override {
    stop();
    bare_daemon_test::TearDown();
  }

  /// Makes everything of the test nobody's, for a daemon run as nobody.
  void hand_to_nobody() {
    auto* pw = ::getpwnam("nobody");
    ASSERT_NE(pw, nullptr);
    for (auto& e : fs::recursive_directory_iterator(root_))
      ASSERT_EQ(::lchown(e.path().c_str(), pw->pw_uid, pw->pw_gid), 0) << e.path();
    ASSERT_EQ(::chown(root_.c_str(), pw->pw_uid, pw->pw_gid), 0);
  }

  /// The daemon as nobody: setpriv execs it in place, so the pid the test
  /// holds is the daemon's.
  bool start_as_nobody(const std::map<std::string, std::string>& env = {}) {
    return start({}, env, {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"});
  }

  void write_project_server(const json& extra = json::object()) {
    json entry = test_server_config({"--hostile"});
    for (auto& [k, v] : extra.items())
      entry[k] = v;
    write_file(project_file(), json{{"mcpServers", {{"evil", entry}}}}.dump(2));
  }

  attack_result attack(const std::string& server, json args) {
    attack_result out;
    auto r = post("/workspace/mcp/tools/call",
                  json{{"server", server}, {"tool", "attack"}, {"arguments", std::move(args)}}.dump());
    if (!r || r->status != 200) {
      out.detail = r ? r->body : "no answer";
      return out;
    }
    auto body = json::parse(r->body, nullptr, false);
    auto& content = body.contains("content") ? body["content"] : body["result"]["content"];
    if (!content.is_array() || content.empty()) {
      out.detail = r->body;
      return out;
    }
    auto inner = json::parse(content[0].value("text", ""), nullptr, false);
    out.answered = inner.is_object();
    out.ok = inner.value("ok", false);
    out.detail = inner.value("detail", "");
    return out;
  }

  json sandbox_of(const std::string& name) const { return server(name).value("sandbox", json(nullptr)); }

  /// Every attack of a hostile server fails, and the host shows it; the
  /// workspace stays the server's to read and write.
  void every_attack_fails() {
    auto id_rsa = slurp(home_ / ".ssh" / "id_rsa");
    auto token = slurp(home_ / ".mcprt" / "token");
    auto bashrc = slurp(home_ / ".bashrc");
    counting_listener tcp;
    auto abstract_name = random_name();
    counting_listener abstract(abstract_name);
    auto daemon_pid = daemon_->pid();

    auto expect_refused = [&](const json& args, const std::string& what) {
      auto r = attack("evil", args);
      EXPECT_TRUE(r.answered) << what << ": " << r.detail;
      EXPECT_FALSE(r.ok) << what << " worked: " << r.detail;
    };
    expect_refused({{"kind", "read"}, {"target", (home_ / ".ssh" / "id_rsa").string()}}, "reading ~/.ssh/id_rsa");
    expect_refused({{"kind", "read"}, {"target", (home_ / ".mcprt" / "token").string()}}, "reading the daemon's token");
    expect_refused({{"kind", "write"}, {"target", (home_ / ".bashrc").string()}}, "appending to ~/.bashrc");
    auto in_tmp = fs::temp_directory_path() / (random_name() + ".txt");
    expect_refused({{"kind", "write"}, {"target", in_tmp.string()}}, "writing to /tmp");
    expect_refused({{"kind", "tcp"}, {"port", tcp.port()}}, "connecting to the owner's loopback listener");
    expect_refused({{"kind", "abstract"}, {"target", abstract_name}}, "connecting to an abstract unix socket");
    expect_refused({{"kind", "signal"}, {"pid", daemon_pid}, {"signal", SIGTERM}}, "signalling the daemon");
    expect_refused({{"kind", "environ"}, {"pid", daemon_pid}}, "reading the daemon's environ");
    expect_refused({{"kind", "ptrace"}, {"pid", daemon_pid}}, "attaching to the daemon");
    expect_refused({{"kind", "fork"}, {"count", 400}}, "forking 400 processes");

    // The host's side: nothing changed, nothing was reached.
    EXPECT_EQ(slurp(home_ / ".ssh" / "id_rsa"), id_rsa);
    EXPECT_EQ(slurp(home_ / ".mcprt" / "token"), token);
    EXPECT_EQ(slurp(home_ / ".bashrc"), bashrc);
    EXPECT_FALSE(fs::exists(in_tmp));
    EXPECT_EQ(tcp.accepted(), 0);
    EXPECT_EQ(abstract.accepted(), 0);
    EXPECT_EQ(::kill(daemon_pid, 0), 0) << "the daemon is gone";

    // Its environment: the safe names, nothing of the daemon's shell.
    auto env = attack("evil", {{"kind", "env"}});
    ASSERT_TRUE(env.ok) << env.detail;
    for (const char* secret : {"MCPRT_TOKEN", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY"})
      EXPECT_EQ(env.detail.find(std::string("\"") + secret + "\""), std::string::npos) << env.detail;
    EXPECT_NE(env.detail.find("\"PATH\""), std::string::npos) << env.detail;

    // The controls: the workspace is the server's.
    auto read = attack("evil", {{"kind", "read"}, {"target", (ws_ / "notes.txt").string()}});
    EXPECT_TRUE(read.ok) << read.detail;
    EXPECT_EQ(read.detail, "workspace text\n");
    auto wrote = attack("evil", {{"kind", "write"}, {"target", (ws_ / "out.txt").string()}, {"line", "made here\n"}});
    EXPECT_TRUE(wrote.ok) << wrote.detail;
    EXPECT_EQ(slurp(ws_ / "out.txt"), "made here\n");
    // A private TMPDIR that can be written, and is gone with the server.
    auto tmp = attack("evil", {{"kind", "tmpdir"}});
    ASSERT_TRUE(tmp.ok);
    EXPECT_NE(tmp.detail, fs::temp_directory_path().string());
    auto in_private = attack("evil", {{"kind", "write"}, {"target", tmp.detail + "/scratch"}});
    EXPECT_TRUE(in_private.ok) << in_private.detail;

    auto sb = sandbox_of("evil");
    ASSERT_TRUE(sb.is_object()) << server("evil").dump();
    for (const char* p : {"secrets-hidden", "writes-confined", "network-isolated", "pid-namespace",
                          "syscall-filter", "no-new-privileges", "process-cap"})
      EXPECT_NE(std::find(sb["inForce"].begin(), sb["inForce"].end(), p), sb["inForce"].end()) << p << sb.dump();
  }
};

const std::map<std::string, std::string> shell_secrets = {{"MCPRT_TOKEN", "tok-from-the-shell"},
                                                          {"AWS_SECRET_ACCESS_KEY", "aws-secret"},
                                                          {"GITHUB_TOKEN", "gh-secret"},
                                                          {"OPENAI_API_KEY", "openai-secret"}};

TEST_F(sandbox_test, every_attack_of_an_approved_project_server_fails) {
  write_project_server();
  ASSERT_EQ(decide("approve", "evil").code, 0);
  ASSERT_TRUE(start({}, shell_secrets));
  ASSERT_TRUE(connected("evil", 60s)) << server("evil").dump() << daemon_->err();
  every_attack_fails();
}

TEST_F(sandbox_test, every_attack_fails_for_a_daemon_of_another_user) {
  if (::geteuid() != 0) GTEST_SKIP() << "the suite already runs unprivileged";
  write_project_server();
  ASSERT_EQ(decide("approve", "evil").code, 0);
  // The daemon makes its token file; the approvals file is the owner's.
  hand_to_nobody();
  ASSERT_TRUE(start_as_nobody(shell_secrets));
  ASSERT_TRUE(connected("evil", 60s)) << server("evil").dump() << daemon_->err();
  every_attack_fails();
}

TEST_F(sandbox_test, a_repository_cannot_switch_its_sandbox_off_and_the_owner_can) {
  write_project_server({{"sandbox", false}, {"inheritEnv", true}});
  ASSERT_EQ(decide("approve", "evil").code, 0);
  ASSERT_TRUE(start({}, shell_secrets));
  ASSERT_TRUE(connected("evil", 60s)) << server("evil").dump();
  auto sb = sandbox_of("evil");
  ASSERT_TRUE(sb.is_object()) << server("evil").dump();
  auto notes = sb["policy"]["notes"].dump();
  EXPECT_NE(notes.find("\\\"sandbox\\\": false is not honoured"), std::string::npos) << notes;
  EXPECT_NE(notes.find("inheritEnv"), std::string::npos) << notes;
  EXPECT_FALSE(attack("evil", {{"kind", "read"}, {"target", (home_ / ".ssh" / "id_rsa").string()}}).ok);
  auto env = attack("evil", {{"kind", "env"}});
  EXPECT_EQ(env.detail.find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << env.detail;

  // The owner widens this one server in user settings: it runs as written.
  write_file(user_settings(), json{{"mcp", {{"sandboxFor", {{"evil", false}}}}}}.dump(2));
  ASSERT_TRUE(wait_until([&] { return server("evil").value("status", "") == "connected" && sandbox_of("evil").is_null(); },
                         60s))
    << server("evil").dump();
  auto read = attack("evil", {{"kind", "read"}, {"target", (home_ / ".ssh" / "id_rsa").string()}});
  EXPECT_TRUE(read.ok) << read.detail;
}

TEST_F(sandbox_test, a_user_server_runs_as_written_and_may_opt_in_to_the_sandbox_and_variables) {
  json plain = test_server_config({"--hostile"});
  plain["inheritEnv"] = json::array({"AWS_SECRET_ACCESS_KEY"});
  json boxed = test_server_config({"--hostile"});
  boxed["sandbox"] = true;
  write_file(user_settings(), json{{"mcpServers", {{"plain", plain}, {"boxed", boxed}}}}.dump(2));
  ASSERT_TRUE(start({}, shell_secrets));
  ASSERT_TRUE(connected("plain", 60s));
  ASSERT_TRUE(connected("boxed", 60s));
  EXPECT_TRUE(sandbox_of("plain").is_null());
  EXPECT_TRUE(sandbox_of("boxed").is_object());
  // Unsandboxed, yet only the safe environment and what it asked for.
  auto env = attack("plain", {{"kind", "env"}});
  EXPECT_NE(env.detail.find("\"AWS_SECRET_ACCESS_KEY\""), std::string::npos) << env.detail;
  EXPECT_EQ(env.detail.find("\"GITHUB_TOKEN\""), std::string::npos) << env.detail;
  EXPECT_EQ(env.detail.find("\"MCPRT_TOKEN\""), std::string::npos) << env.detail;
  EXPECT_TRUE(attack("plain", {{"kind", "read"}, {"target", (home_ / ".ssh" / "id_rsa").string()}}).ok);
  EXPECT_FALSE(attack("boxed", {{"kind", "read"}, {"target", (home_ / ".ssh" / "id_rsa").string()}}).ok);
}

class egress_test : public sandbox_test, public ::testing::WithParamInterface<bool> {};

TEST_P(egress_test, egress_reaches_only_the_allowed_destination) {
  bool as_nobody = GetParam();
  if (as_nobody && ::geteuid() != 0) GTEST_SKIP() << "the suite already runs unprivileged";
  counting_listener allowed, refused;
  json entry = test_server_config({"--hostile"});
  entry["sandbox"] = {{"network", json::array({"127.0.0.1:" + std::to_string(allowed.port())})}};
  write_file(user_settings(), json{{"mcpServers", {{"net", entry}}}}.dump(2));
  if (as_nobody) {
    hand_to_nobody();
    ASSERT_TRUE(start_as_nobody());
  } else {
    ASSERT_TRUE(start());
  }
  ASSERT_TRUE(connected("net", 60s)) << server("net").dump() << daemon_->err();
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  auto ok = attack("net", {{"kind", "proxy"}, {"target", "127.0.0.1:" + std::to_string(allowed.port())}});
  EXPECT_TRUE(ok.ok) << ok.detail;
  auto no = attack("net", {{"kind", "proxy"}, {"target", "127.0.0.1:" + std::to_string(refused.port())}});
  EXPECT_FALSE(no.ok);
  EXPECT_NE(no.detail.find("403"), std::string::npos) << no.detail;
  // Straight out, without the proxy: nothing.
  EXPECT_FALSE(attack("net", {{"kind", "tcp"}, {"port", refused.port()}}).ok);
  EXPECT_TRUE(allowed.wait_accepted(1, 10s)) << allowed.accepted();
  EXPECT_EQ(refused.accepted(), 0);
  bool seen = false;
  auto deadline = clock_type::now() + 20s;
  while (!seen && clock_type::now() < deadline) {
    auto ev = events.next(left_until(deadline));
    if (!ev) break;
    if (ev->kind == "egress_refused") {
      auto j = ev->j();
      seen = j.value("server", "") == "net" && j.value("port", 0) == refused.port();
    }
  }
  EXPECT_TRUE(seen) << "no egress_refused event for the refused port";
  auto sb = sandbox_of("net");
  EXPECT_NE(std::find(sb["inForce"].begin(), sb["inForce"].end(), "egress-allow-list"), sb["inForce"].end()) << sb.dump();
}

INSTANTIATE_TEST_SUITE_P(owner, egress_test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "nobody" : "suite_user"; });

TEST_F(sandbox_test, a_sandbox_the_owner_requires_runs_when_this_machine_has_it_all) {
  json entry = test_server_config({"--hostile"});
  entry["sandbox"] = "required";
  write_file(user_settings(), json{{"mcpServers", {{"strict", entry}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("strict", 60s)) << server("strict").dump() << daemon_->err();
  EXPECT_EQ(sandbox_of("strict")["policy"]["required"], true);
}

TEST_F(sandbox_test, real_npm_servers_work_sandboxed) {
  const fs::path peers = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/@modelcontextprotocol";
  for (const char* p : {"server-everything", "server-filesystem", "server-memory"})
    if (!fs::exists(peers / p / "dist/index.js")) GTEST_SKIP() << p << " is not installed (scripts/setup.sh)";
  auto node = [&](const char* pkg, std::vector<std::string> args) {
    json e = {{"command", "node"}, {"args", json::array({(peers / pkg / "dist/index.js").string()})}};
    for (auto& a : args)
      e["args"].push_back(a);
    return e;
  };
  json memory = node("server-memory", {});
  memory["env"] = {{"MEMORY_FILE_PATH", (ws_ / "memory.json").string()}};
  write_file(project_file(), json{{"mcpServers",
                                   {{"everything", node("server-everything", {})},
                                    {"fs", node("server-filesystem", {ws_.string()})},
                                    {"memory", memory}}}}
                               .dump(2));
  for (const char* n : {"everything", "fs", "memory"})
    ASSERT_EQ(decide("approve", n).code, 0) << n;
  ASSERT_TRUE(start());
  for (const char* n : {"everything", "fs", "memory"}) {
    ASSERT_TRUE(connected(n, 90s)) << n << ": " << server(n).dump() << daemon_->err();
    EXPECT_TRUE(sandbox_of(n).is_object()) << n;
  }
  auto call = [&](const std::string& srv, const std::string& tool, const json& args) {
    auto r = post("/workspace/mcp/tools/call", json{{"server", srv}, {"tool", tool}, {"arguments", args}}.dump());
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string("no answer"));
  };
  auto echo = call("everything", "echo", {{"message", "from the sandbox"}});
  EXPECT_EQ(echo.first, 200) << echo.second;
  EXPECT_NE(echo.second.find("from the sandbox"), std::string::npos) << echo.second;
  auto wrote = call("fs", "write_file", {{"path", (ws_ / "made.txt").string()}, {"content", "by server-filesystem"}});
  EXPECT_EQ(wrote.first, 200) << wrote.second;
  EXPECT_EQ(slurp(ws_ / "made.txt"), "by server-filesystem");
  auto read = call("fs", "read_text_file", {{"path", (ws_ / "notes.txt").string()}});
  EXPECT_NE(read.second.find("workspace text"), std::string::npos) << read.second;
  auto made = call("memory", "create_entities",
                   {{"entities", json::array({{{"name", "sandbox"}, {"entityType", "test"}, {"observations", json::array()}}})}});
  EXPECT_EQ(made.first, 200) << made.second;
  auto graph = call("memory", "read_graph", json::object());
  EXPECT_NE(graph.second.find("sandbox"), std::string::npos) << graph.second;
  EXPECT_TRUE(fs::exists(ws_ / "memory.json"));
}

} // namespace
} // namespace mcprt_cli_test
