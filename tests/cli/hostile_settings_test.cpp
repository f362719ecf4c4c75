// Settings files are input from whoever wrote the repository (issue 13,
// section 2). Black-box tests against the real daemon: `mcprt serve` on a
// temp workspace, real mcprt-test-server children, inotify on real files,
// events read over HTTP. Every wait is on a condition (a stdout line, an
// event, a snapshot field, a process exit) with a deadline.

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

const std::string test_server = MCPRT_TEST_SERVER;
const std::string secret = "sekrit-7c1f-hunter2";

std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()));
}

/// `mcprt serve` as a child: its first stdout line read, its stderr kept in
/// a file, its exit awaited on a pidfd.
class daemon_process {
public:
  daemon_process(const std::vector<std::string>& args, const fs::path& home, const fs::path& stderr_file) {
    std::vector<std::string> argv_s{MCPRT_BIN};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      auto key = kv.substr(0, kv.find('='));
      if (key != "HOME" && key.rfind("MCPRT_", 0) != 0) env_s.push_back(kv);
    }
    env_s.push_back("HOME=" + home.string());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err < 0) throw std::runtime_error("open " + stderr_file.string());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err, 2);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err);
    out_fd_ = out[0];
  }

  ~daemon_process() {
    if (!code_) {
      ::kill(pid_, SIGKILL);
      wait_exit(10s);
    }
    ::close(out_fd_);
  }

  /// The first stdout line, or nullopt at EOF / deadline.
  std::optional<std::string> first_line(std::chrono::milliseconds timeout) {
    auto deadline = clock_type::now() + timeout;
    std::string buf;
    for (;;) {
      if (auto nl = buf.find('\n'); nl != std::string::npos) return buf.substr(0, nl);
      pollfd p{out_fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left_until(deadline).count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return std::nullopt;
      char chunk[4096];
      ssize_t n = ::read(out_fd_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf.append(chunk, static_cast<size_t>(n));
    }
  }

  /// The exit code (128 + signal when killed), or nullopt at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (code_) return code_;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      ::close(fd);
      if (ready != 1) return std::nullopt;
    }
    int status = 0;
    if (::waitpid(pid_, &status, fd >= 0 ? 0 : WNOHANG) != pid_) return std::nullopt;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return code_;
  }

  void signal(int sig) { ::kill(pid_, sig); }

private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::optional<int> code_;
};

struct sse_event {
  std::string id, kind, data;
  json j() const { return json::parse(data, nullptr, false); }
};

/// The daemon's event stream, read over a raw socket: from its first event
/// on (Last-Event-ID: 0 replays the ring) or, without `replay`, from now.
class event_stream {
public:
  explicit event_stream(int port, bool replay = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string req = "GET /workspace/mcp/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port)
                      + "\r\nAccept: text/event-stream\r\n" + (replay ? "Last-Event-ID: 0\r\n" : "") + "\r\n";
    ok_ = ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  ~event_stream() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// The next event (comments skipped), or nullopt at EOF / deadline;
  /// every event read lands in `log`.
  std::optional<sse_event> next(std::chrono::milliseconds timeout) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      auto end = body_.find("\n\n");
      if (end == std::string::npos) {
        if (!fill(deadline)) return std::nullopt;
        continue;
      }
      std::string frame = body_.substr(0, end);
      body_.erase(0, end + 2);
      sse_event ev;
      std::istringstream in(frame);
      std::string l;
      while (std::getline(in, l)) {
        if (l.rfind("id: ", 0) == 0) ev.id = l.substr(4);
        else if (l.rfind("event: ", 0) == 0) ev.kind = l.substr(7);
        else if (l.rfind("data: ", 0) == 0) ev.data += l.substr(6);
      }
      if (ev.kind.empty()) continue;
      log.push_back(ev);
      return ev;
    }
  }

  /// The next event of `kind` whose data satisfies `pred`.
  std::optional<sse_event> wait_for(const std::string& kind, const std::function<bool(const json&)>& pred = {},
                                    std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    while (auto ev = next(left_until(deadline)))
      if (ev->kind == kind && (!pred || pred(ev->j()))) return ev;
    return std::nullopt;
  }

  std::vector<sse_event> log;

private:
  bool fill(clock_type::time_point deadline) {
    if (!ok_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left_until(deadline).count())) <= 0) return false;
    char buf[8192];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    raw_.append(buf, static_cast<size_t>(n));
    if (!headers_done_) {
      auto end = raw_.find("\r\n\r\n");
      if (end == std::string::npos) return true;
      chunked_ = raw_.substr(0, end).find("chunked") != std::string::npos;
      raw_.erase(0, end + 4);
      headers_done_ = true;
    }
    if (!chunked_) {
      body_ += raw_;
      raw_.clear();
      return true;
    }
    for (;;) {
      auto crlf = raw_.find("\r\n");
      if (crlf == std::string::npos) break;
      auto size = std::strtoul(raw_.substr(0, crlf).c_str(), nullptr, 16);
      if (raw_.size() < crlf + 2 + size + 2) break;
      body_ += raw_.substr(crlf + 2, size);
      raw_.erase(0, crlf + 2 + size + 2);
    }
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
  bool headers_done_ = false;
  bool chunked_ = false;
  std::string raw_, body_;
};

json test_server_config(const std::string& prefix) {
  return {{"command", test_server}, {"args", {"--name-prefix", prefix}}};
}

class hostile_settings_test : public cli_test {
protected:
  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config("echo_")}}}}.dump(2));
  }

  void TearDown() override {
    if (daemon_) {
      // A sanitizer report in the daemon fails the test even when it is
      // killed afterwards.
      auto err = daemon_err();
      EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
      EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
    }
    daemon_.reset();
    cli_test::TearDown();
  }

  /// Starts the daemon and reads its `listening on` line.
  void start() {
    daemon_ = std::make_unique<daemon_process>(std::vector<std::string>{"serve", "--workspace", ws_.string(), "--home",
                                                                        home_.string(), "--debounce-ms", "50"},
                                               home_, root_ / "daemon.err");
    auto first = daemon_->first_line(60s);
    ASSERT_TRUE(first) << "no first line; stderr:\n" << daemon_err();
    const std::string prefix = "listening on http://";
    ASSERT_EQ(first->rfind(prefix, 0), 0u) << *first;
    port_ = std::stoi(first->substr(first->rfind(':') + 1));
  }

  std::string daemon_err() const { return slurp(root_ / "daemon.err"); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    c.set_connection_timeout(10, 0);
    return c;
  }

  json get_json(const std::string& path) const {
    auto r = client().Get(path.c_str());
    if (!r || r->status != 200) return json(nullptr);
    return json::parse(r->body, nullptr, false);
  }

  bool healthy() const {
    auto h = get_json("/healthz");
    return h.is_object() && h.value("ok", false);
  }

  /// The snapshot's entry for `name`; an empty object while there is none.
  json server(const std::string& name) const {
    auto s = get_json("/workspace/mcp");
    const json* x = find_server(s, name);
    return x ? *x : json::object();
  }

  bool pending(const std::string& name) const {
    return wait_until([&] { return server(name).value("reason", "") == "pending_approval"; });
  }

  /// Waits until `pred` holds, re-checking on every event (every change the
  /// tests wait for comes with one).
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) const {
    auto deadline = clock_type::now() + timeout;
    // Subscribed before the first check: no change slips in between.
    event_stream events(port_, /*replay=*/false);
    for (;;) {
      if (pred()) return true;
      if (clock_type::now() >= deadline) return false;
      // A change that comes without an event is still seen within 500 ms.
      events.next(std::min<std::chrono::milliseconds>(left_until(deadline), 500ms));
    }
  }

  bool connected(const std::string& name) const {
    return wait_until([&] { return server(name).value("status", "") == "connected"; });
  }

  /// The next settings_error for `file` (events from the daemon's start on).
  std::optional<json> settings_error_for(const fs::path& file, std::chrono::milliseconds timeout = 30s) {
    event_stream events(port_);
    auto ev = events.wait_for("settings_error", [&](const json& d) { return d.value("path", "") == file.string(); },
                              timeout);
    if (!ev) return std::nullopt;
    return ev->j();
  }

  /// Edits user settings (adding a server named `marker`) and waits for its
  /// settings_changed: every event of earlier saves has been seen by then,
  /// in order, in `events.log`.
  bool mark(event_stream& events, const std::string& marker) {
    auto settings = json::parse(slurp(user_settings()));
    settings["mcpServers"][marker] = test_server_config(marker + "_");
    write_file(user_settings(), settings.dump(2));
    return events
      .wait_for("settings_changed",
                [&](const json& d) {
                  for (auto& c : d.value("changes", json::array()))
                    for (auto& k : c.value("keys", json::array()))
                      if (k.get<std::string>().find(marker) != std::string::npos) return true;
                  return false;
                })
      .has_value();
  }

  /// SIGTERM, then the daemon must be gone within `within`.
  void expect_prompt_stop(std::chrono::milliseconds within = 20s) {
    daemon_->signal(SIGTERM);
    auto code = daemon_->wait_exit(within);
    ASSERT_TRUE(code) << "SIGTERM did not stop the daemon; stderr:\n" << daemon_err();
    EXPECT_EQ(*code, 0) << daemon_err();
  }

  std::unique_ptr<daemon_process> daemon_;
  int port_ = 0;
};

/// A save as editors do it: a temp file renamed over the target.
void rename_save(const fs::path& p, const std::string& text) {
  auto tmp = p;
  tmp += ".tmp";
  write_file(tmp, text);
  fs::rename(tmp, p);
}

// -- invalid UTF-8 ------------------------------------------------------------------------------

TEST_F(hostile_settings_test, a_latin1_byte_at_start_is_an_error_with_its_position) {
  write_file(project_file(), "{\n  \"mcpServers\": {\"caf\xE9\": {\"command\": \"x\"}}\n}\n");
  ASSERT_NO_FATAL_FAILURE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_EQ((*err)["line"], 2);
  EXPECT_EQ((*err)["column"], 22);
  EXPECT_NE(err->value("message", "").find("UTF-8"), std::string::npos) << err->dump();
  EXPECT_TRUE(connected("echo")) << get_json("/workspace/mcp").dump(2);
  // explain reads the same file: an error with its position, not an abort.
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u);
  EXPECT_EQ(r.j["errors"][0]["line"], 2);
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_NE(table.out.find(".mcp.json:2:22: "), std::string::npos) << table.out;
}

TEST_F(hostile_settings_test, a_latin1_byte_on_a_hot_edit_keeps_the_daemon_and_a_later_save_applies) {
  write_file(project_file(), json{{"mcpServers", {{"p1", test_server_config("p1_")}}}}.dump(2));
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(connected("echo"));
  ASSERT_TRUE(pending("p1")) << get_json("/workspace/mcp").dump(2);
  rename_save(project_file(), "{\"mcpServers\": {\"p1\": {\"command\": \"x\"}, \"caf\xE9\": {}}}");
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_EQ((*err)["line"], 1);
  EXPECT_EQ((*err)["column"], 45);
  EXPECT_TRUE(healthy());
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval"); // the last good config
  // The watcher is alive: a good save applies.
  rename_save(project_file(),
              json{{"mcpServers", {{"p1", test_server_config("p1_")}, {"p2", test_server_config("p2_")}}}}.dump(2));
  EXPECT_TRUE(pending("p2")) << get_json("/workspace/mcp").dump(2);
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

// -- depth ------------------------------------------------------------------------------------------

TEST_F(hostile_settings_test, deep_nesting_at_start_is_an_error_not_a_stack_overflow) {
  write_file(project_file(), "{\"mcpServers\": {\"p\": {\"x\": " + std::string(2'000'000, '[')
                               + std::string(2'000'000, ']') + "}}}");
  ASSERT_NO_FATAL_FAILURE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_NE(err->value("message", "").find("nested deeper than 64"), std::string::npos) << err->dump();
  EXPECT_EQ((*err)["line"], 1);
  EXPECT_TRUE(connected("echo"));
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json());
  EXPECT_EQ(server_names(r.j), std::vector<std::string>{"echo"});
}

// -- what a path can point at ---------------------------------------------------------------------

TEST_F(hostile_settings_test, a_fifo_at_start_neither_blocks_the_start_nor_the_stop) {
  ASSERT_EQ(::mkfifo(project_file().c_str(), 0600), 0);
  ASSERT_NO_FATAL_FAILURE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_NE(err->value("message", "").find("FIFO"), std::string::npos) << err->dump();
  EXPECT_EQ((*err)["line"], 0);
  EXPECT_TRUE(connected("echo"));
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_fifo_on_a_hot_edit_keeps_the_daemon_responsive_and_stoppable) {
  write_file(project_file(), json{{"mcpServers", {{"p1", test_server_config("p1_")}}}}.dump(2));
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(connected("echo"));
  auto fifo = ws_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::rename(fifo, project_file());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_NE(err->value("message", "").find("FIFO"), std::string::npos);
  EXPECT_TRUE(healthy());
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval"); // the last good config
  {
    // The watcher still reads the other files.
    event_stream events(port_);
    EXPECT_TRUE(mark(events, "after_fifo"));
  }
  EXPECT_TRUE(connected("after_fifo"));
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_symlink_to_dev_zero_is_not_read) {
  fs::create_symlink("/dev/zero", project_file());
  ASSERT_NO_FATAL_FAILURE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_NE(err->value("message", "").find("character device"), std::string::npos) << err->dump();
  EXPECT_TRUE(connected("echo"));
  // On a hot edit as well: a good file, then the device again.
  fs::remove(project_file());
  write_file(project_file(), json{{"mcpServers", {{"p1", test_server_config("p1_")}}}}.dump(2));
  ASSERT_TRUE(pending("p1"));
  auto tmp = ws_ / "zero";
  fs::create_symlink("/dev/zero", tmp);
  fs::rename(tmp, project_file());
  {
    event_stream events(port_);
    ASSERT_TRUE(mark(events, "after_zero"));
    int errors = 0;
    for (auto& ev : events.log)
      errors += ev.kind == "settings_error" && ev.j().value("path", "") == project_file().string();
    EXPECT_EQ(errors, 2);
  }
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval");
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_symlink_loop_on_a_hot_edit_keeps_the_servers_of_that_file_running) {
  write_file(project_file(), json{{"mcpServers", {{"project-tools", test_server_config("project_")}}}}.dump(2));
  auto approved = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(approved.code, 0) << describe(approved);
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(connected("project-tools")) << get_json("/workspace/mcp").dump(2);
  auto pid = server("project-tools")["pid"];
  ASSERT_TRUE(pid.is_number_integer());
  // .mcp.json -> loop.json -> .mcp.json
  auto loop = ws_ / "loop.json";
  fs::create_symlink(project_file(), loop);
  auto tmp = ws_ / "link.tmp";
  fs::create_symlink(loop, tmp);
  fs::rename(tmp, project_file());
  event_stream events(port_);
  ASSERT_TRUE(mark(events, "after_loop"));
  bool reported = false;
  for (auto& ev : events.log) {
    auto d = ev.j();
    if (ev.kind == "settings_error" && d.value("path", "") == project_file().string())
      reported = d.value("message", "").find("symbolic links") != std::string::npos;
    if (ev.kind == "settings_changed") {
      for (auto& c : d.value("changes", json::array()))
        EXPECT_NE(c.value("path", ""), project_file().string()) << "the loop changed .mcp.json's servers: " << d;
    }
  }
  EXPECT_TRUE(reported);
  ASSERT_TRUE(connected("after_loop"));
  auto still = server("project-tools");
  EXPECT_EQ(still.value("status", ""), "connected") << still;
  EXPECT_EQ(still["pid"], pid) << "project-tools was restarted or stopped";
}

// -- what is shown -------------------------------------------------------------------------------

TEST_F(hostile_settings_test, a_half_typed_secret_never_reaches_events_explain_or_the_log) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_TRUE(connected("echo"));
  auto half_typed = "{\n  \"mcpServers\": {\n    \"echo\": {\"command\": \"" + test_server
                    + "\", \"env\": {\"API_TOKEN\": \"" + secret + "\n";
  write_file(user_settings(), half_typed);
  auto err = settings_error_for(user_settings());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_EQ((*err)["line"], 3);
  EXPECT_EQ(err->dump().find("hunter2"), std::string::npos) << err->dump();
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_EQ(table.out.find("hunter2"), std::string::npos) << table.out;
  EXPECT_EQ(table.err.find("hunter2"), std::string::npos) << table.err;
  auto js = explain();
  EXPECT_EQ(js.code, 2);
  EXPECT_EQ(js.out.find("hunter2"), std::string::npos) << js.out;
  // The whole event history and the daemon's log.
  event_stream events(port_);
  ASSERT_TRUE(events.wait_for("settings_error"));
  for (auto& ev : events.log)
    EXPECT_EQ(ev.data.find("hunter2"), std::string::npos) << ev.data;
  EXPECT_EQ(get_json("/workspace/mcp").dump().find("hunter2"), std::string::npos);
  EXPECT_EQ(daemon_err().find("hunter2"), std::string::npos) << daemon_err();
  EXPECT_TRUE(connected("echo")); // the last good config stays
}

TEST_F(hostile_settings_test, control_characters_in_server_names_are_refused_and_never_shown_raw) {
  // Valid JSON: the escapes are decoded into ESC and a line break.
  write_file(project_file(), R"({
  "mcpServers": {
    "\u001b[2J\u001b[H": {"command": "x"},
    "a\nINFO forged line": {"command": "x"}
  }
})");
  write_file(workspace_settings(), R"({"mcp": {"excluded": ["\u001b]0;title\u0007", "b\nWARN forged"]}})");
  ASSERT_NO_FATAL_FAILURE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_err();
  EXPECT_EQ((*err)["line"], 3);
  auto message = err->value("message", "");
  EXPECT_NE(message.find("printable"), std::string::npos) << message;
  for (char c : message)
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << message;
  EXPECT_TRUE(connected("echo"));
  auto snapshot = get_json("/workspace/mcp");
  EXPECT_EQ(server_names(snapshot), std::vector<std::string>{"echo"});
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_EQ(table.out.find('\x1b'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find('\x07'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\nINFO forged"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\nWARN forged"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\\x1b]0;title\\x07"), std::string::npos) << table.out; // shown, escaped
  auto js = explain();
  ASSERT_TRUE(js.has_json()) << describe(js);
  EXPECT_EQ(js.j["gating"]["excluded"][1], "b\nWARN forged"); // JSON carries it exactly
  auto log = daemon_err();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(log.find("\nINFO forged"), std::string::npos) << log;
}

} // namespace
} // namespace mcprt_cli_test
