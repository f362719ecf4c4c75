// MCP over stdio, bridged to one streamable HTTP endpoint: what `mcprt
// gateway` runs once it has found and proven the workspace daemon.
//
// stdin carries newline-delimited JSON-RPC from a client that only knows
// how to spawn servers; each message is POSTed to the endpoint by
// io::http_transport, the same client transport mcprt uses for remote
// servers: it keeps the session id, the protocol version header, SSE
// answers, resumption, the GET event stream with Last-Event-ID and backoff,
// and bounded sizes. What comes
// back, on a POST's answer or on the event stream, goes to stdout one
// message per line.

#include "cli/stdio_bridge.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/exit_codes.hpp"
#include "core/ascii.hpp"
#include "core/json_locate.hpp"
#include "core/mcp_headers.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_transport.hpp"
#include "core/line_reader.hpp"
#include "io/http_client.hpp"

namespace mcprt::cli {

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

void log_bridge_error(const std::string& text) {
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
      log_bridge_error(std::string("pipe: ") + std::strerror(errno));
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
    ev.on_error = [this](std::string reason) { log_bridge_error(redact(reason)); };
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
    log_bridge_error(redact(why));
    expired_ = true;
    stop_with(exit_failure);
  }

  void handle_line(const line_piece& l) {
    if (!l.oversized && trim_space(l.text).empty()) return;
    if (auto reject = gateway_detail::reject_line(l.text, l.oversized, k_max_line); !reject.empty()) {
      log_bridge_error(l.oversized ? "dropped a message longer than " + std::to_string(k_max_line) + " bytes"
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
        log_bridge_error(std::string("poll: ") + std::strerror(errno));
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
} // namespace

int run_stdio_bridge(const std::string& url, const std::string& token) {
  bridge b(url, token);
  return b.run();
}

} // namespace mcprt::cli
