// Streamable HTTP transport: POST /mcp for client messages, GET /mcp for
// the session's server-to-client event stream, DELETE /mcp to end a session.
#include "transports.hpp"

#include "oauth_server.hpp"

#include <httplib.h>
#include <sys/socket.h>
#include <pthread.h>

#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>

namespace mcprt_test_server {

namespace {

using namespace std::chrono_literals;

constexpr const char* k_session_header = "Mcp-Session-Id";
constexpr const char* k_version_header = "MCP-Protocol-Version";

class http_session : public peer {
public:
  explicit http_session(std::string id) : id_(std::move(id)) {}

  // Queued until a GET stream picks it up, so nothing sent before the
  // client opens its stream is lost.
  void send(const json& msg) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      queue_.push_back(msg);
    }
    cv_.notify_all();
  }

  // A stream whose write failed hands the message back for the next one.
  void push_front(json msg) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) queue_.push_front(std::move(msg));
  }

  std::optional<json> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [this] { return closed_ || !queue_.empty(); });
    if (closed_ || queue_.empty()) return std::nullopt;
    auto msg = std::move(queue_.front());
    queue_.pop_front();
    return msg;
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      queue_.clear();
    }
    cv_.notify_all();
  }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  const std::string& id() const { return id_; }

private:
  const std::string id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> queue_;
  bool closed_ = false;
};

class session_table {
public:
  std::shared_ptr<http_session> create() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string id;
    do {
      id = random_id();
    } while (sessions_.count(id) != 0);
    auto s = std::make_shared<http_session>(id);
    sessions_.emplace(id, s);
    return s;
  }

  std::shared_ptr<http_session> find(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second;
  }

  void erase(const std::string& id) {
    std::shared_ptr<http_session> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sessions_.find(id);
      if (it == sessions_.end()) return;
      s = std::move(it->second);
      sessions_.erase(it);
    }
    s->close();
  }

  void close_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& entry : sessions_)
      entry.second->close();
  }

private:
  // Unguessable enough that a stale id from an earlier run never matches.
  std::string random_id() {
    static constexpr char digits[] = "0123456789abcdef";
    std::string id;
    for (int i = 0; i < 2; ++i) {
      auto bits = rng_();
      for (int j = 0; j < 16; ++j, bits >>= 4)
        id.push_back(digits[bits & 0xf]);
    }
    return id;
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<http_session>> sessions_;
  std::mt19937_64 rng_{std::random_device{}()};
};

std::string sse_frame(const json& msg) {
  return "event: message\ndata: " + serialize_message(msg) + "\n\n";
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(serialize_message(body), "application/json");
}

// "localhost:8080" -> "localhost", "[::1]:80" -> "[::1]" (lower-cased).
std::string host_name(std::string host) {
  for (auto& c : host)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!host.empty() && host[0] == '[') return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.find(':'));
}

bool is_loopback_name(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "[::1]";
}

// DNS-rebinding protection: a page on evil.example.com whose name resolves
// to 127.0.0.1 reaches us with its own name in Host and Origin.
bool from_loopback_origin(const httplib::Request& req) {
  if (req.has_header("Host") && !is_loopback_name(host_name(req.get_header_value("Host")))) return false;
  if (req.has_header("Origin")) {
    auto origin = req.get_header_value("Origin");
    auto scheme_end = origin.find("://");
    if (scheme_end == std::string::npos) return false;
    auto authority = origin.substr(scheme_end + 3);
    if (!is_loopback_name(host_name(authority.substr(0, authority.find('/'))))) return false;
  }
  return true;
}

void send_rpc_reply(httplib::Response& res, const json& reply, bool sse) {
  res.status = 200;
  if (sse) res.set_content(sse_frame(reply), "text/event-stream");
  else send_json(res, 200, reply);
}

} // namespace

int run_http(const options& opts, lifetime& life, handler& h) {
  httplib::Server svr;
  session_table sessions;

  // Room for many concurrent sleep calls and open event streams; the
  // default pool of 8 would make benchmarks measure the pool instead.
  svr.new_task_queue = [] { return new httplib::ThreadPool(128); };
  // Nagle against the client's delayed ACK would add 40 ms to an answer
  // written in two pieces (head, body).
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_max_count(1000);
  svr.set_keep_alive_timeout(2);

  // --oauth: its routes beside /mcp, and a bearer check first in each /mcp handler.
  std::unique_ptr<oauth_server> oauth;
  if (opts.oauth) {
    oauth = std::make_unique<oauth_server>(opts);
    oauth->install(svr);
  }
  auto admitted = [&](const httplib::Request& req, httplib::Response& res) {
    // --conformance: the suite's dns-rebinding-protection scenario.
    if (opts.conformance && !from_loopback_origin(req)) {
      send_json(res, 403, make_error(nullptr, -32000, "Forbidden: Host or Origin is not a loopback name"));
      return false;
    }
    return !oauth || oauth->admit(req, res);
  };

  // Fills in the HTTP error and returns null when the request has no
  // usable session.
  auto session_for = [&](const httplib::Request& req, httplib::Response& res) -> std::shared_ptr<http_session> {
    if (req.has_header(k_version_header) && !is_supported_protocol(req.get_header_value(k_version_header))) {
      send_json(res, 400, make_error(nullptr, -32000, "Bad Request: unsupported MCP-Protocol-Version"));
      return nullptr;
    }
    if (!req.has_header(k_session_header)) {
      send_json(res, 400, make_error(nullptr, -32000, "Bad Request: missing Mcp-Session-Id"));
      return nullptr;
    }
    auto s = sessions.find(req.get_header_value(k_session_header));
    if (!s) send_json(res, 404, make_error(nullptr, -32001, "Session not found"));
    return s;
  };

  // --hang-on-initialize: hold the request open until shutdown.
  auto hang = [&](httplib::Response& res) {
    while (!life.stopping())
      life.wait_for_or_stop(1h);
    send_json(res, 503, make_error(nullptr, -32000, "shutting down"));
  };

  svr.Post("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    auto msg = json::parse(req.body, nullptr, false);
    if (msg.is_discarded()) {
      send_json(res, 400, make_error(nullptr, -32700, "Parse error"));
      return;
    }
    auto kind = classify(msg);
    if (kind == message_kind::invalid) {
      send_json(res, 400, invalid_request(msg));
      return;
    }
    if (kind == message_kind::request && msg["method"] == "initialize") {
      auto s = sessions.create();
      auto reply = h.handle_request(s, msg);
      if (!reply || !reply->contains("result")) sessions.erase(s->id());
      if (!reply) return hang(res);
      if (reply->contains("result")) res.set_header(k_session_header, s->id());
      send_rpc_reply(res, *reply, opts.sse_responses);
      return;
    }
    auto s = session_for(req, res);
    if (!s) return;
    switch (kind) {
      case message_kind::notification:
        h.handle_notification(s, msg);
        res.status = 202;
        return;
      case message_kind::response:
        h.handle_response(msg);
        res.status = 202;
        return;
      default: break;
    }
    if (auto reply = h.handle_request(s, msg)) send_rpc_reply(res, *reply, opts.sse_responses);
    else hang(res);
  });

  svr.Get("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    auto s = session_for(req, res);
    if (!s) return;
    res.set_header("Cache-Control", "no-cache");
    auto last_write = std::make_shared<steady::time_point>(steady::now());
    res.set_chunked_content_provider("text/event-stream",
                                     [s, &life, last_write](std::size_t, httplib::DataSink& sink) {
                                       if (life.stopping() || s->closed()) {
                                         sink.done();
                                         return true;
                                       }
                                       // Short waits so shutdown and DELETE end the stream promptly.
                                       if (auto msg = s->pop(200ms)) {
                                         auto frame = sse_frame(*msg);
                                         if (!sink.write(frame.data(), frame.size())) {
                                           s->push_front(std::move(*msg));
                                           return false;
                                         }
                                         *last_write = steady::now();
                                       } else if (steady::now() - *last_write >= 1s) {
                                         // A write is the only way to notice that the client went away.
                                         static const std::string keepalive = ": keepalive\n\n";
                                         if (!sink.write(keepalive.data(), keepalive.size())) return false;
                                         *last_write = steady::now();
                                       }
                                       return true;
                                     });
  });

  svr.Delete("/mcp", [&](const httplib::Request& req, httplib::Response& res) {
    if (!admitted(req, res)) return;
    auto s = session_for(req, res);
    if (!s) return;
    sessions.erase(s->id());
    res.status = 200;
  });

  // httplib listens with a backlog of 5 (compiled into Debian's library):
  // 64 clients connecting at once would lose SYNs and wait a second for
  // their retransmission. Listening again on the same socket widens it.
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](socket_t fd) {
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = fd;
  });
  int port = opts.http_port;
  if (port == 0) port = svr.bind_to_any_port("127.0.0.1");
  else if (!svr.bind_to_port("127.0.0.1", port)) port = -1;
  if (port > 0 && listen_fd >= 0) ::listen(listen_fd, 512);
  if (port <= 0) {
    log_line("mcprt-test-server: cannot listen on 127.0.0.1:" + std::to_string(opts.http_port));
    return 1;
  }
  if (oauth) oauth->set_port(port);
  std::printf("listening on http://127.0.0.1:%d/mcp\n", port);
  if (opts.garbage)
    for (std::size_t i = 0; i < 4; ++i)
      std::printf("%s\n", garbage_line(i).c_str());
  std::fflush(stdout);
  log_line("mcprt-test-server: listening on http://127.0.0.1:" + std::to_string(port) + "/mcp");

  std::mutex listen_mu;
  std::condition_variable listen_cv;
  bool listen_returned = false;
  auto signals = shutdown_signals(opts);
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::unique_lock<std::mutex> lock(listen_mu);
    if (listen_returned) return;
    log_line("mcprt-test-server: got signal " + std::to_string(sig) + ", shutting down");
    life.request_stop();
    sessions.close_all();
    // stop() does nothing until listen_after_bind() has started running,
    // and a signal can arrive before that: wait for it to run, then stop
    // once (a second stop() trips an assertion in httplib builds that keep
    // them, as the TSan one does).
    bool asked = false;
    while (!listen_returned) {
      if (!asked && svr.is_running()) {
        svr.stop();
        asked = true;
      }
      listen_cv.wait_for(lock, 10ms, [&] { return listen_returned; });
    }
  });

  bool ok = svr.listen_after_bind();
  {
    std::lock_guard<std::mutex> guard(listen_mu);
    listen_returned = true;
  }
  listen_cv.notify_all();
  // Wakes the signal thread when the listener ended for another reason.
  pthread_kill(signal_thread.native_handle(), SIGINT);
  signal_thread.join();
  return ok || life.stopping() ? 0 : 1;
}

} // namespace mcprt_test_server
