// mcprt-test-server: a small but real MCP server whose misbehaviour can be
// dialled in from the command line, so mcprt's tests and benchmarks can
// exercise every failure path against an actual child process.
#include "server_core.hpp"
#include "transports.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mcprt_test_server {

namespace {

class stdout_writer {
public:
  explicit stdout_writer(bool garbage) : garbage_(garbage) {}

  // Responses come from worker threads too; one lock keeps lines whole.
  void write_message(const json& msg) {
    auto text = serialize_message(msg);
    std::lock_guard<std::mutex> lock(mu_);
    if (garbage_) put(garbage_line(garbage_count_++));
    put(text);
  }

  // --invalid-utf8 stdout: one raw line that is neither JSON nor UTF-8.
  void write_invalid_utf8_line() {
    std::lock_guard<std::mutex> lock(mu_);
    put(std::string("not json: ") + k_invalid_utf8_bytes);
  }

  // --close-stdout-after-ms: the pipe's write end goes away for good; later
  // replies are dropped (fd 1 must not be written once another file may
  // have taken its number).
  void close_stdout() {
    std::lock_guard<std::mutex> lock(mu_);
    std::fflush(stdout);
    ::close(1);
    closed_ = true;
  }

  void write_garbage_prelude() {
    std::lock_guard<std::mutex> lock(mu_);
    // One of each kind up front, so even a client that only reads the
    // first few lines meets every variety.
    for (int i = 0; i < 4; ++i)
      put(garbage_line(garbage_count_++));
  }

private:
  void put(const std::string& line) {
    if (closed_) return;
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

  std::mutex mu_;
  bool garbage_;
  bool closed_ = false;
  std::size_t garbage_count_ = 0;
};

class stdio_peer : public peer {
public:
  explicit stdio_peer(stdout_writer& writer) : writer_(writer) {}
  void send(const json& msg) override { writer_.write_message(msg); }

private:
  stdout_writer& writer_;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

std::string trim(const char* data, std::size_t size) {
  std::size_t begin = 0;
  while (begin < size && is_space(data[begin]))
    ++begin;
  while (size > begin && is_space(data[size - 1]))
    --size;
  return std::string(data + begin, size - begin);
}

void spawn_grandchild() {
  pid_t child = fork();
  if (child == 0) {
    // Off our pipes: the point is to test process-group cleanup, not to
    // keep the parent's stdout open after the server itself is gone.
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
      if (devnull > 2) close(devnull);
    }
    execlp("sleep", "sleep", "100000", static_cast<char*>(nullptr));
    for (;;)
      pause();
  }
  if (child < 0) log_line(std::string("mcprt-test-server: fork failed: ") + std::strerror(errno));
  else log_line("child pid " + std::to_string(child));
}

// ---- containment faults (--pid-file, --grandchild-*, --close-stdout-after-ms)

void record_pid(const std::string& file, const char* kind, pid_t pid) {
  if (file.empty()) return;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // One write per line: O_APPEND keeps lines of several writers whole.
  std::string line = std::string(kind) + " " + std::to_string(pid) + "\n";
  if (::write(fd, line.data(), line.size()) < 0) {
  }
  ::close(fd);
}

[[noreturn]] void become_sleeper() {
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    if (devnull > 2) ::close(devnull);
  }
  ::execlp("sleep", "sleep", "100000", static_cast<char*>(nullptr));
  for (;;)
    ::pause();
}

// Called before any thread starts, so fork() is safe here.
void spawn_containment_children(const options& opts) {
  record_pid(opts.pid_file, "server", ::getpid());
  if (opts.grandchild_in_group) {
    pid_t child = ::fork();
    if (child == 0) become_sleeper();
    if (child > 0) record_pid(opts.pid_file, "group", child);
  }
  if (opts.grandchild_setsid) {
    // Recorded once it has its own session: a reader of the pid file may
    // check getsid() at once.
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return;
    pid_t child = ::fork();
    if (child == 0) {
      ::close(ready[0]);
      ::setsid();
      char done = 1;
      while (::write(ready[1], &done, 1) < 0 && errno == EINTR) {
      }
      ::close(ready[1]);
      become_sleeper();
    }
    ::close(ready[1]);
    char done = 0;
    while (child > 0 && ::read(ready[0], &done, 1) < 0 && errno == EINTR) {
    }
    ::close(ready[0]);
    if (child > 0) record_pid(opts.pid_file, "setsid", child);
  }
  if (opts.grandchild_daemon) {
    pid_t middle = ::fork();
    if (middle == 0) {
      ::setsid();
      pid_t sleeper = ::fork();
      if (sleeper == 0) become_sleeper();
      if (sleeper > 0) record_pid(opts.pid_file, "daemon", sleeper);
      ::_exit(0);
    }
    if (middle > 0) {
      int status = 0;
      while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

void arm_close_stdout(const options& opts, lifetime& life, stdout_writer& writer) {
  life.spawn_background([&life, &writer, delay = opts.close_stdout_after_ms] {
    if (!life.wait_for_or_stop(std::chrono::milliseconds(delay))) return;
    writer.close_stdout();
    log_line("mcprt-test-server: closed stdout, still running (--close-stdout-after-ms)");
  });
}

// ---- end of containment faults

} // namespace

std::string garbage_line(std::size_t n) {
  switch (n % 4) {
    case 1: return "{this is not json either";
    case 3: return std::string(200 * 1024, 'x');
    default: return "this is not json";
  }
}

int run_stdio(const options& opts, lifetime& life, handler& h) {
  stdout_writer writer(opts.garbage);
  auto self = std::make_shared<stdio_peer>(writer);
  if (opts.garbage) writer.write_garbage_prelude();
  if (opts.invalid_utf8_in("stdout")) writer.write_invalid_utf8_line();

  bool close_stdout_armed = false;
  char* buffer = nullptr;
  std::size_t capacity = 0;
  ssize_t length = 0;
  while ((length = getline(&buffer, &capacity, stdin)) >= 0) {
    auto line = trim(buffer, static_cast<std::size_t>(length));
    if (line.empty()) continue;
    auto msg = json::parse(line, nullptr, false);
    if (msg.is_discarded()) {
      writer.write_message(make_error(nullptr, -32700, "Parse error"));
      continue;
    }
    switch (classify(msg)) {
      case message_kind::request:
        // tools/call may sleep; reading must go on meanwhile.
        if (msg["method"] == "tools/call") {
          life.spawn_worker([&h, &writer, self, msg] {
            if (auto reply = h.handle_request(self, msg)) writer.write_message(*reply);
          });
        } else if (auto reply = h.handle_request(self, msg)) {
          writer.write_message(*reply);
          if (msg["method"] == "tools/list" && opts.close_stdout_after_ms >= 0 && !close_stdout_armed) {
            close_stdout_armed = true;
            arm_close_stdout(opts, life, writer);
          }
        }
        break;
      case message_kind::notification: h.handle_notification(self, msg); break;
      case message_kind::response: h.handle_response(msg); break;
      case message_kind::invalid: writer.write_message(invalid_request(msg)); break;
    }
  }
  std::free(buffer);

  // Calls already accepted still get their answers before we go.
  life.join_workers();
  if (opts.ignore_sigterm) {
    log_line("mcprt-test-server: stdin closed, staying alive (--ignore-sigterm)");
    for (;;)
      pause();
  }
  life.request_stop();
  life.join_background();
  return 0;
}

sigset_t shutdown_signals(const options& opts) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  if (!opts.ignore_sigterm) sigaddset(&set, SIGTERM);
  return set;
}

} // namespace mcprt_test_server

int main(int argc, char** argv) {
  using namespace mcprt_test_server;
  auto start = steady::now();

  options opts;
  switch (parse_options(argc, argv, opts)) {
    case parse_outcome::exit_ok: return 0;
    case parse_outcome::exit_usage: return 2;
    case parse_outcome::run: break;
  }

  // A vanished reader must show up as a write error, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  for (int i = 1; i <= opts.stderr_lines; ++i)
    log_line("stderr line " + std::to_string(i));
  if (opts.invalid_utf8_in("stderr")) log_line(std::string("stderr with invalid UTF-8: ") + k_invalid_utf8_bytes);
  // Before any signal tweaks so the grandchild gets default dispositions.
  if (opts.spawn_child) spawn_grandchild();
  spawn_containment_children(opts);
  if (opts.ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
  if (opts.http_port >= 0) {
    // Blocked before any thread exists so all of them inherit the mask and
    // the HTTP transport's sigwait thread is the only one that sees these.
    auto set = shutdown_signals(opts);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }

  lifetime life;
  handler h(opts, life);

  if (opts.crash_after_ms >= 0) {
    life.spawn_background([&life, &opts, start] {
      if (!life.wait_until_or_stop(start + std::chrono::milliseconds(opts.crash_after_ms))) return;
      log_line("mcprt-test-server: crashing with exit code 3 (--crash-after-ms "
               + std::to_string(opts.crash_after_ms) + ")");
      std::_Exit(3);
    });
  }
  if (opts.startup_delay_ms > 0) life.wait_for_or_stop(std::chrono::milliseconds(opts.startup_delay_ms));

  int rc = opts.http_port >= 0 ? run_http(opts, life, h) : run_stdio(opts, life, h);
  life.request_stop();
  life.join_workers();
  life.join_background();
  return rc;
}
