#include "io/http_transport.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "core/ascii.hpp"
#include "core/json_locate.hpp"
#include "core/sse_parser.hpp"
#include "io/http_common.hpp"

namespace mcprt::io {

using namespace std::chrono_literals;

// --------------------------------------------------------------------------
// JSON-RPC messages, scanned rather than parsed: the transport only needs to
// know whether a message is a request and how a batch splits; the session
// parses each message anyway
// --------------------------------------------------------------------------

namespace detail {
namespace {

bool has_non_null_id_member(std::string_view obj) {
  auto id = json_value_text(obj, {"id"});
  return id && *id != "null";
}

bool is_request_object(std::string_view obj) {
  return json_value_text(obj, {"method"}).has_value() && has_non_null_id_member(obj);
}

bool has_non_null_id(std::string_view body) {
  for (const auto& m : split_json_batch(body))
    if (has_non_null_id_member(m)) return true;
  return false;
}

} // namespace

std::vector<std::string> split_json_batch(std::string_view body) {
  body = trim_space(body);
  if (body.empty()) return {};
  if (body.front() != '[') return {std::string(body)};
  auto elements = json_array_elements(body);
  // Malformed text is handed on whole, for the session to reject.
  if (!elements) return {std::string(body)};
  return {elements->begin(), elements->end()};
}

std::vector<std::string> request_ids(std::string_view message) {
  std::vector<std::string> ids;
  for (const auto& m : split_json_batch(message))
    if (is_request_object(m))
      if (auto id = json_value_text(m, {"id"})) ids.emplace_back(trim_space(*id));
  return ids;
}

std::vector<std::string> response_ids(std::string_view message) {
  std::vector<std::string> ids;
  for (const auto& m : split_json_batch(message))
    if (!json_value_text(m, {"method"}).has_value() && has_non_null_id_member(m))
      if (auto id = json_value_text(m, {"id"})) ids.emplace_back(trim_space(*id));
  return ids;
}

bool is_json_rpc_request(std::string_view message) {
  message = trim_space(message);
  if (message.empty()) return false;
  if (message.front() == '{') return is_request_object(message);
  if (message.front() == '[') {
    for (const auto& m : split_json_batch(message))
      if (is_request_object(m)) return true;
  }
  return false;
}

} // namespace detail

// --------------------------------------------------------------------------
// Transport
// --------------------------------------------------------------------------

namespace {

constexpr const char* k_session_header = "Mcp-Session-Id";
constexpr const char* k_version_header = "MCP-Protocol-Version";

// A JSON string literal for text we compose (URLs, reasons).
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

// A server's `retry:` is obeyed, within bounds: a tiny one must not turn a
// server that closes at once into a reconnect storm, a huge one must not
// park a stream for hours.
std::chrono::milliseconds bounded_retry(long ms) {
  return std::clamp<std::chrono::milliseconds>(std::chrono::milliseconds(ms), 100ms, 300000ms);
}

} // namespace

// Controls one event-stream thread.
//
// `stop` is atomic and read without `mu`: httplib calls the socket-options
// hook with its own socket mutex held, and request_stop() holds `mu` while
// it calls ClientImpl::stop(), which takes that mutex.
struct event_stream_ctl {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> stop{false};
  httplib::ClientImpl* client = nullptr; // guarded by mu; set while a GET runs

  void request_stop() {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    if (client) client->stop();
    cv.notify_all();
  }
  bool stopped() const { return stop.load(); }
};

struct http_transport::state : std::enable_shared_from_this<http_transport::state> {
  state(http_worker_pool& p, http_events ev, http_transport_options o) : pool(p), events(std::move(ev)), opts(o) {}

  http_worker_pool& pool;
  const http_events events;
  const http_transport_options opts;
  std::optional<http_url> url;
  std::string display;
  httplib::Headers base_headers;
  std::vector<std::string> secrets; // configured header values, redacted from reasons

  mutable std::mutex mu;
  std::optional<std::string> session;
  std::optional<std::string> version;
  struct queued {
    std::string msg;
    std::optional<std::string> session; // as of send()
  };
  std::deque<queued> queue;
  std::size_t in_flight = 0;
  bool barrier_open = true;
  bool closing = false;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle;
  std::set<httplib::ClientImpl*> active;
  std::shared_ptr<event_stream_ctl> stream;
  bool stream_deferred = false; // open_event_stream() waits for the message being issued
  std::optional<std::string> expired_reported;
  std::condition_variable closing_cv; // with mu: wakes resumption waits on close

  std::atomic<bool> closing_flag{false};
  std::mutex cb_mu;
  std::atomic<std::thread::id> cb_thread{};
  bool dead = false;            // guarded by cb_mu
  bool closed_reported = false; // guarded by cb_mu

  // ---- callbacks ---------------------------------------------------------

  template <typename F>
  void emit(F&& f, bool is_close = false) {
    std::unique_lock<std::mutex> lock(cb_mu, std::defer_lock);
    if (cb_thread.load() != std::this_thread::get_id()) lock.lock();
    if (dead || closed_reported) return;
    if (!is_close && closing_flag.load()) return;
    if (is_close) closed_reported = true;
    auto prev = cb_thread.exchange(std::this_thread::get_id());
    try {
      f();
    } catch (...) {
      // A throwing callback must not leave the request bookkeeping (or a
      // pool worker) broken; there is nobody to rethrow to on this thread.
    }
    cb_thread.store(prev);
  }

  std::string redact(std::string s) const {
    std::vector<std::string> all = secrets;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (session) all.push_back(*session);
      if (expired_reported) all.push_back(*expired_reported);
    }
    for (const auto& v : all) {
      if (v.size() < 4) continue;
      for (auto pos = s.find(v); pos != std::string::npos; pos = s.find(v, pos + 10))
        s.replace(pos, v.size(), "<redacted>");
    }
    return s;
  }

  void error(const std::string& reason) {
    if (!events.on_error) return;
    auto r = redact(reason);
    emit([&] { events.on_error(r); });
  }

  void message(std::string m) {
    if (!events.on_message) return;
    emit([&] { events.on_message(std::move(m)); });
  }

  void messages_from_body(std::string_view body) {
    for (auto& m : detail::split_json_batch(body))
      message(std::move(m));
  }

  void session_expired(const std::string& sid) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (expired_reported == sid) return;
      expired_reported = sid;
    }
    if (events.on_session_expired) emit([&] { events.on_session_expired(); });
  }

  // ---- clients -----------------------------------------------------------

  std::unique_ptr<httplib::ClientImpl> make_client(std::chrono::milliseconds read_timeout) const {
    return make_http_client(*url, opts.connect_timeout, read_timeout, opts.request_timeout);
  }

  // `sid`: the session the message was sent in (POST), or the current one.
  httplib::Headers request_headers(std::optional<std::optional<std::string>> sid = std::nullopt,
                                   bool with_last_event_id = false, const std::string& last_event_id = {}) const {
    httplib::Headers h = base_headers;
    if (opts.auth)
      if (auto a = opts.auth->authorization()) h.emplace("Authorization", *a);
    std::lock_guard<std::mutex> lock(mu);
    const auto& s = sid ? *sid : session;
    if (s) h.emplace(k_session_header, *s);
    if (version) h.emplace(k_version_header, *version);
    if (with_last_event_id && !last_event_id.empty()) h.emplace("Last-Event-ID", last_event_id);
    return h;
  }

  // ---- POST queue --------------------------------------------------------

  void pump_locked() {
    while (!closing && !queue.empty() && barrier_open && in_flight < opts.max_in_flight) {
      auto q = std::move(queue.front());
      queue.pop_front();
      barrier_open = false;
      ++in_flight;
      std::unique_ptr<httplib::ClientImpl> client;
      if (!idle.empty()) {
        client = std::move(idle.back());
        idle.pop_back();
      } else {
        client = make_client(opts.request_timeout);
      }
      active.insert(client.get());
      auto self = shared_from_this();
      // std::function needs a copyable callable: hand the client over raw.
      auto* raw = client.release();
      pool.post([self, raw, q = std::move(q)]() mutable {
        self->run_post(std::unique_ptr<httplib::ClientImpl>(raw), std::move(q.msg), std::move(q.session));
      });
    }
  }

  void open_barrier() {
    std::lock_guard<std::mutex> lock(mu);
    if (barrier_open) return;
    barrier_open = true;
    if (stream_deferred && !closing) {
      stream_deferred = false;
      start_stream_locked();
    }
    pump_locked();
  }

  bool start_stream_locked() {
    auto ctl = std::make_shared<event_stream_ctl>();
    auto self = shared_from_this();
    if (!pool.start_event_stream([self, ctl] { self->run_stream(ctl); })) return false;
    stream = ctl;
    return true;
  }

  void run_post(std::unique_ptr<httplib::ClientImpl> client, std::string msg, std::optional<std::string> sid) {
    if (closing_flag.load()) {
      std::lock_guard<std::mutex> lock(mu);
      active.erase(client.get());
      --in_flight;
      return;
    }
    const bool is_request = detail::is_json_rpc_request(msg);
    bool barrier_released = false;
    auto release = [&] {
      if (barrier_released) return;
      barrier_released = true;
      open_barrier();
    };

    bool ok = false;
    for (int attempt = 0;; ++attempt) {
      httplib::Request req;
      req.method = "POST";
      req.path = url->target;
      req.headers = request_headers(std::optional<std::optional<std::string>>(std::in_place, sid));
      req.headers.emplace("Content-Type", "application/json");
      req.headers.emplace("Accept", "application/json, text/event-stream");
      const auto sent_session = req.get_header_value(k_session_header);
      const bool had_session = req.has_header(k_session_header);

      // The body goes through a provider so that we learn when it has been
      // written: that is when the next request may start.
      req.content_length_ = msg.size();
      req.content_provider_ = [&](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        if (!sink.write(msg.data() + offset, length)) return false;
        if (offset + length >= msg.size() && is_request) release();
        return true;
      };

      int status = -1;
      bool sse = false;
      std::string body;
      bool too_big = false;
      sse_parser parser(opts.max_message_bytes);
      // The requests of this POST still waiting for their responses: an SSE
      // stream that ends before they came is resumed (SEP-1699).
      std::vector<std::string> pending = detail::request_ids(msg);
      auto on_event = [&](sse_parser::event&& e) {
        if (e.type == "message") deliver_tracked(e.data, pending);
      };
      req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        if (status >= 200 && status < 300) capture_session(res);
        sse = status == 200 && media_type(res) == "text/event-stream";
        if (!is_request) release();
        return !closing_flag.load();
      };
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (closing_flag.load()) return false;
        if (sse) {
          if (!parser.feed(std::string_view(data, n), on_event)) {
            too_big = true;
            return false;
          }
          return true;
        }
        if (body.size() + n > opts.max_message_bytes) {
          too_big = true;
          return false;
        }
        body.append(data, n);
        return true;
      };

      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      ok = client->send(req, res, err);
      release();
      if (ok && !closing_flag.load() && opts.auth && attempt < k_max_auth_retries && asks_authorization(res)) {
        if (opts.auth->on_unauthorized(status, res.get_header_value("WWW-Authenticate"),
                                       req.get_header_value("Authorization")))
          continue;
      }
      if (ok && sse) parser.finish(on_event);
      // A stream the server closed (or that broke) after it had begun: the
      // responses still missing may come on a resumed stream.
      const bool stream_cut = sse && !too_big && (ok || (err == httplib::Error::Read && status == 200));
      const bool resumable = stream_cut && !pending.empty() && (ok || !parser.last_event_id().empty());

      if (!closing_flag.load() && resumable) {
        resume(*client, pending, parser, sid);
      } else if (!closing_flag.load()) {
        if (too_big) {
          post_failed(pending, "POST " + display + ": response exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
        } else if (!ok) {
          post_failed(pending, "POST " + display + ": " + describe_http_error(err, opts.request_timeout));
        } else {
          handle_post_response(res, status, sse, body, had_session, sent_session, pending);
        }
      }
      break;
    }

    std::lock_guard<std::mutex> lock(mu);
    active.erase(client.get());
    if (!closing && ok && idle.size() < opts.max_in_flight) idle.push_back(std::move(client));
    --in_flight;
    pump_locked();
  }

  // A POST is sent again after an authorization at most this often.
  static constexpr int k_max_auth_retries = 3;

  // 401, or 403 with `insufficient_scope` (step-up): an authorization may help.
  static bool asks_authorization(const httplib::Response& res) {
    if (res.status == 401) return true;
    if (res.status != 403) return false;
    auto challenge = res.get_header_value("WWW-Authenticate");
    return ascii_lower(challenge).find("insufficient_scope") != std::string::npos;
  }

  void capture_session(const httplib::Response& res) {
    if (!res.has_header(k_session_header)) return;
    auto id = res.get_header_value(k_session_header);
    if (id.empty() || !valid_header_value(id)) return;
    std::lock_guard<std::mutex> lock(mu);
    if (!closing) session = id;
  }

  // A POST failed: on_error, and with answer_failed_requests an error
  // response for each request of it still waiting for one.
  void post_failed(const std::vector<std::string>& pending, const std::string& reason) {
    if (opts.answer_failed_requests && !pending.empty()) fail_requests(pending, reason);
    error(reason);
  }

  void handle_post_response(const httplib::Response& res, int status, bool sse, const std::string& body,
                            bool had_session, const std::string& sent_session,
                            const std::vector<std::string>& pending) {
    if (status == 404 && had_session) {
      session_expired(sent_session);
      return;
    }
    if (status >= 200 && status < 300) {
      if (sse) return; // delivered while it streamed
      if (status == 202 || status == 204 || trim_space(body).empty()) return;
      auto type = media_type(res);
      if (type == "application/json" || type.empty()) {
        messages_from_body(body);
        return;
      }
      post_failed(pending, "POST " + display + ": HTTP " + std::to_string(status) + " with unexpected Content-Type '"
                             + excerpt(type, 60) + "'");
      return;
    }
    // A JSON-RPC error answer to one of our requests (some servers use 4xx
    // for those): the session needs it to complete the request.
    if (status >= 400 && status < 500 && media_type(res) == "application/json" && detail::has_non_null_id(body)) {
      messages_from_body(body);
      return;
    }
    if (opts.auth && (status == 401 || status == 403)) {
      // The body of a refusal may echo what we sent; the authorization's
      // own account says what is missing.
      auto why = opts.auth->failure();
      auto reason = "POST " + display + ": HTTP " + std::to_string(status) + ": authorization required"
                    + (why.empty() ? std::string() : ": " + why);
      if (events.on_auth_required) {
        auto r = redact(reason);
        emit([&] { events.on_auth_required(r); });
      } else {
        post_failed(pending, reason);
      }
      return;
    }
    std::string reason = "POST " + display + ": HTTP " + std::to_string(status);
    if (!res.reason.empty()) reason += " " + excerpt(res.reason, 60);
    if (!trim_space(body).empty()) reason += ": " + excerpt(trim_space(body));
    post_failed(pending, reason);
  }

  // ---- resuming a POST response stream (SEP-1699) -----------------------

  static constexpr int k_max_resumptions = 10;

  // Delivers the messages of one event and strikes the responses among them
  // off `pending`.
  void deliver_tracked(std::string_view data, std::vector<std::string>& pending) {
    if (!pending.empty())
      for (const auto& id : detail::response_ids(data))
        pending.erase(std::remove(pending.begin(), pending.end(), id), pending.end());
    messages_from_body(data);
  }

  // Completes the requests that will get no response with a JSON-RPC error
  // of our own, so each fails with the reason instead of waiting for its
  // timeout, and the connection itself lives on.
  void fail_requests(const std::vector<std::string>& ids, const std::string& why) {
    auto reason = json_string(redact(why));
    for (const auto& id : ids)
      message(R"({"jsonrpc":"2.0","id":)" + id + R"(,"error":{"code":-32000,"message":)" + reason + "}}");
  }

  // False when the transport closed meanwhile.
  bool wait_unless_closing(std::chrono::milliseconds delay) {
    std::unique_lock<std::mutex> lock(mu);
    return !closing_cv.wait_for(lock, delay, [&] { return closing; });
  }

  // The POST's SSE stream ended before the responses to `pending` came:
  // reconnect with GET and Last-Event-ID after the server's `retry:` (or our
  // own backoff), as often as it takes, up to k_max_resumptions. Runs on the
  // POST's pool worker with its client, so close() stops it like the POST.
  void resume(httplib::ClientImpl& client, std::vector<std::string>& pending, const sse_parser& first,
              const std::optional<std::string>& sid) {
    std::string last_id = first.last_event_id();
    std::optional<std::chrono::milliseconds> retry;
    if (first.retry_ms()) retry = bounded_retry(*first.retry_ms());
    auto backoff = 1000ms;
    const std::string what = "POST " + display + ": the response stream ended before the response";
    for (int attempt = 0; attempt < k_max_resumptions && !pending.empty(); ++attempt) {
      if (last_id.empty()) {
        fail_requests(pending, what + " and the server sent no event id to resume from");
        return;
      }
      auto delay = retry ? *retry : backoff;
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, 30000ms);
      if (!wait_unless_closing(delay)) return;

      httplib::Request req;
      req.method = "GET";
      req.path = url->target;
      req.headers = request_headers(std::optional<std::optional<std::string>>(std::in_place, sid), true, last_id);
      req.headers.emplace("Accept", "text/event-stream");
      const bool had_session = req.has_header(k_session_header);
      const auto sent_session = req.get_header_value(k_session_header);
      int status = -1;
      bool sse = false;
      bool too_big = false;
      sse_parser parser(opts.max_message_bytes);
      auto on_event = [&](sse_parser::event&& e) {
        if (e.type == "message") deliver_tracked(e.data, pending);
      };
      req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        sse = status == 200 && media_type(res) == "text/event-stream";
        return !closing_flag.load();
      };
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (closing_flag.load() || !sse) return !closing_flag.load();
        if (!parser.feed(std::string_view(data, n), on_event)) {
          too_big = true;
          return false;
        }
        // Done once every response is in, whatever the server does next.
        return !pending.empty();
      };
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      bool ok = client.send(req, res, err);
      if (closing_flag.load()) return;
      if (ok && sse) parser.finish(on_event);
      if (pending.empty()) return;
      if (!parser.last_event_id().empty()) last_id = parser.last_event_id();
      if (parser.retry_ms()) retry = bounded_retry(*parser.retry_ms());
      if (too_big) {
        fail_requests(pending, what + "; its resumed stream exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
        return;
      }
      if (status == 404 && had_session) {
        session_expired(sent_session);
        return;
      }
      if (status != 200 || !sse) {
        std::string how = status < 0 ? describe_http_error(err, opts.request_timeout) : "HTTP " + std::to_string(status);
        fail_requests(pending, what + "; resuming it with GET failed: " + how);
        return;
      }
      // The resumed stream ended early too: resume again.
    }
    if (!pending.empty())
      fail_requests(pending, what + "; gave up after " + std::to_string(k_max_resumptions) + " resumptions");
  }

  // ---- event stream ------------------------------------------------------

  void run_stream(const std::shared_ptr<event_stream_ctl>& ctl) {
    auto backoff = 1000ms;
    std::string last_event_id;
    std::optional<std::chrono::milliseconds> server_retry; // the last `retry:` seen
    bool served = false; // a GET was answered with an event stream
    for (;;) {
      auto client = make_client(opts.event_stream_idle_timeout);
      client->set_socket_options([ctl](int fd) {
        // httplib's default options, plus: a stop that came before this
        // socket existed (so httplib's stop() could not reach it) wins.
        int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        if (ctl->stopped()) ::shutdown(fd, SHUT_RDWR);
      });
      {
        std::lock_guard<std::mutex> lock(ctl->mu);
        if (ctl->stop) return;
        ctl->client = client.get();
      }
      httplib::Request req;
      req.method = "GET";
      req.path = url->target;
      req.headers = request_headers(std::nullopt, true, last_event_id);
      req.headers.emplace("Accept", "text/event-stream");
      const bool had_session = req.has_header(k_session_header);
      const auto sent_session = req.get_header_value(k_session_header);

      int status = -1;
      bool sse = false;
      bool got_event = false;
      bool too_big = false;
      std::string body;
      sse_parser parser(opts.max_message_bytes);
      auto on_event = [&](sse_parser::event&& e) {
        got_event = true;
        if (e.type == "message") messages_from_body(e.data);
      };
      req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        sse = status == 200 && media_type(res) == "text/event-stream";
        return !ctl->stopped();
      };
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (ctl->stopped()) return false;
        if (sse) {
          if (!parser.feed(std::string_view(data, n), on_event)) {
            too_big = true;
            return false;
          }
          return true;
        }
        if (body.size() < 4096) body.append(data, std::min<std::size_t>(n, 4096));
        return true;
      };
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      bool ok = client->send(req, res, err);
      {
        std::lock_guard<std::mutex> lock(ctl->mu);
        ctl->client = nullptr;
        if (ctl->stop) return;
      }
      if (ok && sse) parser.finish(on_event);
      // An id or retry field counts even on an event without data (a
      // priming event may carry nothing else).
      if (!parser.last_event_id().empty()) last_event_id = parser.last_event_id();
      if (parser.retry_ms()) server_retry = bounded_retry(*parser.retry_ms());
      // The stream is an optional side channel: requests go over POST and
      // decide whether the connection lives. So it never fails the
      // connection; it retries what may pass (the server restarting) and
      // gives up quietly on what will not (no stream offered, bad answers).
      if (too_big) return;
      const bool unreachable = !ok && !(err == httplib::Error::Read && status == 200);
      if (!unreachable) {
        if (status == 405) return; // the server offers no stream
        // Only a server that did serve the stream is taken at its word: a
        // 404 to the very first GET is as likely a server without a GET
        // route (it should say 405), and the next POST finds out anyway.
        if (status == 404 && had_session && served) {
          session_expired(sent_session);
          return;
        }
        if (status != 200 || !sse) return;
        served = true;
      }
      // The server ended the stream or it went silent: reopen it.
      if (got_event) backoff = 1000ms;
      auto delay = server_retry ? *server_retry : backoff;
      std::unique_lock<std::mutex> lock(ctl->mu);
      if (ctl->cv.wait_for(lock, delay, [&] { return ctl->stopped(); })) return;
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, 30000ms);
    }
  }

  // ---- shutdown ----------------------------------------------------------

  // Called with `mu` held.
  void abort_all_locked() {
    closing = true;
    closing_flag = true;
    closing_cv.notify_all();
    queue.clear();
    for (auto* c : active)
      c->stop();
    idle.clear();
    if (stream) stream->request_stop();
  }
};

http_transport::http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                               http_worker_pool& pool, std::chrono::milliseconds request_timeout)
    : http_transport(std::move(url), std::move(headers), std::move(events), pool, [&] {
        http_transport_options o;
        o.request_timeout = request_timeout;
        return o;
      }()) {}

http_transport::http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                               http_worker_pool& pool, http_transport_options options) {
  if (options.max_in_flight == 0) options.max_in_flight = 1;
  // A configured Authorization header is the user's own credential: OAuth
  // stays out of its way.
  for (const auto& h : headers)
    if (ascii_iequals(h.first, "Authorization")) options.auth.reset();
  state_ = std::make_shared<state>(pool, std::move(events), options);
  std::string why;
  state_->url = http_url::parse(url, &why);
  if (state_->url) {
    state_->display = state_->url->display;
  } else {
    // Never echo the text itself: it may carry credentials.
    state_->display = "<invalid URL>";
  }
  for (auto& [name, value] : headers) {
    if (!valid_header_name(name)) {
      if (why.empty()) why = "invalid header name in the configuration";
      continue;
    }
    if (!valid_header_value(value)) {
      if (why.empty()) why = "header '" + name + "' has a value with line breaks";
      continue;
    }
    if (value.size() >= 4) state_->secrets.push_back(value);
    // "Bearer TOKEN": a server that echoes the token alone must not get it
    // into a reason either.
    if (ascii_iequals(name, "Authorization"))
      if (auto sp = value.find(' '); sp != std::string::npos && value.size() - sp - 1 >= 4)
        state_->secrets.push_back(value.substr(sp + 1));
    if (transport_owned_header(name)) continue;
    state_->base_headers.emplace(name, value);
  }
  // Longer secrets first, so a value containing another is redacted whole.
  std::sort(state_->secrets.begin(), state_->secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  if (!state_->url || !why.empty()) {
    if (state_->url) why = state_->display + ": " + why;
    state_->url.reset(); // unusable: sends are dropped
    auto s = state_;
    pool.post([s, why] { s->error(why); });
  }
}

http_transport::~http_transport() {
  if (state_->opts.auth) state_->opts.auth->cancel();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->abort_all_locked();
  }
  // Wait for a callback in progress (unless we are inside it), then no more.
  if (state_->cb_thread.load() == std::this_thread::get_id()) {
    state_->dead = true;
  } else {
    std::lock_guard<std::mutex> lock(state_->cb_mu);
    state_->dead = true;
  }
}

void http_transport::send(std::string json_message) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->closing || !state_->url) return;
  state_->queue.push_back({std::move(json_message), state_->session});
  state_->pump_locked();
}

void http_transport::set_protocol_version(std::string version) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (version.empty() || !valid_header_value(version)) state_->version.reset();
  else state_->version = std::move(version);
}

void http_transport::reset_session() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->session.reset();
}

std::optional<std::string> http_transport::session_id() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->session;
}

const std::string& http_transport::display_url() const {
  return state_->display;
}

bool http_transport::open_event_stream() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->closing || !state_->url) return false;
  if (state_->stream || state_->stream_deferred) return true;
  // Opened right after notifications/initialized was queued, the GET goes
  // out once that was accepted (as the reference client does), so the
  // stream is open before any request a server might answer with a
  // request of its own on it.
  if (!state_->barrier_open || !state_->queue.empty()) {
    state_->stream_deferred = true;
    return true;
  }
  return state_->start_stream_locked();
}

void http_transport::close() {
  std::optional<std::string> sid, version;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closing) return;
    state_->abort_all_locked();
    sid = state_->session;
    version = state_->version;
  }
  if (state_->opts.auth) state_->opts.auth->cancel();
  auto s = state_;
  s->pool.post([s, sid, version] {
    if (sid && s->url) {
      auto client = s->make_client(s->opts.close_timeout);
      client->set_connection_timeout(s->opts.close_timeout);
      client->set_write_timeout(s->opts.close_timeout);
      client->set_keep_alive(false);
      httplib::Headers h = s->base_headers;
      if (s->opts.auth)
        if (auto a = s->opts.auth->authorization()) h.emplace("Authorization", *a);
      h.emplace(k_session_header, *sid);
      if (version) h.emplace(k_version_header, *version);
      client->Delete(s->url->target.c_str(), h); // best effort: the result does not matter
    }
    if (s->events.on_closed) s->emit([&] { s->events.on_closed(); }, true);
    else s->emit([] {}, true);
  });
}

} // namespace mcprt::io
