// `mcprt gateway`: MCP over stdio, bridged to streamable HTTP.
//
// stdin carries newline-delimited JSON-RPC from a client that only knows
// how to spawn servers; each message is POSTed to the endpoint (the
// workspace daemon's /mcp unless --url names another) by io::http_transport,
// the same client transport mcprt uses for remote servers: it keeps the
// session id, the protocol version header, SSE answers, resumption, the GET
// event stream with Last-Event-ID and backoff, and bounded sizes. What comes
// back, on a POST's answer or on the event stream, goes to stdout one
// message per line.

#include "cli/gateway_stdio.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/daemon_file.hpp"
#include "cli/exit_codes.hpp"
#include "cli/serve.hpp"
#include "core/ascii.hpp"
#include "core/http_url.hpp"
#include "core/json_locate.hpp"
#include "core/mcp_headers.hpp"
#include "core/tool_sets.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_transport.hpp"
#include "core/line_reader.hpp"
#include "io/http_client.hpp"
#include "io/state_dir.hpp"

extern char** environ;

namespace mcprt::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

/// The longest stdin line (one JSON-RPC message) the bridge takes.
constexpr std::size_t k_max_line = std::size_t{4} << 20;
/// Requests waiting for their answers at once; more queue in the transport.
constexpr std::size_t k_max_in_flight = 16;
/// Lines held back while initialize is pending; more go out at once.
constexpr std::size_t k_max_held = 64;
/// How much of an oversized line is kept to find its id.
constexpr std::size_t k_oversized_prefix = 64 * 1024;

void log_error(const std::string& text) {
  std::cerr << "mcprt gateway: " << text << std::endl;
}

} // namespace

// --------------------------------------------------------------------------
// Lines
// --------------------------------------------------------------------------

namespace gateway_detail {

namespace {

/// The raw text of the top-level "id" member of an object that may be cut
/// short or malformed after it: the members before it are skipped (strings
/// with their escapes, nesting), nothing is parsed. nullopt when the text
/// does not get that far.
std::optional<std::string_view> leading_id(std::string_view t) {
  std::size_t i = 0;
  auto ws = [&] {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n'))
      ++i;
  };
  // A string starting at i; its end (after the quote), or npos.
  auto string_end = [&](std::size_t at) {
    for (std::size_t k = at + 1; k < t.size(); ++k) {
      if (t[k] == '\\') ++k;
      else if (t[k] == '"') return k + 1;
    }
    return std::string_view::npos;
  };
  ws();
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  ++i;
  for (;;) {
    ws();
    if (i >= t.size() || t[i] != '"') return std::nullopt;
    auto key_end = string_end(i);
    if (key_end == std::string_view::npos) return std::nullopt;
    auto key = t.substr(i + 1, key_end - i - 2);
    i = key_end;
    ws();
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    ++i;
    ws();
    auto value_at = i;
    int depth = 0;
    while (i < t.size()) {
      char c = t[i];
      if (c == '"') {
        auto e = string_end(i);
        if (e == std::string_view::npos) return std::nullopt;
        i = e;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (depth == 0) break;
        --depth;
      } else if (c == ',' && depth == 0) {
        break;
      }
      ++i;
    }
    if (i >= t.size()) return std::nullopt; // the value may be cut
    if (key == "id") return trim_space(t.substr(value_at, i - value_at));
    if (t[i] != ',') return std::nullopt;
    ++i;
  }
}

/// The id of a message that may be cut or malformed, when it can be found
/// and is a JSON string or integer; "null" otherwise.
std::string tied_id(std::string_view text) {
  auto id = leading_id(text);
  if (!id) return "null";
  auto v = json::parse(*id, nullptr, false);
  if (v.is_string() || v.is_number_integer()) return std::string(*id);
  return "null";
}

} // namespace

std::string reject_line(const std::string& line, bool oversized, std::size_t limit) {
  auto error = [](const std::string& id, int code, const std::string& message) {
    return R"({"jsonrpc":"2.0","id":)" + id + R"(,"error":{"code":)" + std::to_string(code) + R"(,"message":)"
           + json(message).dump() + "}}";
  };
  if (oversized)
    return error(
      tied_id(line), -32600,
      "Invalid Request: the message is longer than " + std::to_string(limit) + " bytes (mcprt gateway)");
  auto v = json::parse(line, nullptr, false);
  if (v.is_discarded()) return error(tied_id(line), -32700, "Parse error (mcprt gateway)");
  if (!v.is_object() && !(v.is_array() && !v.empty()))
    return error("null", -32600, "Invalid Request: not a JSON-RPC message (mcprt gateway)");
  return {};
}

std::string one_line(std::string message) {
  for (auto& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return message;
}

} // namespace gateway_detail

// --------------------------------------------------------------------------
// The bridge
// --------------------------------------------------------------------------

namespace {

// Set by the signal handler; the wake pipe tells the main loop.
volatile sig_atomic_t g_signal = 0;
int g_wake_fd = -1;

extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  if (g_wake_fd >= 0) {
    char b = 's';
    [[maybe_unused]] auto n = ::write(g_wake_fd, &b, 1);
  }
}

class bridge {
public:
  bridge(std::string url, std::string token) : url_(std::move(url)), token_(std::move(token)) {}

  int run() {
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      log_error(std::string("pipe: ") + std::strerror(errno));
      return exit_failure;
    }
    wake_rd_ = wake[0];
    wake_wr_ = wake[1];
    g_wake_fd = wake_wr_;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
      ::sigaction(sig, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    int rc;
    {
      // The client outlives the transport (its destructor joins the loop).
      io::http_client client;
      std::map<std::string, std::string> headers;
      if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
      io::http_transport_options o;
      o.max_in_flight = k_max_in_flight;
      // An idle timeout: a tool call answered with plain JSON may take this
      // long before its first byte; the client has its own timeouts and
      // cancels with notifications/cancelled.
      o.request_timeout = 1h;
      o.answer_failed_requests = true;
      io::http_transport transport(url_, headers, events(), client, o);
      transport_ = &transport;
      rc = loop();
      shutdown(transport);
      transport_ = nullptr;
    }
    g_wake_fd = -1;
    ::close(wake_rd_);
    ::close(wake_wr_);
    return rc;
  }

private:
  io::http_events events() {
    io::http_events ev;
    ev.on_message = [this](std::string m) { on_message(std::move(m)); };
    ev.on_session_expired = [this] { on_session_expired(); };
    ev.on_error = [this](std::string reason) { log_error(redact(reason)); };
    ev.on_closed = [this] {
      std::lock_guard<std::mutex> lock(closed_mu_);
      closed_ = true;
      closed_cv_.notify_all();
    };
    return ev;
  }

  std::string redact(std::string s) const {
    if (token_.size() >= 4)
      for (auto pos = s.find(token_); pos != std::string::npos; pos = s.find(token_, pos))
        s.replace(pos, token_.size(), "<redacted>");
    return escape_for_display(s);
  }

  void wake() {
    char b = 'w';
    [[maybe_unused]] auto n = ::write(wake_wr_, &b, 1);
  }

  void stop_with(int code) {
    int none = -1;
    if (stop_code_.compare_exchange_strong(none, code)) wake();
  }

  // One message per line; the client reads stdout and nothing else.
  void write_line(const std::string& message) {
    auto text = gateway_detail::one_line(message) + "\n";
    std::lock_guard<std::mutex> lock(out_mu_);
    if (out_broken_) return;
    std::size_t off = 0;
    while (off < text.size()) {
      auto n = ::write(STDOUT_FILENO, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        out_broken_ = true;
        stop_with(exit_failure);
        return;
      }
      off += static_cast<std::size_t>(n);
    }
  }

  void on_message(std::string message) {
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      if (!modern_version_.empty() && message.find("x-mcp-header") != std::string::npos) learn_param_headers(message);
      for (const auto& id : io::detail::response_ids(message)) {
        pending_.erase(id);
        if (initialize_ids_.erase(id) == 0) continue;
        // MCP-Protocol-Version on every later request: the version the
        // server chose. Set before the client sees the answer, so its
        // notifications/initialized already carries it.
        auto j = json::parse(message, nullptr, false);
        if (j.is_object() && j.contains("result") && j["result"].is_object())
          if (auto v = j["result"].find("protocolVersion"); v != j["result"].end() && v->is_string())
            if (transport_) transport_->set_protocol_version(v->get<std::string>());
        if (initialize_ids_.empty()) flush_held_locked();
      }
    }
    write_line(message);
  }

  // From a tools/list answer: the tools whose parameters go in headers.
  void learn_param_headers(const std::string& message) {
    auto j = json::parse(message, nullptr, false);
    if (!j.is_object() || !j["result"].is_object() || !j["result"]["tools"].is_array()) return;
    for (auto& t : j["result"]["tools"]) {
      if (!t.is_object() || !t["name"].is_string() || !t.contains("inputSchema")) continue;
      auto wanted = tool_param_headers(t["inputSchema"], nullptr);
      if (wanted && !wanted->empty() && param_headers_.size() < 4096)
        param_headers_[t["name"].get<std::string>()] = std::move(*wanted);
    }
  }

  // What a client wrote before its initialize was answered goes out now,
  // with the session id and version that answer brought.
  void flush_held_locked() {
    while (!held_.empty()) {
      auto msg = std::move(held_.front());
      held_.pop_front();
      forward_locked(msg);
    }
  }

  void forward_locked(const std::string& msg) {
    std::string method;
    if (auto m = json_value_text(msg, {"method"})) method = std::string(*m);
    for (auto& id : io::detail::request_ids(msg)) {
      if (method == "\"initialize\"") initialize_ids_.insert(id);
      pending_.insert(std::move(id));
    }
    // A cancelled request may never be answered: no longer waited for.
    if (method == "\"notifications/cancelled\"")
      if (auto id = json_value_text(msg, {"params", "requestId"})) pending_.erase(std::string(trim_space(*id)));
    // A 2026-07-28 client names its revision in every message's _meta and
    // has no session: the request goes out with that revision and the
    // headers its body mirrors. One that falls back to initialize speaks
    // the older way from there on.
    if (auto v = json_value_text(msg, {"params", "_meta", "io.modelcontextprotocol/protocolVersion"})) {
      auto version = json::parse(*v, nullptr, false);
      if (version.is_string() && is_modern_protocol(version.get_ref<const std::string&>())) {
        if (modern_version_ != version.get_ref<const std::string&>()) {
          modern_version_ = version.get<std::string>();
          transport_->set_protocol_version(modern_version_);
        }
        // The mirrored fields are scanned out of the line, as the rest of the
        // bridge does, not parsed from all of it.
        auto part = [&](const std::vector<std::string>& path) {
          auto t = json_value_text(msg, path);
          return t ? json::parse(*t, nullptr, false) : json(json::value_t::discarded);
        };
        json head = json::object();
        if (json_value_text(msg, {"id"})) head["id"] = 0; // a request: notifications mirror nothing
        head["method"] = part({"method"});
        for (const char* key : {"name", "uri"})
          if (auto v = part({"params", key}); v.is_string()) head["params"][key] = std::move(v);
        auto headers = mcp_request_headers(head);
        // A tool's x-mcp-header parameters, as the tools/list this bridge
        // relayed described them: the gateway checks them against the body.
        if (method == "\"tools/call\"" && head["params"].is_object())
          if (auto t = param_headers_.find(head["params"].value("name", std::string{})); t != param_headers_.end())
            if (auto args = part({"params", "arguments"}); args.is_object())
              for (auto& f : param_header_fields(t->second, args))
                headers.push_back(std::move(f));
        transport_->send(msg, std::move(headers));
        return;
      }
    }
    if (method == "\"initialize\"" && !modern_version_.empty()) {
      modern_version_.clear();
      transport_->set_protocol_version("");
    }
    transport_->send(msg);
    // The event stream belongs to an initialized session; the transport
    // opens it once this notification was accepted.
    if (method == "\"notifications/initialized\"") transport_->open_event_stream();
  }

  // The server forgot the session (404): the daemon restarted, or the
  // session was ended. The client's state (initialize, subscriptions) is
  // gone with it; replaying it behind the client's back could change what
  // was negotiated. So the requests waiting get an error and the gateway
  // exits: the client sees its server end and starts it again.
  void on_session_expired() {
    std::set<std::string> waiting;
    {
      std::lock_guard<std::mutex> lock(pending_mu_);
      waiting.swap(pending_);
    }
    const std::string why =
      "the MCP session at " + (transport_ ? transport_->display_url() : std::string("the endpoint"))
      + " is gone (HTTP 404: the daemon restarted or ended it); mcprt gateway exits, start it again";
    for (const auto& id : waiting)
      write_line(R"({"jsonrpc":"2.0","id":)" + id + R"(,"error":{"code":-32000,"message":)" + json(why).dump()
                 + "}}");
    log_error(redact(why));
    expired_ = true;
    stop_with(exit_failure);
  }

  void handle_line(const line_piece& l) {
    if (!l.oversized && trim_space(l.text).empty()) return;
    if (auto reject = gateway_detail::reject_line(l.text, l.oversized, k_max_line); !reject.empty()) {
      log_error(l.oversized ? "dropped a message longer than " + std::to_string(k_max_line) + " bytes"
                            : "dropped a line that is not JSON: " + escape_for_display(l.text.substr(0, 80)));
      write_line(reject);
      return;
    }
    std::lock_guard<std::mutex> lock(pending_mu_);
    // Until initialize is answered there is no session id to send: later
    // messages wait for it (a client that pipes all its lines at once).
    if (!initialize_ids_.empty() && held_.size() < k_max_held) held_.push_back(l.text);
    else forward_locked(l.text);
  }

  int loop() {
    // Client lines: no garbage budget (each bad line gets its answer), and
    // an oversized one keeps its start, where its id usually is.
    line_reader_limits limits;
    limits.max_line_bytes = k_max_line;
    limits.oversized_prefix_bytes = k_oversized_prefix;
    limits.max_garbage_lines = std::numeric_limits<std::size_t>::max();
    limits.max_garbage_bytes = std::numeric_limits<std::size_t>::max();
    line_reader splitter(limits);
    std::vector<line_piece> lines;
    std::vector<char> buf(64 * 1024);
    bool eof = false;
    while (!eof) {
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_rd_, POLLIN, 0}};
      int n = ::poll(fds, 2, -1);
      if (n < 0 && errno != EINTR) {
        log_error(std::string("poll: ") + std::strerror(errno));
        return exit_failure;
      }
      if (g_signal != 0) return exit_ok;
      if (fds[1].revents & POLLIN) {
        char drain[64];
        while (::read(wake_rd_, drain, sizeof drain) > 0) {
        }
      }
      if (stop_code_.load() >= 0) return stop_code_.load();
      if (n <= 0 || !(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto got = ::read(STDIN_FILENO, buf.data(), buf.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      lines.clear();
      if (got <= 0) {
        splitter.finish(lines);
        eof = true;
      } else {
        splitter.feed(buf.data(), static_cast<std::size_t>(got), lines);
      }
      for (const auto& l : lines)
        handle_line(l);
    }
    return stop_code_.load() >= 0 ? stop_code_.load() : exit_ok;
  }

  // DELETE for a live session (the transport sends it with close()), then
  // wait for that, bounded.
  void shutdown(io::http_transport& transport) {
    if (expired_) transport.reset_session(); // nothing left to end
    transport.close();
    std::unique_lock<std::mutex> lock(closed_mu_);
    closed_cv_.wait_for(lock, 5s, [&] { return closed_; });
  }

  const std::string url_;
  const std::string token_;
  io::http_transport* transport_ = nullptr;
  int wake_rd_ = -1, wake_wr_ = -1;
  std::atomic<int> stop_code_{-1};
  std::atomic<bool> expired_{false};

  std::mutex out_mu_;
  bool out_broken_ = false;

  std::mutex pending_mu_;
  std::set<std::string> pending_;        // ids of requests without an answer yet
  std::set<std::string> initialize_ids_; // ids of initialize requests among them
  std::deque<std::string> held_;         // lines that came while initialize was pending
  std::string modern_version_;           // the 2026-07-28-or-later revision its lines name
  std::map<std::string, std::vector<param_header>> param_headers_; // by tool, from tools/list

  std::mutex closed_mu_;
  std::condition_variable closed_cv_;
  bool closed_ = false;
};

// --------------------------------------------------------------------------
// The daemon: found, or started detached
// --------------------------------------------------------------------------

bool process_ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

std::string log_tail(const fs::path& log) {
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 2000) text = text.substr(text.size() - 2000);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

/// Starts `mcprt serve` in its own session, not our child (double fork), so
/// it outlives this gateway and serves the next ones; stdin /dev/null,
/// stdout and stderr to `log` in `dir` (written afresh). The daemon's pid,
/// or -1 with `error`.
pid_t spawn_daemon(const std::vector<std::string>& args, const io::state_dir& dir, const std::string& log,
                   std::string& error) {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    error = "cannot find the mcprt binary: " + ec.message();
    return -1;
  }
  // Everything the children need is prepared before fork.
  std::vector<std::string> argv_s{exe.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int log_fd = dir.create_fresh(log, error);
  if (log_fd < 0) return -1;
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (null_fd < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    error = std::string("cannot set up the daemon's process: ") + std::strerror(errno);
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return -1;
  }
  // Descriptors the client left open to us must not leak into the daemon
  // (one of them may be the client's own pipe).
  std::vector<int> inherited;
  for (auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(e.path().filename().c_str());
    if (fd > 2 && fd != report[1] && fd != log_fd && fd != null_fd) inherited.push_back(fd);
  }
  pid_t middle = ::fork();
  if (middle < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    ::close(log_fd);
    ::close(null_fd);
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  if (middle == 0) {
    ::close(report[0]);
    ::setsid();
    pid_t daemon = ::fork();
    if (daemon == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::dup2(null_fd, 0);
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      for (int fd : inherited)
        ::close(fd);
      ::execve(argv[0], argv.data(), environ);
      int e = errno;
      [[maybe_unused]] auto n = ::write(report[1], &e, sizeof e);
      ::_exit(127);
    }
    [[maybe_unused]] auto n = ::write(report[1], &daemon, sizeof daemon);
    ::_exit(daemon > 0 ? 0 : 1);
  }
  ::close(report[1]);
  ::close(log_fd);
  ::close(null_fd);
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  pid_t daemon = -1;
  int exec_errno = 0;
  auto read_all = [&](void* p, std::size_t size) {
    std::size_t got = 0;
    while (got < size) {
      auto n = ::read(report[0], static_cast<char*>(p) + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    return got == size;
  };
  bool have_pid = read_all(&daemon, sizeof daemon);
  // EOF here: the exec succeeded (the pipe closed with it).
  bool exec_failed = have_pid && read_all(&exec_errno, sizeof exec_errno);
  ::close(report[0]);
  if (!have_pid || daemon <= 0) {
    error = "cannot start the daemon (fork failed)";
    return -1;
  }
  if (exec_failed) {
    error = "cannot run " + exe.string() + ": " + std::strerror(exec_errno);
    return -1;
  }
  return daemon;
}

/// Closes the descriptor (and so releases its lock) at scope exit.
struct lock_file {
  int fd = -1;
  ~lock_file() {
    if (fd >= 0) ::close(fd);
  }
};

/// Whether a daemon holds `lock` (mcprt serve keeps it while it runs).
bool daemon_lock_held(const fs::path& lock) {
  int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

/// The daemon of `ws`, started when none runs. Gateways of one workspace
/// that start together take turns under an flock on
/// `<ws>/.mcprt/gateway.lock`: the first starts the daemon and holds the
/// lock until its daemon.json is usable, the others then find it.
std::optional<verified_daemon> find_or_start_daemon(const std::string& ws, const gateway_flags& f,
                                                    std::string& error) {
  // Only a daemon that passes every check is used; a file that fails one
  // while its daemon runs is not replaced behind the user's back.
  auto usable = [&](bool& start) -> std::optional<verified_daemon> {
    start = false;
    auto check = check_daemon(ws);
    if (check.daemon) return check.daemon;
    if (!check.absent && check_daemon(ws, false).daemon) {
      error = check.error;
      return std::nullopt;
    }
    start = true;
    return std::nullopt;
  };
  bool start = false;
  if (auto d = usable(start)) return d;
  if (!start) return std::nullopt;

  std::error_code ec;
  // The workspace's .mcprt is a repository's to fill: its files are
  // written through io::state_dir, never through a link planted there.
  auto dir = io::state_dir::open(ws, ".mcprt", error);
  if (!dir) return std::nullopt;
  lock_file lock;
  auto lock_path = dir->path() / "gateway.lock";
  lock.fd = dir->open_file("gateway.lock", O_RDWR | O_CREAT, error);
  if (lock.fd < 0) return std::nullopt;
  while (::flock(lock.fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    error = "cannot lock " + lock_path.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  // Another gateway may have started it while we waited for the lock.
  if (auto d = usable(start)) return d;
  if (!start) return std::nullopt;

  std::vector<std::string> args{"serve", "--workspace", ws};
  if (!f.token_file.empty()) {
    args.push_back("--token-file");
    args.push_back(fs::absolute(f.token_file, ec).string());
  }
  args.insert(args.end(), f.serve_args.begin(), f.serve_args.end());
  auto log = dir->path() / "daemon.log";
  pid_t pid = spawn_daemon(args, *dir, "daemon.log", error);
  if (pid < 0) return std::nullopt;
  std::cerr << "mcprt gateway: started a daemon for " << escape_for_display(ws) << " (pid " << pid << ", log "
            << escape_for_display(log.string()) << ")" << std::endl;
  auto deadline = std::chrono::steady_clock::now() + f.daemon_start_timeout;
  for (;;) {
    auto check = check_daemon(ws);
    if (check.daemon) return check.daemon;
    if (process_ended(pid)) {
      // It may have lost to a daemon someone started by hand meanwhile,
      // which may still be starting (it holds daemon.lock): wait for that.
      if (auto again = check_daemon(ws); again.daemon) return again.daemon;
      if (daemon_lock_held(dir->path() / "daemon.lock") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(50ms);
        continue;
      }
      error = "the daemon it started (pid " + std::to_string(pid) + ") exited; its log " + log.string()
              + " ends:\n" + escape_for_display(log_tail(log));
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      error = "the daemon it started (pid " + std::to_string(pid) + ") did not write a usable " + daemon_file(ws)
              + " within " + std::to_string(f.daemon_start_timeout.count()) + " ms (" + check.error + "); see "
              + log.string();
      return std::nullopt;
    }
    std::this_thread::sleep_for(50ms);
  }
}

/// A gateway's flags may come from a cloned repository's `.mcp.json`, so
/// none of them may widen what mcprt trusts or who can reach it: other
/// settings or another home (approvals, user-scope servers), web origins,
/// a listener off loopback, the CAF door, a remote budget server. "" or why
/// not.
std::string trust_widening_flag(const std::vector<std::string>& serve_args) {
  static const char* const widening[] = {"--mcp-config", "--home",     "--allow-origin",
                                         "--caf-port",   "--caf-host", "--fleet-budget"};
  for (std::size_t i = 0; i < serve_args.size(); ++i) {
    const auto& name = serve_args[i];
    for (auto* w : widening)
      if (name == w)
        return "mcprt gateway does not take " + name
               + ": a repository's .mcp.json could name it to widen what mcprt trusts; start the daemon yourself "
                 "with `mcprt serve "
               + name + " ...` and the gateway uses it";
    if (name == "--listen" && i + 1 < serve_args.size()) {
      auto addr = parse_listen(serve_args[i + 1]);
      if (addr.error.empty() && !is_loopback(addr.host))
        return "mcprt gateway does not take --listen " + escape_for_display(serve_args[i + 1])
               + ": a daemon it starts listens on loopback only; start one yourself with `mcprt serve --listen ... "
                 "--token-file FILE` for other addresses";
    }
  }
  return {};
}

/// The daemon proves it is the one daemon.json names (its /healthz echoes
/// the instance id there) before anything else is sent. "" or why not.
std::string prove_daemon(const verified_daemon& d, const std::string& token) {
  io::http_client client;
  io::http_request req;
  req.url = d.url + "/healthz";
  req.connect_timeout = std::chrono::seconds(3);
  req.idle_timeout = std::chrono::seconds(30);
  req.proxy = "direct";
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
  auto answer = client.fetch(std::move(req), 64 * 1024);
  if (!answer.outcome.ok()) return "cannot reach the daemon at " + d.url + ": " + answer.outcome.reason;
  const auto* r = &answer.head;
  if (r->status == 401)
    return "the daemon at " + d.url
           + " refused the token: pass --token-file FILE (~/.mcprt/token, or the file it was started with)";
  if (r->status != 200)
    return "the daemon at " + d.url + " answered /healthz with HTTP " + std::to_string(r->status);
  auto j = json::parse(answer.body, nullptr, false);
  if (d.instance.empty() || !j.is_object() || j.value("instance", std::string()) != d.instance)
    return "the daemon at " + d.url + " is not the one its daemon.json names (its instance id differs)";
  return {};
}

} // namespace

int run_stdio_bridge(const std::string& url, const std::string& token) {
  bridge b(url, token);
  return b.run();
}

int run_gateway(const gateway_flags& f) {
  std::signal(SIGPIPE, SIG_IGN);
  std::string token;
  if (!f.token_file.empty()) {
    auto t = read_token_file(f.token_file);
    if (!t.error.empty()) {
      log_error(t.error);
      return exit_usage;
    }
    token = t.token;
  }
  if (!f.set.empty() && !valid_tool_set_name(f.set)) {
    log_error("--set names a tool set of the settings (mcp.toolSets): 1 to 64 of A-Z a-z 0-9 _ . -");
    return exit_usage;
  }
  if (!f.url.empty() && !f.set.empty()) {
    log_error("--set needs no --url: name the set's endpoint in the URL (.../mcp/" + f.set + ")");
    return exit_usage;
  }
  if (!f.url.empty()) {
    std::string why;
    if ((f.url.rfind("http://", 0) != 0 && f.url.rfind("https://", 0) != 0) || !http_url::parse(f.url, &why)) {
      // Not the text itself: a URL may carry credentials.
      log_error(
        "--url must be an http:// or https:// URL of a streamable HTTP endpoint (e.g. "
        "http://127.0.0.1:PORT/mcp)"
        + (why.empty() ? std::string() : ": " + why));
      return exit_usage;
    }
    if (!f.serve_args.empty()) {
      log_error("daemon flags (" + f.serve_args.front()
                + ") need no --url: they are for the daemon a gateway starts");
      return exit_usage;
    }
    return run_stdio_bridge(f.url, token);
  }
  if (auto why = trust_widening_flag(f.serve_args); !why.empty()) {
    log_error(why);
    return exit_usage;
  }
  std::error_code ec;
  auto ws = fs::absolute(f.workspace, ec).lexically_normal();
  if (!fs::is_directory(ws, ec)) {
    log_error("workspace '" + escape_for_display(f.workspace) + "' is not a directory");
    return exit_usage;
  }
  auto wss = ws.string();
  if (wss.size() > 1 && wss.back() == '/') wss.pop_back();
  std::string error;
  auto daemon = find_or_start_daemon(wss, f, error);
  if (!daemon) {
    log_error(error);
    return exit_failure;
  }
  // The daemon's own token (from the owner-only file its daemon.json
  // names) unless --token-file says otherwise.
  if (token.empty()) token = daemon->token;
  if (auto why = prove_daemon(*daemon, token); !why.empty()) {
    log_error(why);
    return exit_failure;
  }
  return run_stdio_bridge(daemon->url + (f.set.empty() ? "/mcp" : "/mcp/" + f.set), token);
}

} // namespace mcprt::cli
