// Drives the real mcprt-test-server binary over pipes and HTTP.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto k_timeout = 5s;

int pidfd_open(pid_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// Waits until a process (not necessarily our child) has exited.
bool wait_process_gone(pid_t pid, steady::time_point deadline) {
  int fd = pidfd_open(pid);
  if (fd < 0) return errno == ESRCH;
  bool gone = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (n > 0) gone = true;
    if (n >= 0 || errno != EINTR) break;
  }
  close(fd);
  return gone;
}

// The server binary as a child process in its own process group, with all
// three standard streams on pipes. Every wait is deadline-bound.
class server_process {
public:
  explicit server_process(const std::vector<std::string>& args) {
    signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> all = {MCPRT_TEST_SERVER};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);

    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid_ < 0) throw std::runtime_error("fork failed");
    // Both sides set the group so killpg() works whichever runs first.
    setpgid(pid_, pid_);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    in_ = in[1];
    out_ = out[0];
    err_ = err[0];
    pidfd_ = pidfd_open(pid_);
  }

  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  ~server_process() {
    if (!status_) {
      killpg(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
    }
    for (int fd : {in_, out_, err_, pidfd_})
      if (fd >= 0) close(fd);
  }

  pid_t pid() const { return pid_; }

  void send_line(const std::string& line) {
    auto data = line + "\n";
    std::size_t off = 0;
    while (off < data.size()) {
      auto n = write(in_, data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }
  void send(const json& msg) { send_line(msg.dump()); }
  void notify(const std::string& method) { send({{"jsonrpc", "2.0"}, {"method", method}}); }

  void close_stdin() {
    close(in_);
    in_ = -1;
  }

  std::optional<std::string> read_line(std::chrono::milliseconds timeout = k_timeout) {
    auto deadline = steady::now() + timeout;
    pump(deadline, [&] { return out_buf_.find('\n') != std::string::npos; });
    auto nl = out_buf_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    auto line = out_buf_.substr(0, nl);
    out_buf_.erase(0, nl + 1);
    return line;
  }

  // Next stdout line that is JSON; anything else is filed under garbage.
  std::optional<json> read_message(std::chrono::milliseconds timeout = k_timeout) {
    auto deadline = steady::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      auto line = read_line(std::max(left, 0ms));
      if (!line) return std::nullopt;
      auto msg = json::parse(*line, nullptr, false);
      if (!msg.is_discarded()) return msg;
      garbage.push_back(*line);
    }
  }

  // First message (queued or new) that satisfies pred; the rest stay queued.
  std::optional<json> wait_message(const std::function<bool(const json&)>& pred,
                                   std::chrono::milliseconds timeout = k_timeout) {
    for (auto it = inbox.begin(); it != inbox.end(); ++it) {
      if (pred(*it)) {
        auto msg = *it;
        inbox.erase(it);
        return msg;
      }
    }
    auto deadline = steady::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      auto msg = read_message(std::max(left, 0ms));
      if (!msg) return std::nullopt;
      if (pred(*msg)) return msg;
      inbox.push_back(*msg);
    }
  }

  int send_request(const std::string& method, json params = json::object()) {
    int id = next_id_++;
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    return id;
  }

  json response_to(int id, std::chrono::milliseconds timeout = k_timeout) {
    auto msg = wait_message(
      [&](const json& m) { return m.contains("id") && m["id"] == id && !m.contains("method"); }, timeout);
    if (!msg) throw std::runtime_error("no response to request " + std::to_string(id));
    return *msg;
  }

  json request(const std::string& method, json params = json::object()) {
    return response_to(send_request(method, std::move(params)));
  }

  json call_tool(const std::string& name, json args = json::object()) {
    return request("tools/call", {{"name", name}, {"arguments", std::move(args)}});
  }

  json initialize(const std::string& version = "2025-11-25") {
    auto resp = request("initialize", {{"protocolVersion", version},
                                       {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}});
    notify("notifications/initialized");
    return resp;
  }

  bool wait_stderr(const std::string& needle, std::chrono::milliseconds timeout = k_timeout) {
    pump(steady::now() + timeout, [&] { return err_buf_.find(needle) != std::string::npos; });
    return err_buf_.find(needle) != std::string::npos;
  }

  const std::string& stderr_text() const { return err_buf_; }

  // Raw waitpid status, or nullopt if still running at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = k_timeout) {
    pump(steady::now() + timeout, [&] { return try_reap(); });
    try_reap();
    return status_;
  }

  bool running() { return !try_reap(); }

  // True once stdout is at EOF (the server closed it or exited).
  bool wait_stdout_eof(std::chrono::milliseconds timeout = k_timeout) {
    pump(steady::now() + timeout, [&] { return out_eof_; });
    return out_eof_;
  }

  std::vector<std::string> garbage;
  std::deque<json> inbox;

private:
  bool try_reap() {
    if (status_) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    return status_.has_value();
  }

  // Drains stdout and stderr (so the server never blocks on a full pipe)
  // until done() holds or the deadline passes. A past deadline still takes
  // whatever is already readable.
  void pump(steady::time_point deadline, const std::function<bool()>& done) {
    while (!done()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
      pollfd fds[3] = {{out_eof_ ? -1 : out_, POLLIN, 0},
                       {err_eof_ ? -1 : err_, POLLIN, 0},
                       {exit_seen_ ? -1 : pidfd_, POLLIN, 0}};
      if (fds[0].fd < 0 && fds[1].fd < 0 && fds[2].fd < 0) return;
      int n = poll(fds, 3, static_cast<int>(std::max<long long>(left.count(), 0)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      if (fds[2].revents) exit_seen_ = true;
      read_into(fds[0], out_buf_, out_eof_);
      read_into(fds[1], err_buf_, err_eof_);
    }
  }

  static void read_into(const pollfd& p, std::string& buf, bool& eof) {
    if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
    char chunk[65536];
    auto n = read(p.fd, chunk, sizeof chunk);
    if (n > 0) buf.append(chunk, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) eof = true;
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1, pidfd_ = -1;
  bool out_eof_ = false, err_eof_ = false, exit_seen_ = false;
  std::string out_buf_, err_buf_;
  std::optional<int> status_;
  int next_id_ = 1;
};

std::string text_of(const json& response) {
  return response.at("result").at("content").at(0).at("text").get<std::string>();
}

int exit_code(const std::optional<int>& status) {
  if (!status || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

// ---------------------------------------------------------------- stdio

class negotiation : public ::testing::TestWithParam<std::string> {};

TEST_P(negotiation, echoes_supported_revision) {
  server_process server({});
  auto resp = server.initialize(GetParam());
  EXPECT_EQ(resp["result"]["protocolVersion"], GetParam());
}

INSTANTIATE_TEST_SUITE_P(initialize, negotiation,
                         ::testing::Values("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"));

TEST(initialize, unknown_revision_falls_back_to_latest) {
  server_process server({});
  auto resp = server.initialize("1999-01-01");
  auto& result = resp["result"];
  EXPECT_EQ(result["protocolVersion"], "2025-11-25");
  EXPECT_EQ(result["serverInfo"], (json{{"name", "mcprt-test-server"}, {"version", "0.1.0"}}));
  EXPECT_EQ(result["capabilities"]["tools"]["listChanged"], true);
  EXPECT_FALSE(result["capabilities"].contains("prompts"));
}

TEST(initialize, advertises_prompts_only_when_there_are_some) {
  server_process server({"--prompts", "2"});
  auto resp = server.initialize();
  EXPECT_EQ(resp["result"]["capabilities"]["prompts"]["listChanged"], true);
}

TEST(lifecycle, exits_zero_on_stdin_eof) {
  server_process server({});
  server.initialize();
  server.close_stdin();
  EXPECT_EQ(exit_code(server.wait_exit()), 0);
}

TEST(lifecycle, answers_in_flight_calls_after_stdin_eof) {
  server_process server({});
  int id = server.send_request("tools/call", {{"name", "sleep"}, {"arguments", {{"ms", 100}}}});
  server.close_stdin();
  EXPECT_EQ(text_of(server.response_to(id)), "slept 100");
  EXPECT_EQ(exit_code(server.wait_exit()), 0);
}

TEST(protocol, unknown_method_and_malformed_json) {
  server_process server({});
  server.initialize();
  auto resp = server.request("no/such/method");
  EXPECT_EQ(resp["error"]["code"], -32601);

  server.send_line("{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": ");
  auto err = server.wait_message([](const json& m) { return m.contains("error"); });
  ASSERT_TRUE(err);
  EXPECT_EQ((*err)["error"]["code"], -32700);
  EXPECT_TRUE((*err)["id"].is_null());
  EXPECT_EQ(server.request("ping")["result"], json::object());
}

TEST(tools, list_paginates_builtins_plus_numbered) {
  server_process server({"--tools", "120", "--page-size", "50"});
  server.initialize();
  std::set<std::string> names;
  int pages = 0;
  json params = json::object();
  for (;;) {
    auto resp = server.request("tools/list", params);
    ++pages;
    ASSERT_LE(resp["result"]["tools"].size(), 50u);
    for (auto& tool : resp["result"]["tools"]) {
      EXPECT_TRUE(tool["inputSchema"].is_object());
      names.insert(tool["name"].get<std::string>());
    }
    if (!resp["result"].contains("nextCursor")) break;
    params = {{"cursor", resp["result"]["nextCursor"]}};
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names.size(), 124u);
  for (auto* n : {"echo", "add", "sleep", "pid", "tool_1", "tool_120"})
    EXPECT_EQ(names.count(n), 1u) << n;
}

TEST(tools, bogus_cursor_is_invalid_params) {
  server_process server({});
  server.initialize();
  auto resp = server.request("tools/list", {{"cursor", "not-a-cursor"}});
  EXPECT_EQ(resp["error"]["code"], -32602);
}

TEST(tools, echo_add_pid) {
  server_process server({});
  server.initialize();
  EXPECT_EQ(text_of(server.call_tool("echo", {{"text", "hello"}})), "hello");
  EXPECT_EQ(text_of(server.call_tool("add", {{"a", 2}, {"b", 40}})), "42");
  EXPECT_EQ(text_of(server.call_tool("add", {{"a", 1.5}, {"b", 1}})), "2.5");
  EXPECT_EQ(text_of(server.call_tool("pid")), std::to_string(server.pid()));
  auto bad = server.call_tool("add", {{"a", "x"}, {"b", 1}});
  EXPECT_EQ(bad["result"]["isError"], true);
}

TEST(tools, numbered_tool_echoes_arguments) {
  server_process server({"--tools", "3"});
  server.initialize();
  json args = {{"k", 1}, {"list", {1, 2}}};
  EXPECT_EQ(json::parse(text_of(server.call_tool("tool_3", args))), args);
  EXPECT_EQ(server.call_tool("tool_4")["error"]["code"], -32602);
}

TEST(tools, unknown_tool_is_invalid_params) {
  server_process server({});
  server.initialize();
  auto resp = server.call_tool("nope");
  EXPECT_EQ(resp["error"]["code"], -32602);
}

TEST(tools, name_prefix_applies_to_every_tool) {
  server_process server({"--tools", "2", "--name-prefix", "v2_"});
  server.initialize();
  auto list = server.request("tools/list");
  for (auto& tool : list["result"]["tools"])
    EXPECT_EQ(tool["name"].get<std::string>().rfind("v2_", 0), 0u) << tool["name"];
  EXPECT_EQ(list["result"]["tools"].size(), 6u);
  EXPECT_EQ(text_of(server.call_tool("v2_echo", {{"text", "hi"}})), "hi");
  EXPECT_EQ(server.call_tool("echo", {{"text", "hi"}})["error"]["code"], -32602);
  EXPECT_EQ(server.call_tool("v2_tool_2")["result"]["content"][0]["text"], "{}");
}

TEST(tools, sleep_does_not_block_other_requests) {
  server_process server({});
  server.initialize();
  int slow = server.send_request("tools/call", {{"name", "sleep"}, {"arguments", {{"ms", 500}}}});
  int fast = server.send_request("ping");
  // The ping must overtake the sleep.
  auto first = server.wait_message([](const json& m) { return m.contains("id"); });
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["id"], fast);
  EXPECT_EQ(text_of(server.response_to(slow)), "slept 500");
}

TEST(prompts, list_and_get) {
  server_process server({"--prompts", "3", "--page-size", "2"});
  server.initialize();
  auto page1 = server.request("prompts/list");
  ASSERT_EQ(page1["result"]["prompts"].size(), 2u);
  ASSERT_TRUE(page1["result"].contains("nextCursor"));
  auto page2 = server.request("prompts/list", {{"cursor", page1["result"]["nextCursor"]}});
  ASSERT_EQ(page2["result"]["prompts"].size(), 1u);
  EXPECT_EQ(page2["result"]["prompts"][0]["name"], "prompt_3");
  EXPECT_FALSE(page2["result"].contains("nextCursor"));

  auto got = server.request("prompts/get", {{"name", "prompt_2"}, {"arguments", {{"topic", "cats"}}}});
  EXPECT_EQ(got["result"]["messages"][0]["content"]["text"], "Prompt 2 about cats");
  EXPECT_EQ(server.request("prompts/get", {{"name", "prompt_4"}})["error"]["code"], -32602);
}

TEST(prompts, method_not_found_without_prompts) {
  server_process server({});
  server.initialize();
  EXPECT_EQ(server.request("prompts/list")["error"]["code"], -32601);
}

// ---------------------------------------------------------------- faults

TEST(faults, exit_on_initialize) {
  server_process server({"--exit-on-initialize"});
  server.send_request("initialize", {{"protocolVersion", "2025-11-25"}});
  EXPECT_EQ(exit_code(server.wait_exit()), 4);
  EXPECT_TRUE(server.wait_stderr("--exit-on-initialize"));
  EXPECT_FALSE(server.read_message(0ms));
}

TEST(faults, crash_after_ms) {
  server_process server({"--crash-after-ms", "200"});
  EXPECT_EQ(exit_code(server.wait_exit()), 3);
  EXPECT_TRUE(server.wait_stderr("--crash-after-ms"));
}

TEST(faults, hang_on_initialize_still_answers_ping) {
  server_process server({"--hang-on-initialize"});
  int init = server.send_request("initialize", {{"protocolVersion", "2025-11-25"}});
  EXPECT_EQ(server.request("ping")["result"], json::object());
  // The initialize response would have come before the ping's.
  EXPECT_TRUE(server.inbox.empty());
  EXPECT_FALSE(server.wait_message([&](const json& m) { return m.value("id", json()) == init; }, 0ms));
}

TEST(faults, startup_delay) {
  auto start = steady::now();
  server_process server({"--startup-delay-ms", "300"});
  server.initialize();
  EXPECT_GE(steady::now() - start, 300ms);
}

TEST(faults, garbage_lines_around_parseable_responses) {
  server_process server({"--garbage", "--tools", "1"});
  auto init = server.initialize();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-11-25");
  auto list = server.request("tools/list");
  EXPECT_EQ(list["result"]["tools"].size(), 5u);
  EXPECT_GE(server.garbage.size(), 5u);
  bool plain = false, huge = false;
  for (auto& line : server.garbage) {
    plain = plain || line == "this is not json";
    huge = huge || line.size() >= 200000;
  }
  EXPECT_TRUE(plain);
  EXPECT_TRUE(huge);
}

TEST(faults, stderr_lines) {
  server_process server({"--stderr-lines", "5"});
  ASSERT_TRUE(server.wait_stderr("stderr line 5\n"));
  for (int i = 1; i <= 5; ++i)
    EXPECT_NE(server.stderr_text().find("stderr line " + std::to_string(i) + "\n"), std::string::npos);
}

// -- hostile output (--invalid-utf8) -------------------------------------------

TEST(faults, invalid_utf8_in_every_place_asked_for) {
  const std::string bad = "caf\xe9 \xff\xfe \xe2\x82";
  server_process server({"--invalid-utf8", "stdout,stderr,result,description,server-info"});
  auto first = server.read_line();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "not json: " + bad);
  ASSERT_TRUE(server.wait_stderr(bad));
  // Messages carrying the bytes are not JSON to a strict parser: read raw.
  server.send({{"jsonrpc", "2.0"},
               {"id", 1},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", "2025-11-25"},
                 {"capabilities", json::object()},
                 {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}}}});
  auto init = server.read_line();
  ASSERT_TRUE(init);
  EXPECT_NE(init->find("\"name\":\"mcprt-test-server " + bad + "\""), std::string::npos) << *init;
  server.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
  auto list = server.read_line();
  ASSERT_TRUE(list);
  EXPECT_NE(list->find("Returns the given text. " + bad), std::string::npos) << *list;
  server.send({{"jsonrpc", "2.0"},
               {"id", 3},
               {"method", "tools/call"},
               {"params", {{"name", "echo"}, {"arguments", {{"text", "hi"}}}}}});
  auto call = server.read_line();
  ASSERT_TRUE(call);
  EXPECT_NE(call->find("\"text\":\"hi " + bad + "\""), std::string::npos) << *call;
}

TEST(faults, invalid_utf8_rejects_unknown_places) {
  server_process server({"--invalid-utf8", "result,elsewhere"});
  EXPECT_EQ(exit_code(server.wait_exit()), 2);
}

TEST(faults, list_changed_after_ms) {
  server_process server({"--list-changed-after-ms", "100", "--name-prefix", "p_"});
  server.initialize();
  auto note =
    server.wait_message([](const json& m) { return m.value("method", "") == "notifications/tools/list_changed"; });
  ASSERT_TRUE(note);
  EXPECT_FALSE(note->contains("id"));
  auto list = server.request("tools/list");
  EXPECT_EQ(list["result"]["tools"].back()["name"], "p_late_tool");
  EXPECT_EQ(server.call_tool("p_late_tool")["result"]["content"][0]["text"], "late_tool called");
}

TEST(faults, ping_client_after_ms) {
  server_process server({"--ping-client-after-ms", "50"});
  server.initialize();
  auto ping = server.wait_message([](const json& m) { return m.value("method", "") == "ping"; });
  ASSERT_TRUE(ping);
  server.send({{"jsonrpc", "2.0"}, {"id", (*ping)["id"]}, {"result", json::object()}});
  EXPECT_TRUE(server.wait_stderr("ping answered with result: {}"));
}

TEST(faults, request_sampling_logs_client_error) {
  server_process server({"--request-sampling"});
  server.initialize();
  auto req = server.wait_message([](const json& m) { return m.value("method", "") == "sampling/createMessage"; });
  ASSERT_TRUE(req);
  ASSERT_TRUE((*req)["id"].is_string());
  server.send(
    {{"jsonrpc", "2.0"}, {"id", (*req)["id"]}, {"error", {{"code", -32601}, {"message", "Method not found"}}}});
  EXPECT_TRUE(server.wait_stderr("sampling/createMessage answered with error: "));
  EXPECT_NE(server.stderr_text().find("-32601"), std::string::npos);
}

bool ignores_sigterm(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigIgn:", 0) == 0) {
      auto mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (SIGTERM - 1)) & 1;
    }
  }
  return false;
}

TEST(faults, ignore_sigterm_needs_sigkill) {
  server_process server({"--ignore-sigterm"});
  server.initialize();
  ASSERT_TRUE(ignores_sigterm(server.pid()));
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  EXPECT_EQ(server.request("ping")["result"], json::object());
  server.close_stdin();
  ASSERT_TRUE(server.wait_stderr("stdin closed, staying alive"));
  EXPECT_TRUE(server.running());
  ASSERT_EQ(kill(server.pid(), SIGKILL), 0);
  auto status = server.wait_exit();
  ASSERT_TRUE(status);
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
}

TEST(faults, spawn_child_dies_with_the_group) {
  server_process server({"--spawn-child"});
  ASSERT_TRUE(server.wait_stderr("child pid "));
  server.initialize(); // by now the whole line is in
  std::smatch m;
  auto text = server.stderr_text();
  ASSERT_TRUE(std::regex_search(text, m, std::regex("child pid (\\d+)\n")));
  pid_t child = std::stoi(m[1]);
  ASSERT_EQ(kill(child, 0), 0);
  EXPECT_EQ(getpgid(child), server.pid());

  ASSERT_EQ(killpg(server.pid(), SIGKILL), 0);
  EXPECT_TRUE(server.wait_exit());
  EXPECT_TRUE(wait_process_gone(child, steady::now() + k_timeout));
}

// ---- containment faults: descendants that try to escape, a silent server

std::map<std::string, pid_t> read_pid_file(const std::string& path) {
  std::map<std::string, pid_t> out;
  std::ifstream in(path);
  std::string kind;
  pid_t pid;
  while (in >> kind >> pid)
    out[kind] = pid;
  return out;
}

pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  char state;
  int ppid = -1;
  std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid);
  return ppid;
}

TEST(faults, grandchildren_are_recorded_and_placed_as_asked) {
  char dir[] = "/tmp/mcprt-pidfile-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string file = std::string(dir) + "/pids";
  std::map<std::string, pid_t> pids;
  {
    server_process server(
      {"--pid-file", file, "--grandchild-in-group", "--grandchild-setsid", "--grandchild-daemon"});
    server.initialize(); // every line is written before stdin is read
    pids = read_pid_file(file);
    ASSERT_EQ(pids.size(), 4u);
    EXPECT_EQ(pids["server"], server.pid());
    EXPECT_EQ(getpgid(pids["group"]), server.pid());
    EXPECT_EQ(parent_of(pids["group"]), server.pid());
    EXPECT_EQ(getsid(pids["setsid"]), pids["setsid"]);
    EXPECT_EQ(parent_of(pids["setsid"]), server.pid());
    EXPECT_EQ(getsid(pids["daemon"]), getpgid(pids["daemon"]));
    EXPECT_NE(getsid(pids["daemon"]), getsid(server.pid()));
    EXPECT_NE(parent_of(pids["daemon"]), server.pid()) << "the daemon is an orphan while the server runs";
  }
  // The server's group went with it; the other two are ours to end.
  EXPECT_TRUE(wait_process_gone(pids["group"], steady::now() + k_timeout));
  for (auto kind : {"setsid", "daemon"}) {
    EXPECT_EQ(kill(pids[kind], 0), 0) << kind << " escaped the group kill, as it should in this test";
    kill(pids[kind], SIGKILL);
    EXPECT_TRUE(wait_process_gone(pids[kind], steady::now() + k_timeout));
  }
  unlink(file.c_str());
  rmdir(dir);
}

TEST(faults, close_stdout_after_ms_closes_it_after_tools_list_and_keeps_running) {
  server_process server({"--close-stdout-after-ms", "50"});
  server.initialize();
  auto tools = server.request("tools/list");
  ASSERT_TRUE(tools.contains("result"));
  ASSERT_TRUE(server.wait_stdout_eof()) << "stdout still open";
  ASSERT_TRUE(server.wait_stderr("closed stdout, still running"));
  EXPECT_TRUE(server.running());
  server.send_request("ping"); // still reading, no crash on the closed stdout
  EXPECT_FALSE(server.wait_exit(200ms));
}

TEST(cli, version_and_help) {
  server_process version({"--version"});
  EXPECT_EQ(version.read_line(), "mcprt-test-server 0.1.0");
  EXPECT_EQ(exit_code(version.wait_exit()), 0);

  server_process help({"--help"});
  EXPECT_EQ(exit_code(help.wait_exit()), 0);
  std::string text;
  while (auto line = help.read_line())
    text += *line + "\n";
  for (auto* flag : {"--http",
                     "--sse-responses",
                     "--tools",
                     "--prompts",
                     "--page-size",
                     "--name-prefix",
                     "--startup-delay-ms",
                     "--crash-after-ms",
                     "--exit-on-initialize",
                     "--hang-on-initialize",
                     "--garbage",
                     "--list-changed-after-ms",
                     "--stderr-lines",
                     "--ignore-sigterm",
                     "--spawn-child",
                     "--ping-client-after-ms",
                     "--request-sampling",
                     "--conformance",
                     "--pid-file",
                     "--grandchild-in-group",
                     "--grandchild-setsid",
                     "--grandchild-daemon",
                     "--close-stdout-after-ms",
                     "--oauth",
                     "--oauth-scope",
                     "--oauth-token-ttl-s",
                     "--oauth-revoke-file",
                     "--oauth-log",
                     "--oauth-metadata",
                     "--oauth-resource-metadata",
                     "--oauth-metadata-file",
                     "--oauth-redirect-iss",
                     "--oauth-register-hang",
                     "--version",
                     "--help"})
    EXPECT_NE(text.find(flag), std::string::npos) << flag;

  server_process bad({"--tools", "many"});
  EXPECT_EQ(exit_code(bad.wait_exit()), 2);
}

// ---------------------------------------------------------------- HTTP

class http_server {
public:
  explicit http_server(std::vector<std::string> extra = {}) : process_(with_http(extra)) {
    auto line = process_.read_line();
    std::smatch m;
    static const std::regex listening("listening on http://127\\.0\\.0\\.1:(\\d+)/mcp");
    if (!line || !std::regex_match(*line, m, listening)) throw std::runtime_error("no listening line");
    port = std::stoi(m[1]);
    client = std::make_unique<httplib::Client>("127.0.0.1", port);
    client->set_connection_timeout(2);
    client->set_read_timeout(5);
  }

  httplib::Result post(const json& body, const std::optional<std::string>& session = std::nullopt) {
    httplib::Headers headers = {{"Accept", "application/json, text/event-stream"}};
    if (session) headers.emplace("Mcp-Session-Id", *session);
    return client->Post("/mcp", headers, body.dump(), "application/json");
  }

  httplib::Result initialize() {
    return post({{"jsonrpc", "2.0"},
                 {"id", 1},
                 {"method", "initialize"},
                 {"params",
                  {{"protocolVersion", "2025-06-18"},
                   {"capabilities", json::object()},
                   {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}}}});
  }

  server_process& process() { return process_; }

  int port = 0;
  std::unique_ptr<httplib::Client> client;

private:
  static std::vector<std::string> with_http(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--http", "0"});
    return extra;
  }
  server_process process_;
};

json request_body(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

TEST(http, session_lifecycle) {
  http_server server;
  auto init = server.initialize();
  ASSERT_TRUE(init);
  ASSERT_EQ(init->status, 200);
  EXPECT_EQ(init->get_header_value("Content-Type"), "application/json");
  auto session = init->get_header_value("Mcp-Session-Id");
  ASSERT_FALSE(session.empty());
  EXPECT_EQ(json::parse(init->body)["result"]["protocolVersion"], "2025-06-18");

  auto note = server.post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);
  ASSERT_TRUE(note);
  EXPECT_EQ(note->status, 202);
  EXPECT_TRUE(note->body.empty());

  auto list = server.post(request_body(2, "tools/list"), session);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  EXPECT_EQ(json::parse(list->body)["result"]["tools"].size(), 4u);

  auto missing = server.post(request_body(3, "tools/list"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  auto unknown = server.post(request_body(4, "tools/list"), "not-a-session");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);

  auto del = server.client->Delete("/mcp", {{"Mcp-Session-Id", session}});
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  auto after = server.post(request_body(5, "tools/list"), session);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 404);
  auto del_again = server.client->Delete("/mcp", {{"Mcp-Session-Id", session}});
  ASSERT_TRUE(del_again);
  EXPECT_EQ(del_again->status, 404);
}

TEST(http, sse_responses) {
  http_server server({"--sse-responses"});
  auto init = server.initialize();
  ASSERT_TRUE(init);
  ASSERT_EQ(init->status, 200);
  EXPECT_EQ(init->get_header_value("Content-Type"), "text/event-stream");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(init->body, m, std::regex("^event: message\ndata: (.*)\n\n$"))) << init->body;
  EXPECT_EQ(json::parse(m[1].str())["result"]["protocolVersion"], "2025-06-18");
}

TEST(http, list_changed_on_get_stream) {
  http_server server({"--list-changed-after-ms", "50"});
  auto init = server.initialize();
  ASSERT_TRUE(init);
  auto session = init->get_header_value("Mcp-Session-Id");
  server.post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);

  std::string stream;
  auto res = server.client->Get("/mcp", {{"Mcp-Session-Id", session}, {"Accept", "text/event-stream"}},
                                [&](const char* data, std::size_t len) {
                                  stream.append(data, len);
                                  return stream.find("notifications/tools/list_changed") == std::string::npos;
                                });
  EXPECT_NE(stream.find("event: message\ndata: "), std::string::npos);
  EXPECT_NE(stream.find("notifications/tools/list_changed"), std::string::npos);

  auto list = server.post(request_body(2, "tools/list"), session);
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["result"]["tools"].back()["name"], "late_tool");
}

TEST(http, sigterm_exits_zero) {
  http_server server;
  ASSERT_TRUE(server.initialize());
  ASSERT_EQ(kill(server.process().pid(), SIGTERM), 0);
  auto status = server.process().wait_exit();
  ASSERT_TRUE(status) << "still running";
  EXPECT_TRUE(WIFEXITED(*status)) << "killed by signal " << WTERMSIG(*status) << "\n"
                                  << server.process().stderr_text();
  EXPECT_EQ(exit_code(status), 0);
}

// ---------------------------------------------------------------- --conformance

// The client side of a conformance-suite session: it declares sampling and
// elicitation, as the suite's client does.
void initialize_as_suite_client(server_process& server, json capabilities = {{"sampling", json::object()},
                                                                             {"elicitation", json::object()}}) {
  auto resp = server.request("initialize", {{"protocolVersion", "2025-11-25"},
                                            {"capabilities", std::move(capabilities)},
                                            {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}});
  ASSERT_TRUE(resp.contains("result")) << resp.dump();
  server.notify("notifications/initialized");
}

std::set<std::string> names_in(const json& items, const char* key = "name") {
  std::set<std::string> names;
  for (auto& item : items)
    names.insert(item.at(key).get<std::string>());
  return names;
}

// Messages that came before the response to `id`, in order (the response
// itself is taken out).
std::vector<json> before_response(server_process& server, int id, json& response) {
  response = server.response_to(id);
  std::vector<json> earlier(server.inbox.begin(), server.inbox.end());
  server.inbox.clear();
  return earlier;
}

TEST(conformance, offers_exactly_the_suites_tools_resources_and_prompts) {
  server_process server({"--conformance"});
  auto init = server.request("initialize", {{"protocolVersion", "2025-11-25"},
                                            {"capabilities", json::object()},
                                            {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}});
  auto& caps = init["result"]["capabilities"];
  EXPECT_EQ(caps["resources"]["subscribe"], true);
  EXPECT_TRUE(caps.contains("logging"));
  EXPECT_TRUE(caps.contains("completions"));
  EXPECT_TRUE(caps.contains("prompts"));

  auto tools = server.request("tools/list")["result"]["tools"];
  EXPECT_EQ(names_in(tools),
            (std::set<std::string>{
              "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
              "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress",
              "test_error_handling", "test_reconnection", "test_sampling", "test_elicitation",
              "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "json_schema_2020_12_tool",
              // 2026-07-28's scenarios, asked the 2025 way.
              "test_missing_capability", "test_streaming_elicitation", "test_logging_tool",
              "test_trigger_tool_change", "test_trigger_prompt_change", "test_input_required_result_elicitation",
              "test_input_required_result_sampling", "test_input_required_result_list_roots",
              "test_input_required_result_request_state", "test_input_required_result_tampered_state",
              "test_input_required_result_multi_round", "test_input_required_result_multiple_inputs",
              "test_input_required_result_capabilities", "test_header_param"}));
  for (auto& tool : tools) {
    EXPECT_TRUE(tool["description"].is_string()) << tool.dump();
    EXPECT_EQ(tool["inputSchema"]["type"], "object") << tool.dump();
    if (tool["name"] == "json_schema_2020_12_tool") {
      EXPECT_EQ(tool["inputSchema"]["$schema"], "https://json-schema.org/draft/2020-12/schema");
      EXPECT_EQ(tool["inputSchema"]["$defs"]["address"]["type"], "object");
      EXPECT_EQ(tool["inputSchema"]["additionalProperties"], false);
    }
  }
  EXPECT_EQ(names_in(server.request("resources/list")["result"]["resources"], "uri"),
            (std::set<std::string>{"test://static-text", "test://static-binary", "test://watched-resource"}));
  EXPECT_EQ(names_in(server.request("resources/templates/list")["result"]["resourceTemplates"], "uriTemplate"),
            (std::set<std::string>{"test://template/{id}/data"}));
  EXPECT_EQ(names_in(server.request("prompts/list")["result"]["prompts"]),
            (std::set<std::string>{"test_simple_prompt", "test_prompt_with_arguments",
                                   "test_prompt_with_embedded_resource", "test_prompt_with_image"}));
}

TEST(conformance, content_tools) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  EXPECT_EQ(text_of(server.call_tool("test_simple_text")), "This is a simple text response for testing.");

  auto image = server.call_tool("test_image_content")["result"]["content"];
  ASSERT_EQ(image.size(), 1u);
  EXPECT_EQ(image[0]["type"], "image");
  EXPECT_EQ(image[0]["mimeType"], "image/png");
  EXPECT_EQ(image[0]["data"].get<std::string>().rfind("iVBORw0KGgo", 0), 0u) << "not a base64 PNG";

  auto mixed = server.call_tool("test_multiple_content_types")["result"]["content"];
  std::vector<std::string> types;
  for (auto& item : mixed)
    types.push_back(item["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"text", "image", "resource"}));
  EXPECT_EQ(json::parse(mixed[2]["resource"]["text"].get<std::string>()),
            (json{{"test", "data"}, {"value", 123}}));

  auto error = server.call_tool("test_error_handling");
  EXPECT_EQ(error["result"]["isError"], true);
  EXPECT_EQ(text_of(error), "This tool intentionally returns an error for testing");
  EXPECT_EQ(server.call_tool("echo")["error"]["code"], -32602) << "the usual tools are not offered";
}

TEST(conformance, sampling_round_trip_during_the_call) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  int id =
    server.send_request("tools/call", {{"name", "test_sampling"}, {"arguments", {{"prompt", "two words"}}}});
  auto ask = server.wait_message([](const json& m) { return m.value("method", "") == "sampling/createMessage"; });
  ASSERT_TRUE(ask);
  EXPECT_EQ((*ask)["params"]["messages"][0]["content"]["text"], "two words");
  EXPECT_EQ((*ask)["params"]["maxTokens"], 100);
  server.send({{"jsonrpc", "2.0"},
               {"id", (*ask)["id"]},
               {"result",
                {{"role", "assistant"},
                 {"content", {{"type", "text"}, {"text", "from gtest"}}},
                 {"model", "m"},
                 {"stopReason", "endTurn"}}}});
  auto resp = server.response_to(id);
  EXPECT_EQ(text_of(resp), "LLM response: from gtest");
  EXPECT_FALSE(resp["result"].contains("isError"));
}

TEST(conformance, sampling_error_or_missing_capability_is_a_tool_error) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  int id = server.send_request("tools/call", {{"name", "test_sampling"}, {"arguments", {{"prompt", "p"}}}});
  auto ask = server.wait_message([](const json& m) { return m.value("method", "") == "sampling/createMessage"; });
  ASSERT_TRUE(ask);
  server.send({{"jsonrpc", "2.0"}, {"id", (*ask)["id"]}, {"error", {{"code", -1}, {"message", "user said no"}}}});
  auto resp = server.response_to(id);
  EXPECT_EQ(resp["result"]["isError"], true);
  EXPECT_NE(text_of(resp).find("user said no"), std::string::npos) << resp.dump();

  // A result that is not an object is no answer either.
  id = server.send_request("tools/call", {{"name", "test_elicitation"}, {"arguments", {{"message", "m"}}}});
  ask = server.wait_message([](const json& m) { return m.value("method", "") == "elicitation/create"; });
  ASSERT_TRUE(ask);
  server.send({{"jsonrpc", "2.0"}, {"id", (*ask)["id"]}, {"result", 5}});
  resp = server.response_to(id);
  EXPECT_EQ(resp["result"]["isError"], true) << resp.dump();

  // A client without the sampling capability is never asked.
  server_process plain({"--conformance"});
  initialize_as_suite_client(plain, json::object());
  json answer;
  auto earlier = before_response(
    plain, plain.send_request("tools/call", {{"name", "test_sampling"}, {"arguments", {{"prompt", "p"}}}}),
    answer);
  EXPECT_EQ(answer["result"]["isError"], true);
  EXPECT_NE(text_of(answer).find("sampling capability"), std::string::npos) << answer.dump();
  for (auto& m : earlier)
    EXPECT_NE(m.value("method", ""), "sampling/createMessage");
}

TEST(conformance, elicitation_with_defaults_round_trip) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  int id = server.send_request("tools/call",
                               {{"name", "test_elicitation_sep1034_defaults"}, {"arguments", json::object()}});
  auto ask = server.wait_message([](const json& m) { return m.value("method", "") == "elicitation/create"; });
  ASSERT_TRUE(ask);
  auto& props = (*ask)["params"]["requestedSchema"]["properties"];
  EXPECT_EQ(props["name"]["default"], "John Doe");
  EXPECT_EQ(props["age"]["default"], 30);
  EXPECT_EQ(props["score"]["default"], 95.5);
  EXPECT_EQ(props["status"]["default"], "active");
  EXPECT_EQ(props["verified"]["default"], true);
  server.send(
    {{"jsonrpc", "2.0"}, {"id", (*ask)["id"]}, {"result", {{"action", "accept"}, {"content", {{"age", 7}}}}}});
  EXPECT_EQ(text_of(server.response_to(id)), R"(Elicitation completed: action=accept, content={"age":7})");
}

TEST(conformance, logging_and_progress_arrive_before_the_answer) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  json answer;
  auto earlier = before_response(server, server.send_request("logging/setLevel", {{"level", "info"}}), answer);
  EXPECT_EQ(answer["result"], json::object());

  earlier =
    before_response(server, server.send_request("tools/call", {{"name", "test_tool_with_logging"}}), answer);
  std::vector<std::string> logged;
  for (auto& m : earlier)
    if (m.value("method", "") == "notifications/message" && m["params"]["level"] == "info")
      logged.push_back(m["params"]["data"]);
  // The setLevel's own "Log level set to" note may be among them.
  logged.erase(std::remove(logged.begin(), logged.end(), "Log level set to: info"), logged.end());
  EXPECT_EQ(logged, (std::vector<std::string>{"Tool execution started", "Tool processing data",
                                              "Tool execution completed"}));

  earlier = before_response(server,
                            server.send_request("tools/call", {{"name", "test_tool_with_progress"},
                                                               {"_meta", {{"progressToken", "tok-1"}}}}),
                            answer);
  std::vector<int> progress;
  for (auto& m : earlier)
    if (m.value("method", "") == "notifications/progress" && m["params"]["progressToken"] == "tok-1")
      progress.push_back(m["params"]["progress"]);
  EXPECT_EQ(progress, (std::vector<int>{0, 50, 100}));
  EXPECT_EQ(text_of(answer), "tok-1");

  // Above the chosen level nothing is logged.
  before_response(server, server.send_request("logging/setLevel", {{"level", "error"}}), answer);
  earlier =
    before_response(server, server.send_request("tools/call", {{"name", "test_tool_with_logging"}}), answer);
  for (auto& m : earlier)
    EXPECT_NE(m.value("method", ""), "notifications/message") << m.dump();
  EXPECT_EQ(server.request("logging/setLevel", {{"level", "loud"}})["error"]["code"], -32602);
}

TEST(conformance, resources_read_and_subscribe) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  auto text = server.request("resources/read", {{"uri", "test://static-text"}})["result"]["contents"][0];
  EXPECT_EQ(text["text"], "This is the content of the static text resource.");
  EXPECT_EQ(text["mimeType"], "text/plain");
  auto blob = server.request("resources/read", {{"uri", "test://static-binary"}})["result"]["contents"][0];
  EXPECT_EQ(blob["mimeType"], "image/png");
  EXPECT_TRUE(blob["blob"].is_string());
  auto templated = server.request("resources/read", {{"uri", "test://template/42/data"}})["result"]["contents"][0];
  EXPECT_EQ(templated["uri"], "test://template/42/data");
  EXPECT_EQ(json::parse(templated["text"].get<std::string>())["id"], "42");
  EXPECT_EQ(server.request("resources/read", {{"uri", "test://nothing"}})["error"]["code"], -32002);
  EXPECT_EQ(server.request("resources/read", {{"uri", "test://template/a/b/data"}})["error"]["code"], -32002);

  json answer;
  auto earlier = before_response(
    server, server.send_request("resources/subscribe", {{"uri", "test://watched-resource"}}), answer);
  EXPECT_EQ(answer["result"], json::object());
  ASSERT_EQ(earlier.size(), 1u);
  EXPECT_EQ(earlier[0]["params"]["data"], "Subscribed to resource: test://watched-resource");
  EXPECT_EQ(server.request("resources/unsubscribe", {{"uri", "test://watched-resource"}})["result"],
            json::object());
}

TEST(conformance, prompts_and_completion) {
  server_process server({"--conformance"});
  initialize_as_suite_client(server);
  auto simple = server.request("prompts/get", {{"name", "test_simple_prompt"}})["result"]["messages"];
  ASSERT_EQ(simple.size(), 1u);
  EXPECT_EQ(simple[0]["content"]["text"], "This is a simple prompt for testing.");
  auto with_args = server.request(
    "prompts/get", {{"name", "test_prompt_with_arguments"}, {"arguments", {{"arg1", "x"}, {"arg2", "y"}}}});
  EXPECT_EQ(with_args["result"]["messages"][0]["content"]["text"], "Prompt with arguments: arg1='x', arg2='y'");
  EXPECT_EQ(server.request("prompts/get", {{"name", "test_prompt_with_arguments"},
                                           {"arguments", {{"arg1", "x"}}}})["error"]["code"],
            -32602);
  auto embedded =
    server.request("prompts/get", {{"name", "test_prompt_with_embedded_resource"},
                                   {"arguments", {{"resourceUri", "test://r"}}}})["result"]["messages"];
  EXPECT_EQ(embedded[0]["content"]["type"], "resource");
  EXPECT_EQ(embedded[0]["content"]["resource"]["uri"], "test://r");
  auto image = server.request("prompts/get", {{"name", "test_prompt_with_image"}})["result"]["messages"];
  EXPECT_EQ(image[0]["content"]["type"], "image");

  auto completion = server.request("completion/complete",
                                   {{"ref", {{"type", "ref/prompt"}, {"name", "test_prompt_with_arguments"}}},
                                    {"argument", {{"name", "arg1"}, {"value", "b"}}}});
  EXPECT_EQ(completion["result"]["completion"]["values"], json::array({"beta"}));
}

TEST(conformance, does_not_mix_with_the_usual_content) {
  server_process server({"--conformance", "--tools", "3"});
  EXPECT_EQ(exit_code(server.wait_exit()), 2);
}

TEST(conformance, http_refuses_a_foreign_host_or_origin) {
  http_server server({"--conformance"});
  auto init = request_body(1, "initialize",
                           {{"protocolVersion", "2025-11-25"},
                            {"capabilities", json::object()},
                            {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}});
  auto evil =
    server.client->Post("/mcp", {{"Host", "evil.example.com"}, {"Accept", "application/json, text/event-stream"}},
                        init.dump(), "application/json");
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->status, 403);
  auto evil_origin = server.client->Post(
    "/mcp", {{"Origin", "http://evil.example.com:80"}, {"Accept", "application/json, text/event-stream"}},
    init.dump(), "application/json");
  ASSERT_TRUE(evil_origin);
  EXPECT_EQ(evil_origin->status, 403);
  auto local = server.client->Post(
    "/mcp", {{"Origin", "http://localhost:8080"}, {"Accept", "application/json, text/event-stream"}}, init.dump(),
    "application/json");
  ASSERT_TRUE(local);
  EXPECT_EQ(local->status, 200);
}

TEST(conformance, http_sampling_goes_out_on_the_get_stream_during_the_call) {
  http_server server({"--conformance"});
  auto init = server.post(request_body(1, "initialize",
                                       {{"protocolVersion", "2025-11-25"},
                                        {"capabilities", {{"sampling", json::object()}}},
                                        {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}}));
  ASSERT_TRUE(init);
  auto session = init->get_header_value("Mcp-Session-Id");
  ASSERT_FALSE(session.empty());
  server.post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, session);

  // The call blocks until the client has answered, so it gets its own
  // connection.
  auto call = std::async(std::launch::async, [&] {
    httplib::Client caller("127.0.0.1", server.port);
    caller.set_read_timeout(10);
    auto res = caller.Post(
      "/mcp", {{"Mcp-Session-Id", session}, {"Accept", "application/json, text/event-stream"}},
      request_body(2, "tools/call", {{"name", "test_sampling"}, {"arguments", {{"prompt", "p"}}}}).dump(),
      "application/json");
    return res ? json::parse(res->body, nullptr, false) : json();
  });

  std::string stream;
  std::optional<json> ask;
  auto deadline = steady::now() + k_timeout;
  server.client->Get("/mcp", {{"Mcp-Session-Id", session}, {"Accept", "text/event-stream"}},
                     [&](const char* data, std::size_t len) {
                       stream.append(data, len);
                       static const std::string prefix = "data: ";
                       for (auto p = stream.find(prefix); p != std::string::npos; p = stream.find(prefix, p + 1)) {
                         auto msg =
                           json::parse(stream.substr(p + prefix.size(), stream.find('\n', p) - p - prefix.size()),
                                       nullptr, false);
                         if (!msg.is_discarded() && msg.value("method", "") == "sampling/createMessage") ask = msg;
                       }
                       return !ask && steady::now() < deadline;
                     });
  ASSERT_TRUE(ask) << stream;
  auto reply =
    server.post({{"jsonrpc", "2.0"},
                 {"id", (*ask)["id"]},
                 {"result", {{"role", "assistant"}, {"content", {{"type", "text"}, {"text", "via http"}}}}}},
                session);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 202);
  ASSERT_EQ(call.wait_for(k_timeout), std::future_status::ready);
  auto result = call.get();
  EXPECT_EQ(text_of(result), "LLM response: via http") << result.dump();
}

// ---------------------------------------------------------------- OAuth (--oauth)

// Written independently of the server's own: BASE64URL(SHA256(v)), no padding.
std::string s256(const std::string& verifier) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(verifier.data()), verifier.size(), digest);
  std::string out(64, '\0');
  out.resize(static_cast<std::size_t>(
    EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), digest, sizeof digest)));
  for (auto& c : out)
    c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!out.empty() && out.back() == '=')
    out.pop_back();
  return out;
}

// A scratch directory for --oauth-log and --oauth-revoke-file.
struct temp_dir {
  temp_dir() {
    char buf[] = "/tmp/mcprt-oauth-XXXXXX";
    if (!mkdtemp(buf)) throw std::runtime_error("mkdtemp failed");
    path = buf;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

constexpr const char* k_verifier = "the-verifier-is-at-least-forty-three-characters-long-0123456789";
constexpr const char* k_redirect = "http://127.0.0.1:45678/callback";

// Plays mcprt's part of the OAuth flow with plain HTTP calls.
class oauth_client {
public:
  explicit oauth_client(http_server& server) : server_(server) {}

  httplib::Result register_client(const json& meta) {
    return server_.client->Post("/register", meta.dump(), "application/json");
  }

  // Registers a public client unless one is there; returns its client_id.
  std::string ensure_client() {
    if (client_id.empty()) {
      auto reg = register_client({{"redirect_uris", {k_redirect}}, {"token_endpoint_auth_method", "none"}});
      if (!reg || reg->status != 201) throw std::runtime_error("register failed");
      client_id = json::parse(reg->body)["client_id"];
    }
    return client_id;
  }

  httplib::Result authorize(httplib::Params params) {
    return server_.client->Get(("/authorize?" + httplib::detail::params_to_query_str(params)).c_str());
  }

  httplib::Params authorize_params(const std::string& challenge) {
    return {{"response_type", "code"}, {"client_id", ensure_client()}, {"redirect_uri", k_redirect},
            {"state", "st ate&1"},     {"code_challenge", challenge},  {"code_challenge_method", "S256"},
            {"resource", resource()}};
  }

  // A fresh code for k_verifier, taken from the 302's Location.
  std::string code() {
    auto res = authorize(authorize_params(s256(k_verifier)));
    if (!res || res->status != 302) throw std::runtime_error("authorize did not redirect");
    std::smatch m;
    auto location = res->get_header_value("Location");
    if (!std::regex_search(location, m, std::regex("[?&]code=([^&]+)"))) throw std::runtime_error("no code");
    return m[1];
  }

  httplib::Result token(const httplib::Params& form, const httplib::Headers& headers = {}) {
    return server_.client->Post("/token", headers, form);
  }

  httplib::Result exchange(const std::string& code, const std::string& verifier = k_verifier) {
    return token({{"grant_type", "authorization_code"},
                  {"code", code},
                  {"redirect_uri", k_redirect},
                  {"code_verifier", verifier},
                  {"client_id", ensure_client()},
                  {"resource", resource()}});
  }

  httplib::Result refresh(const std::string& refresh_token) {
    return token(
      {{"grant_type", "refresh_token"}, {"refresh_token", refresh_token}, {"client_id", ensure_client()}});
  }

  // The whole flow: the token response's JSON.
  json tokens() {
    auto res = exchange(code());
    if (!res || res->status != 200) throw std::runtime_error("token exchange failed");
    return json::parse(res->body);
  }

  httplib::Result initialize(const std::string& access_token) {
    httplib::Headers headers = {{"Accept", "application/json, text/event-stream"},
                                {"Authorization", "Bearer " + access_token}};
    return server_.client->Post("/mcp", headers,
                                request_body(1, "initialize",
                                             {{"protocolVersion", "2025-06-18"},
                                              {"capabilities", json::object()},
                                              {"clientInfo", {{"name", "gtest"}, {"version", "0"}}}})
                                  .dump(),
                                "application/json");
  }

  std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port); }
  std::string resource() const { return base() + "/mcp"; }

  std::string client_id;

private:
  http_server& server_;
};

std::string error_of(const httplib::Result& res) {
  return res ? json::parse(res->body, nullptr, false).value("error", std::string()) : std::string("no answer");
}

TEST(oauth, needs_http) {
  server_process stdio({"--oauth"});
  EXPECT_EQ(exit_code(stdio.wait_exit()), 2);
  EXPECT_TRUE(stdio.wait_stderr("--oauth needs --http"));
  server_process stray({"--http", "0", "--oauth-scope", "read"});
  EXPECT_EQ(exit_code(stray.wait_exit()), 2);
}

TEST(oauth, mcp_without_a_live_token_is_401_with_resource_metadata) {
  http_server server({"--oauth", "--oauth-scope", "read write"});
  auto expected = "Bearer resource_metadata=\"http://127.0.0.1:" + std::to_string(server.port)
                  + "/.well-known/oauth-protected-resource/mcp\", scope=\"read write\"";
  auto check = [&](const httplib::Result& res, const char* what) {
    ASSERT_TRUE(res) << what;
    EXPECT_EQ(res->status, 401) << what;
    EXPECT_EQ(res->get_header_value("WWW-Authenticate"), expected) << what;
    EXPECT_EQ(json::parse(res->body), json({{"error", "invalid_token"}})) << what;
  };
  check(server.initialize(), "POST");
  check(server.client->Get("/mcp"), "GET");
  check(server.client->Delete("/mcp"), "DELETE");
  check(server.client->Post("/mcp", {{"Authorization", "Bearer mcprt-test-at-forged"}}, "{}", "application/json"),
        "forged token");

  // Without --oauth-scope the challenge names no scope.
  http_server plain({"--oauth"});
  auto res = plain.initialize();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("WWW-Authenticate"),
            "Bearer resource_metadata=\"http://127.0.0.1:" + std::to_string(plain.port)
              + "/.well-known/oauth-protected-resource/mcp\"");
}

TEST(oauth, metadata_documents) {
  http_server server({"--oauth", "--oauth-scope", "read", "--oauth-scope", "write"});
  auto base = "http://127.0.0.1:" + std::to_string(server.port);
  auto prm = server.client->Get("/.well-known/oauth-protected-resource/mcp");
  ASSERT_TRUE(prm);
  ASSERT_EQ(prm->status, 200);
  auto doc = json::parse(prm->body);
  EXPECT_EQ(doc["resource"], base + "/mcp");
  EXPECT_EQ(doc["authorization_servers"], json({base}));
  EXPECT_EQ(doc["scopes_supported"], json({"read", "write"}));

  auto as = server.client->Get("/.well-known/oauth-authorization-server");
  ASSERT_TRUE(as);
  ASSERT_EQ(as->status, 200);
  auto meta = json::parse(as->body);
  EXPECT_EQ(meta["issuer"], base);
  EXPECT_EQ(meta["authorization_endpoint"], base + "/authorize");
  EXPECT_EQ(meta["token_endpoint"], base + "/token");
  EXPECT_EQ(meta["registration_endpoint"], base + "/register");
  EXPECT_EQ(meta["response_types_supported"], json({"code"}));
  EXPECT_EQ(meta["grant_types_supported"], json({"authorization_code", "refresh_token"}));
  EXPECT_EQ(meta["code_challenge_methods_supported"], json({"S256"}));
  EXPECT_EQ(meta["token_endpoint_auth_methods_supported"],
            json({"none", "client_secret_post", "client_secret_basic"}));
  EXPECT_EQ(meta["scopes_supported"], json({"read", "write", "offline_access"}));

  http_server plain({"--oauth"});
  auto bare = plain.client->Get("/.well-known/oauth-protected-resource/mcp");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(json::parse(bare->body).contains("scopes_supported"));
}

TEST(oauth, register_issues_ids_and_secrets_as_asked) {
  http_server server({"--oauth"});
  oauth_client oc(server);
  auto pub = oc.register_client(
    {{"redirect_uris", {k_redirect}}, {"token_endpoint_auth_method", "none"}, {"client_name", "gtest"}});
  ASSERT_TRUE(pub);
  ASSERT_EQ(pub->status, 201);
  auto pub_doc = json::parse(pub->body);
  EXPECT_FALSE(pub_doc.value("client_id", std::string()).empty());
  EXPECT_FALSE(pub_doc.contains("client_secret"));
  EXPECT_EQ(pub_doc["client_name"], "gtest");
  EXPECT_EQ(pub_doc["redirect_uris"], json({k_redirect}));

  auto conf = oc.register_client(
    {{"redirect_uris", {"http://localhost:1234/cb"}}, {"token_endpoint_auth_method", "client_secret_post"}});
  ASSERT_TRUE(conf);
  ASSERT_EQ(conf->status, 201);
  auto conf_doc = json::parse(conf->body);
  EXPECT_FALSE(conf_doc.value("client_secret", std::string()).empty());
  EXPECT_NE(conf_doc["client_id"], pub_doc["client_id"]);

  auto remote = oc.register_client({{"redirect_uris", {"https://example.com/cb"}}});
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->status, 400);
  EXPECT_EQ(error_of(remote), "invalid_redirect_uri");
  auto junk = server.client->Post("/register", "not json", "application/json");
  ASSERT_TRUE(junk);
  EXPECT_EQ(junk->status, 400);
}

TEST(oauth, authorize_redirects_at_once_with_code_and_state) {
  http_server server({"--oauth"});
  oauth_client oc(server);
  auto res = oc.authorize(oc.authorize_params(s256(k_verifier)));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 302);
  auto location = res->get_header_value("Location");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(location, m,
                               std::regex(R"(http://127\.0\.0\.1:45678/callback\?code=([0-9a-f]+)&state=(.*))")))
    << location;
  EXPECT_EQ(httplib::detail::decode_url(m[2], true), "st ate&1");

  auto refused = [&](httplib::Params params, const char* what) {
    auto r = oc.authorize(std::move(params));
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, 400) << what;
    EXPECT_FALSE(error_of(r).empty()) << what;
  };
  auto p = oc.authorize_params(s256(k_verifier));
  p.erase("code_challenge");
  refused(p, "no challenge");
  p = oc.authorize_params(s256(k_verifier));
  p.find("code_challenge_method")->second = "plain";
  refused(p, "plain method");
  p = oc.authorize_params(s256(k_verifier));
  p.find("client_id")->second = "nobody";
  refused(p, "unknown client");
  p = oc.authorize_params(s256(k_verifier));
  p.find("redirect_uri")->second = "https://evil.example/cb";
  refused(p, "remote redirect");
}

TEST(oauth, token_exchange_checks_the_pkce_verifier) {
  http_server server({"--oauth", "--oauth-scope", "read", "--oauth-token-ttl-s", "600"});
  oauth_client oc(server);
  auto wrong = oc.exchange(oc.code(), std::string(k_verifier) + "x");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 400);
  EXPECT_EQ(error_of(wrong), "invalid_grant");

  auto code = oc.code();
  auto right = oc.exchange(code);
  ASSERT_TRUE(right);
  ASSERT_EQ(right->status, 200) << right->body;
  auto doc = json::parse(right->body);
  EXPECT_EQ(doc["token_type"], "Bearer");
  EXPECT_EQ(doc["expires_in"], 600);
  EXPECT_EQ(doc["scope"], "read");
  EXPECT_EQ(doc["access_token"].get<std::string>().rfind("mcprt-test-at-", 0), 0u);
  EXPECT_EQ(doc["refresh_token"].get<std::string>().rfind("mcprt-test-rt-", 0), 0u);

  auto again = oc.exchange(code);
  ASSERT_TRUE(again);
  EXPECT_EQ(error_of(again), "invalid_grant") << "a code is single use";

  auto other_resource = oc.token({{"grant_type", "authorization_code"},
                                  {"code", oc.code()},
                                  {"redirect_uri", k_redirect},
                                  {"code_verifier", k_verifier},
                                  {"client_id", oc.client_id},
                                  {"resource", "http://127.0.0.1:1/mcp"}});
  ASSERT_TRUE(other_resource);
  EXPECT_EQ(other_resource->status, 400);
  auto other_redirect = oc.token({{"grant_type", "authorization_code"},
                                  {"code", oc.code()},
                                  {"redirect_uri", "http://127.0.0.1:45678/other"},
                                  {"code_verifier", k_verifier},
                                  {"client_id", oc.client_id}});
  ASSERT_TRUE(other_redirect);
  EXPECT_EQ(error_of(other_redirect), "invalid_grant");
}

TEST(oauth, confidential_clients_authenticate_as_registered) {
  http_server server({"--oauth"});
  oauth_client oc(server);
  for (std::string method : {"client_secret_post", "client_secret_basic"}) {
    auto reg = oc.register_client({{"redirect_uris", {k_redirect}}, {"token_endpoint_auth_method", method}});
    ASSERT_TRUE(reg);
    ASSERT_EQ(reg->status, 201);
    auto doc = json::parse(reg->body);
    oc.client_id = doc["client_id"];
    std::string secret = doc["client_secret"];
    auto form = [&](const std::string& code) {
      return httplib::Params{{"grant_type", "authorization_code"},
                             {"code", code},
                             {"redirect_uri", k_redirect},
                             {"code_verifier", k_verifier}};
    };
    auto with_auth = [&](const std::string& code, const std::string& secret_to_send) {
      auto f = form(code);
      if (method == "client_secret_post") {
        f.emplace("client_id", oc.client_id);
        f.emplace("client_secret", secret_to_send);
        return oc.token(f);
      }
      return oc.token(f, {httplib::make_basic_authentication_header(oc.client_id, secret_to_send)});
    };
    auto bad = with_auth(oc.code(), "wrong");
    ASSERT_TRUE(bad) << method;
    EXPECT_EQ(bad->status, 401) << method;
    EXPECT_EQ(error_of(bad), "invalid_client") << method;
    auto good = with_auth(oc.code(), secret);
    ASSERT_TRUE(good) << method;
    EXPECT_EQ(good->status, 200) << method << " " << good->body;
  }
}

TEST(oauth, bearer_token_gets_through_to_initialize) {
  http_server server({"--oauth"});
  oauth_client oc(server);
  auto tokens = oc.tokens();
  auto init = oc.initialize(tokens["access_token"]);
  ASSERT_TRUE(init);
  ASSERT_EQ(init->status, 200) << init->body;
  EXPECT_EQ(json::parse(init->body)["result"]["protocolVersion"], "2025-06-18");
  auto session = init->get_header_value("Mcp-Session-Id");
  auto del = server.client->Delete(
    "/mcp",
    {{"Mcp-Session-Id", session}, {"Authorization", "Bearer " + tokens["access_token"].get<std::string>()}});
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
}

TEST(oauth, refresh_rotates_the_refresh_token) {
  http_server server({"--oauth", "--oauth-scope", "read"});
  oauth_client oc(server);
  auto first = oc.tokens();
  auto res = oc.refresh(first["refresh_token"]);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  auto second = json::parse(res->body);
  EXPECT_NE(second["access_token"], first["access_token"]);
  EXPECT_NE(second["refresh_token"], first["refresh_token"]);
  EXPECT_EQ(second["scope"], "read");

  auto old = oc.refresh(first["refresh_token"]);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 400);
  EXPECT_EQ(error_of(old), "invalid_grant");

  auto init = oc.initialize(second["access_token"]);
  ASSERT_TRUE(init);
  EXPECT_EQ(init->status, 200);
  auto next = oc.refresh(second["refresh_token"]);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
}

TEST(oauth, expired_access_token_is_refused) {
  http_server server({"--oauth", "--oauth-token-ttl-s", "1"});
  oauth_client oc(server);
  auto tokens = oc.tokens();
  EXPECT_EQ(tokens["expires_in"], 1);
  auto init = oc.initialize(tokens["access_token"]);
  ASSERT_TRUE(init);
  // The token may already be past its second on a slow machine: both are fine.
  ASSERT_TRUE(init->status == 200 || init->status == 401) << init->status;
  // Expiry is a clock, not an event: ask again until it bites, under a deadline.
  auto deadline = steady::now() + k_timeout;
  int status = init->status;
  while (status != 401 && steady::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    auto again = oc.initialize(tokens["access_token"]);
    ASSERT_TRUE(again);
    status = again->status;
  }
  EXPECT_EQ(status, 401);
  auto fresh = oc.refresh(tokens["refresh_token"]);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->status, 200) << "refresh tokens outlive access tokens";
}

TEST(oauth, revoke_file_revokes_every_token_once) {
  temp_dir dir;
  auto revoke = dir.path / "revoke";
  http_server server({"--oauth", "--oauth-revoke-file", revoke.string()});
  oauth_client oc(server);
  auto tokens = oc.tokens();
  auto before = oc.initialize(tokens["access_token"]);
  ASSERT_TRUE(before);
  ASSERT_EQ(before->status, 200);

  std::ofstream(revoke).put('\n');
  auto after = oc.initialize(tokens["access_token"]);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 401);
  EXPECT_FALSE(std::filesystem::exists(revoke)) << "the server deletes the file once it acted on it";
  auto refresh = oc.refresh(tokens["refresh_token"]);
  ASSERT_TRUE(refresh);
  EXPECT_EQ(refresh->status, 400);
  EXPECT_EQ(error_of(refresh), "invalid_grant");

  // Once only: a new authorization works again.
  auto again = oc.initialize(oc.tokens()["access_token"]);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST(oauth, log_counts_events_and_never_a_token) {
  temp_dir dir;
  auto log = dir.path / "oauth.log";
  std::vector<std::string> secrets;
  std::string client_id;
  {
    http_server server({"--oauth", "--oauth-scope", "read", "--oauth-log", log.string()});
    oauth_client oc(server);
    server.initialize(); // unauthorized POST /mcp
    auto first = oc.tokens();
    auto wrong = oc.exchange(oc.code(), std::string(k_verifier) + "x");
    auto second = json::parse(oc.refresh(first["refresh_token"])->body);
    client_id = oc.client_id;
    for (auto* doc : {&first, &second})
      for (auto* key : {"access_token", "refresh_token"})
        secrets.push_back((*doc)[key]);
    EXPECT_EQ(oc.initialize(second["access_token"])->status, 200);
  }
  auto text = read_file(log);
  for (auto line : {"unauthorized POST /mcp\n", "token authorization_code\n", "token-error invalid_grant\n",
                    "token refresh_token\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_NE(text.find("register " + client_id + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("authorize " + client_id + " scope=read resource=http://127.0.0.1:"), std::string::npos)
    << text;
  EXPECT_EQ(text.find("mcprt-test-at-"), std::string::npos) << text;
  EXPECT_EQ(text.find("mcprt-test-rt-"), std::string::npos) << text;
  for (auto& s : secrets)
    EXPECT_EQ(text.find(s.substr(14)), std::string::npos);
}

} // namespace
