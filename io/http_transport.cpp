#include "io/http_transport.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "core/ascii.hpp"
#include "core/json_locate.hpp"
#include "core/mcp_headers.hpp"
#include "core/sse_parser.hpp"
#include "core/untrusted_text.hpp"
#include "io/http_client.hpp"
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

namespace {

// Runs a transport's http_auth calls, which may block (a token refresh, a
// person at a browser), off the client's loop thread: one thread per
// transport with authorization, started with its first job.
class auth_worker {
public:
  ~auth_worker() { stop(); }
  void post(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
    cv_.notify_one();
  }
  // Drops queued jobs and waits for the running one.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      jobs_.clear();
      cv_.notify_one();
    }
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    else if (thread_.joinable()) thread_.detach();
  }

private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      try {
        job();
      } catch (...) {
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

bool has_header(const header_list& h, std::string_view name) {
  return std::any_of(h.begin(), h.end(), [&](const auto& p) { return ascii_iequals(p.first, name); });
}

std::string header_value(const header_list& h, std::string_view name) {
  for (const auto& [n, v] : h)
    if (ascii_iequals(n, name)) return v;
  return {};
}

// 401, or 403 with `insufficient_scope` (step-up): an authorization may help.
bool asks_authorization(const http_response_head& head) {
  if (head.status == 401) return true;
  if (head.status != 403) return false;
  return ascii_lower(head.header("WWW-Authenticate")).find("insufficient_scope") != std::string::npos;
}

} // namespace

// Everything of a transport lives on the client's loop thread, but for the
// session id and protocol version (guarded by `mu`: the public getters and
// send() read them) and `closing_flag` (read by open_event_stream()).
struct http_transport::state : std::enable_shared_from_this<http_transport::state> {
  state(http_client& c, http_events ev, http_transport_options o) : client(c), events(std::move(ev)), opts(std::move(o)) {}

  http_client& client;
  const http_events events;
  const http_transport_options opts;
  std::optional<http_url> url;
  std::string display;
  header_list base_headers;
  std::vector<std::string> secrets; // configured header values, redacted from reasons
  auth_worker auth;

  mutable std::mutex mu;
  std::optional<std::string> session;
  std::optional<std::string> version;
  std::optional<std::string> expired_reported;
  std::atomic<bool> closing_flag{false};

  // ---- loop thread only ------------------------------------------------
  struct queued {
    std::string msg;
    std::optional<std::string> session; // as of send()
    std::vector<std::pair<std::string, std::string>> extra_headers;
  };
  std::deque<queued> queue;
  std::size_t in_flight = 0;
  bool barrier_open = true;
  bool closing = false;
  bool dead = false;
  bool closed_reported = false;
  std::set<http_client::request_id> active;
  std::set<http_client::timer_id> timers;
  bool stream_started = false;
  bool stream_deferred = false;

  // ---- callbacks ---------------------------------------------------------

  template <typename F>
  void emit(F&& f, bool is_close = false) {
    if (dead || closed_reported) return;
    if (!is_close && closing) return;
    if (is_close) closed_reported = true;
    try {
      f();
    } catch (...) {
      // A throwing callback must not leave the request bookkeeping broken;
      // there is nobody to rethrow to on the loop thread.
    }
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

  // ---- requests ----------------------------------------------------------

  // `sid`: the session the message was sent in (POST), or the current one.
  header_list request_headers(const std::optional<std::string>& authorization,
                              std::optional<std::optional<std::string>> sid = std::nullopt,
                              const std::string& last_event_id = {}) const {
    header_list h = base_headers;
    if (authorization) h.emplace_back("Authorization", *authorization);
    std::lock_guard<std::mutex> lock(mu);
    const auto& s = sid ? *sid : session;
    if (s) h.emplace_back(k_session_header, *s);
    if (version) h.emplace_back(k_version_header, *version);
    if (!last_event_id.empty()) h.emplace_back("Last-Event-ID", last_event_id);
    return h;
  }

  http_request make_request(const char* method, header_list headers, std::chrono::milliseconds idle) const {
    http_request r;
    r.method = method;
    r.url = url->origin() + url->target;
    r.headers = std::move(headers);
    r.connect_timeout = opts.connect_timeout;
    r.idle_timeout = idle;
    r.proxy = opts.proxy;
    r.ca_file = opts.ca_file;
    return r;
  }

  // Runs `then(authorization)` on the loop thread once the authorization
  // header is known: at once without auth, else after a trip to the auth
  // thread (it may refresh a token).
  void with_authorization(std::function<void(std::optional<std::string>)> then) {
    if (!opts.auth) {
      then(std::nullopt);
      return;
    }
    auto self = shared_from_this();
    auth.post([self, then = std::move(then)]() mutable {
      auto a = self->opts.auth->authorization();
      self->client.post([self, then = std::move(then), a = std::move(a)]() mutable {
        if (!self->closing) then(std::move(a));
      });
    });
  }

  http_client::request_id start(http_request req, http_handlers h) {
    auto id = client.start(std::move(req), std::move(h));
    active.insert(id);
    return id;
  }

  void after(std::chrono::milliseconds delay, std::function<void()> fn) {
    auto self = shared_from_this();
    auto id = std::make_shared<http_client::timer_id>(0);
    *id = client.run_after(delay, [self, id, fn = std::move(fn)] {
      self->timers.erase(*id);
      if (!self->closing) fn();
    });
    timers.insert(*id);
  }

  // ---- POST queue --------------------------------------------------------

  // One POST of one queued message, with its attempts and resumptions.
  struct post_ctx {
    queued q;
    bool is_request = false;
    bool barrier_released = false;
    bool modern = false; // sent at a 2026-07-28-or-later revision
    // A subscriptions/listen: its response is a stream the server holds
    // open for as long as it likes. Silence is waited out as the GET
    // stream's is, and its end, however it ends, answers only the request.
    bool held_open = false;
    int attempt = 0;
    // The requests of this POST still waiting for their responses: an SSE
    // stream that ends before they came is resumed (SEP-1699).
    std::vector<std::string> pending;
    // Per attempt:
    std::string sent_authorization;
    std::string auth_failure; // the http_auth's failure(), after a refusal
    bool had_session = false;
    std::string sent_session;
    http_response_head head;
    bool sse = false;
    bool too_big = false;
    std::string body;
    std::optional<sse_parser> parser;
  };

  void pump() {
    while (!closing && !queue.empty() && barrier_open && in_flight < opts.max_in_flight) {
      auto ctx = std::make_shared<post_ctx>();
      ctx->q = std::move(queue.front());
      queue.pop_front();
      ctx->is_request = detail::is_json_rpc_request(ctx->q.msg);
      ctx->pending = detail::request_ids(ctx->q.msg);
      barrier_open = false;
      ++in_flight;
      issue_post(ctx);
    }
  }

  void release(post_ctx& ctx) {
    if (ctx.barrier_released) return;
    ctx.barrier_released = true;
    if (barrier_open) return;
    barrier_open = true;
    if (stream_deferred && !closing) {
      stream_deferred = false;
      open_stream();
    }
    pump();
  }

  void finish_post(post_ctx& ctx) {
    release(ctx);
    --in_flight;
    pump();
  }

  void issue_post(const std::shared_ptr<post_ctx>& ctx) {
    auto self = shared_from_this();
    with_authorization([self, ctx](std::optional<std::string> a) { self->send_post(ctx, std::move(a)); });
  }

  void send_post(const std::shared_ptr<post_ctx>& ctx, std::optional<std::string> authorization) {
    auto headers = request_headers(authorization, std::optional<std::optional<std::string>>(std::in_place, ctx->q.session));
    headers.emplace_back("Content-Type", "application/json");
    headers.emplace_back("Accept", "application/json, text/event-stream");
    // At 2026-07-28 the sender hands over what the body mirrors into
    // headers (Mcp-Method, Mcp-Name, Mcp-Param-*: core/mcp_session).
    ctx->modern = is_modern_protocol(header_value(headers, k_version_header));
    for (auto& h : ctx->q.extra_headers)
      headers.push_back(h);
    ctx->held_open = ctx->modern && header_value(headers, "Mcp-Method") == "subscriptions/listen";
    ctx->sent_authorization = authorization.value_or("");
    ctx->had_session = has_header(headers, k_session_header);
    ctx->sent_session = header_value(headers, k_session_header);
    ctx->head = {};
    ctx->sse = false;
    ctx->too_big = false;
    ctx->body.clear();
    ctx->parser.emplace(opts.max_message_bytes);
    auto req = make_request("POST", std::move(headers),
                            ctx->held_open ? opts.event_stream_idle_timeout : opts.request_timeout);
    req.body = ctx->q.msg;

    auto self = shared_from_this();
    auto id = std::make_shared<http_client::request_id>(0);
    http_handlers h;
    h.on_body_sent = [self, ctx] {
      // A request may be followed by the next message once it is out; a
      // notification or response only once the server has taken it.
      if (ctx->is_request) self->release(*ctx);
    };
    h.on_head = [self, ctx](const http_response_head& head) {
      ctx->head = head;
      if (head.status >= 200 && head.status < 300) self->capture_session(head);
      ctx->sse = head.event_stream();
      if (!ctx->is_request) self->release(*ctx);
      return !self->closing;
    };
    h.on_data = [self, ctx](std::string_view bytes) {
      if (self->closing) return false;
      if (ctx->sse) {
        if (!ctx->parser->feed(bytes, [&](sse_parser::event&& e) {
              if (e.type == "message") self->deliver_tracked(e.data, ctx->pending);
            })) {
          ctx->too_big = true;
          return false;
        }
        return !self->closing;
      }
      if (ctx->body.size() + bytes.size() > self->opts.max_message_bytes) {
        ctx->too_big = true;
        return false;
      }
      ctx->body.append(bytes);
      return true;
    };
    h.on_done = [self, ctx, id](const http_outcome& o) {
      self->active.erase(*id);
      self->post_done(ctx, o);
    };
    *id = start(std::move(req), std::move(h));
  }

  void post_done(const std::shared_ptr<post_ctx>& ctx, const http_outcome& o) {
    if (closing) return;
    // Whatever happened, the message is out: the next may go.
    release(*ctx);
    // A refusal goes to the auth thread: to authorize and send again while
    // tries remain, and for failure() in any case. Never an http_auth call
    // on the loop: an authorization may hold its lock across a request on
    // this very client.
    if (o.ok() && opts.auth && (ctx->head.status == 401 || ctx->head.status == 403)) {
      const bool may_retry = ctx->attempt < k_max_auth_retries && asks_authorization(ctx->head);
      auto self = shared_from_this();
      auto status = ctx->head.status;
      auto challenge = ctx->head.header("WWW-Authenticate");
      auth.post([self, ctx, status, challenge, o, may_retry] {
        const auto& a = self->opts.auth;
        bool again = may_retry && a->on_unauthorized(status, challenge, ctx->sent_authorization);
        std::string why = again ? std::string() : a->failure();
        self->client.post([self, ctx, again, o, why = std::move(why)] {
          if (self->closing) return;
          if (again) {
            ++ctx->attempt;
            self->issue_post(ctx);
          } else {
            ctx->auth_failure = why;
            self->conclude_post(ctx, o);
          }
        });
      });
      return;
    }
    conclude_post(ctx, o);
  }

  void conclude_post(const std::shared_ptr<post_ctx>& ctx, const http_outcome& o) {
    auto deliver = [&](sse_parser::event&& e) {
      if (e.type == "message") deliver_tracked(e.data, ctx->pending);
    };
    if (o.ok() && ctx->sse) ctx->parser->finish(deliver);
    // A stream the server closed (or that broke) after it had begun: the
    // responses still missing may come on a resumed stream.
    const bool stream_cut = ctx->sse && !ctx->too_big && (o.ok() || (o.got_head && o.failure != http_failure::aborted));
    const bool resumable = stream_cut && !ctx->pending.empty() && (o.ok() || !ctx->parser->last_event_id().empty());
    if (closing) return;
    if (resumable) {
      auto r = std::make_shared<resumption>();
      r->ctx = ctx;
      r->last_id = ctx->parser->last_event_id();
      if (ctx->parser->retry_ms()) r->retry = bounded_retry(*ctx->parser->retry_ms());
      resume_step(r);
      return;
    }
    if (ctx->too_big) {
      post_failed(*ctx, "POST " + display + ": response exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
    } else if (!o.ok()) {
      post_failed(*ctx, "POST " + display + ": " + o.reason);
    } else {
      handle_post_response(*ctx);
    }
    finish_post(*ctx);
  }

  // A POST is sent again after an authorization at most this often.
  static constexpr int k_max_auth_retries = 3;

  void capture_session(const http_response_head& head) {
    if (!head.has_header(k_session_header)) return;
    auto id = head.header(k_session_header);
    if (id.empty() || !valid_header_value(id)) return;
    std::lock_guard<std::mutex> lock(mu);
    if (!closing) session = id;
  }

  // A POST failed: on_error, and with answer_failed_requests an error
  // response for each request of it still waiting for one.
  void post_failed(const post_ctx& ctx, const std::string& reason) {
    if (ctx.held_open) {
      if (!ctx.pending.empty()) fail_requests(ctx.pending, reason);
      return;
    }
    if (opts.answer_failed_requests && !ctx.pending.empty()) fail_requests(ctx.pending, reason);
    error(reason);
  }

  void handle_post_response(post_ctx& ctx) {
    const auto& head = ctx.head;
    const int status = head.status;
    const auto& body = ctx.body;
    if (status == 404 && ctx.had_session) {
      session_expired(ctx.sent_session);
      return;
    }
    if (status >= 200 && status < 300) {
      if (ctx.sse) return; // delivered while it streamed
      if (status == 202 || status == 204 || trim_space(body).empty()) return;
      auto type = head.media_type();
      if (type == "application/json" || type.empty()) {
        messages_from_body(body);
        return;
      }
      post_failed(ctx, "POST " + display + ": HTTP " + std::to_string(status) + " with unexpected Content-Type '"
                                   + excerpt(type, 60) + "'");
      return;
    }
    // A JSON-RPC error answer to one of our requests (some servers use 4xx
    // for those): the session needs it to complete the request.
    if (status >= 400 && status < 500 && head.media_type() == "application/json" && detail::has_non_null_id(body)) {
      messages_from_body(body);
      return;
    }
    // At a modern revision a refusal answers the request, not the
    // connection: a legacy server refusing a stateless request is how the
    // session learns to fall back to initialize, and a modern one's error
    // (its id lost, or no JSON-RPC body) must reach the request too.
    if (ctx.modern && status >= 400 && status < 500 && status != 401 && status != 403 && !ctx.pending.empty()) {
      json_limits lim;
      lim.max_bytes = 64 * 1024;
      lim.max_depth = 16;
      lim.replace_invalid_utf8 = true;
      auto parsed = parse_bounded_json(body, lim);
      auto& j = parsed.value;
      if (ctx.pending.size() == 1 && parsed.ok() && j.is_object() && j.contains("error") && j["error"].is_object()
          && j["error"].contains("code") && j["error"]["code"].is_number_integer()) {
        j["id"] = nlohmann::json::parse(ctx.pending.front(), nullptr, false);
        j["jsonrpc"] = "2.0";
        j.erase("result");
        message(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        return;
      }
      std::string reason = "POST " + display + ": HTTP " + std::to_string(status);
      if (!trim_space(body).empty()) reason += ": " + excerpt(trim_space(body));
      fail_requests(ctx.pending, reason);
      return;
    }
    if (opts.auth && (status == 401 || status == 403)) {
      // The body of a refusal may echo what we sent; the authorization's
      // own account says what is missing.
      const auto& why = ctx.auth_failure;
      auto reason = "POST " + display + ": HTTP " + std::to_string(status) + ": authorization required"
                    + (why.empty() ? std::string() : ": " + why);
      if (events.on_auth_required) {
        auto r = redact(reason);
        emit([&] { events.on_auth_required(r); });
      } else {
        post_failed(ctx, reason);
      }
      return;
    }
    std::string reason = "POST " + display + ": HTTP " + std::to_string(status);
    if (!head.reason.empty()) reason += " " + excerpt(head.reason, 60);
    if (!trim_space(body).empty()) reason += ": " + excerpt(trim_space(body));
    post_failed(ctx, reason);
  }

  // ---- resuming a POST response stream (SEP-1699) -----------------------

  static constexpr int k_max_resumptions = 10;

  struct resumption {
    std::shared_ptr<post_ctx> ctx;
    std::string last_id;
    std::optional<std::chrono::milliseconds> retry;
    std::chrono::milliseconds backoff{1000};
    int attempt = 0;
    // Per attempt:
    http_response_head head;
    bool had_session = false;
    std::string sent_session;
    bool sse = false;
    bool too_big = false;
    std::optional<sse_parser> parser;
  };

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

  std::string resume_what() const { return "POST " + display + ": the response stream ended before the response"; }

  // The POST's SSE stream ended before the responses to `pending` came:
  // reconnect with GET and Last-Event-ID after the server's `retry:` (or our
  // own backoff), as often as it takes, up to k_max_resumptions. The POST's
  // in-flight slot stays taken meanwhile.
  void resume_step(const std::shared_ptr<resumption>& r) {
    auto& pending = r->ctx->pending;
    if (pending.empty()) {
      finish_post(*r->ctx);
      return;
    }
    if (r->attempt >= k_max_resumptions) {
      fail_requests(pending, resume_what() + "; gave up after " + std::to_string(k_max_resumptions) + " resumptions");
      finish_post(*r->ctx);
      return;
    }
    if (r->last_id.empty()) {
      fail_requests(pending, resume_what() + " and the server sent no event id to resume from");
      finish_post(*r->ctx);
      return;
    }
    ++r->attempt;
    auto delay = r->retry ? *r->retry : r->backoff;
    r->backoff = std::min<std::chrono::milliseconds>(r->backoff * 2, 30000ms);
    auto self = shared_from_this();
    after(delay, [self, r] {
      self->with_authorization([self, r](std::optional<std::string> a) { self->send_resume(r, std::move(a)); });
    });
  }

  void send_resume(const std::shared_ptr<resumption>& r, std::optional<std::string> authorization) {
    auto headers = request_headers(authorization, std::optional<std::optional<std::string>>(std::in_place, r->ctx->q.session),
                                   r->last_id);
    headers.emplace_back("Accept", "text/event-stream");
    r->had_session = has_header(headers, k_session_header);
    r->sent_session = header_value(headers, k_session_header);
    r->head = {};
    r->sse = false;
    r->too_big = false;
    r->parser.emplace(opts.max_message_bytes);
    auto self = shared_from_this();
    auto id = std::make_shared<http_client::request_id>(0);
    http_handlers h;
    h.on_head = [self, r](const http_response_head& head) {
      r->head = head;
      r->sse = head.event_stream();
      return !self->closing;
    };
    h.on_data = [self, r](std::string_view bytes) {
      if (self->closing || !r->sse) return !self->closing;
      if (!r->parser->feed(bytes, [&](sse_parser::event&& e) {
            if (e.type == "message") self->deliver_tracked(e.data, r->ctx->pending);
          })) {
        r->too_big = true;
        return false;
      }
      // Done once every response is in, whatever the server does next.
      return !r->ctx->pending.empty();
    };
    h.on_done = [self, r, id](const http_outcome& o) {
      self->active.erase(*id);
      self->resume_done(r, o);
    };
    *id = start(make_request("GET", std::move(headers),
                             r->ctx->held_open ? opts.event_stream_idle_timeout : opts.request_timeout),
                std::move(h));
  }

  void resume_done(const std::shared_ptr<resumption>& r, const http_outcome& o) {
    if (closing) return;
    auto& pending = r->ctx->pending;
    if (o.ok() && r->sse) r->parser->finish([&](sse_parser::event&& e) {
      if (e.type == "message") deliver_tracked(e.data, pending);
    });
    if (pending.empty()) {
      finish_post(*r->ctx);
      return;
    }
    if (!r->parser->last_event_id().empty()) r->last_id = r->parser->last_event_id();
    if (r->parser->retry_ms()) r->retry = bounded_retry(*r->parser->retry_ms());
    if (r->too_big) {
      fail_requests(pending, resume_what() + "; its resumed stream exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
      finish_post(*r->ctx);
      return;
    }
    if (r->head.status == 404 && r->had_session) {
      session_expired(r->sent_session);
      finish_post(*r->ctx);
      return;
    }
    if (r->head.status != 200 || !r->sse) {
      std::string how = o.got_head ? "HTTP " + std::to_string(r->head.status) : o.reason;
      fail_requests(pending, resume_what() + "; resuming it with GET failed: " + how);
      finish_post(*r->ctx);
      return;
    }
    // The resumed stream ended early too: resume again.
    resume_step(r);
  }

  // ---- event stream ------------------------------------------------------

  struct stream_ctx {
    std::chrono::milliseconds backoff{1000};
    std::string last_event_id;
    std::optional<std::chrono::milliseconds> server_retry; // the last `retry:` seen
    bool served = false; // a GET was answered with an event stream
    // Per attempt:
    http_response_head head;
    bool had_session = false;
    std::string sent_session;
    bool sse = false;
    bool got_event = false;
    bool too_big = false;
    std::optional<sse_parser> parser;
  };
  std::shared_ptr<stream_ctx> stream;

  void open_stream() {
    if (stream_started || closing) return;
    stream_started = true;
    stream = std::make_shared<stream_ctx>();
    stream_attempt();
  }

  void stream_attempt() {
    auto self = shared_from_this();
    with_authorization([self](std::optional<std::string> a) { self->send_stream_get(std::move(a)); });
  }

  void send_stream_get(std::optional<std::string> authorization) {
    auto s = stream;
    auto headers = request_headers(authorization, std::nullopt, s->last_event_id);
    headers.emplace_back("Accept", "text/event-stream");
    s->had_session = has_header(headers, k_session_header);
    s->sent_session = header_value(headers, k_session_header);
    s->head = {};
    s->sse = false;
    s->got_event = false;
    s->too_big = false;
    s->parser.emplace(opts.max_message_bytes);
    auto self = shared_from_this();
    auto id = std::make_shared<http_client::request_id>(0);
    http_handlers h;
    h.on_head = [self, s](const http_response_head& head) {
      s->head = head;
      s->sse = head.event_stream();
      return !self->closing;
    };
    h.on_data = [self, s](std::string_view bytes) {
      if (self->closing) return false;
      if (!s->sse) return true; // a refusal's body: not needed
      if (!s->parser->feed(bytes, [&](sse_parser::event&& e) {
            s->got_event = true;
            if (e.type == "message") self->messages_from_body(e.data);
          })) {
        s->too_big = true;
        return false;
      }
      return !self->closing;
    };
    h.on_done = [self, s, id](const http_outcome& o) {
      self->active.erase(*id);
      self->stream_done(s, o);
    };
    auto req = make_request("GET", std::move(headers), opts.event_stream_idle_timeout);
    req.tcp_keepalive = true;
    *id = start(std::move(req), std::move(h));
  }

  void stream_done(const std::shared_ptr<stream_ctx>& s, const http_outcome& o) {
    if (closing) return;
    if (o.ok() && s->sse) s->parser->finish([&](sse_parser::event&& e) {
      s->got_event = true;
      if (e.type == "message") messages_from_body(e.data);
    });
    // An id or retry field counts even on an event without data (a
    // priming event may carry nothing else).
    if (!s->parser->last_event_id().empty()) s->last_event_id = s->parser->last_event_id();
    if (s->parser->retry_ms()) s->server_retry = bounded_retry(*s->parser->retry_ms());
    // The stream is an optional side channel: requests go over POST and
    // decide whether the connection lives. So it never fails the
    // connection; it retries what may pass (the server restarting) and
    // gives up quietly on what will not (no stream offered, bad answers).
    if (s->too_big) return;
    const bool unreachable = !o.got_head;
    if (!unreachable) {
      if (s->head.status == 405) return; // the server offers no stream
      // Only a server that did serve the stream is taken at its word: a
      // 404 to the very first GET is as likely a server without a GET
      // route (it should say 405), and the next POST finds out anyway.
      if (s->head.status == 404 && s->had_session && s->served) {
        session_expired(s->sent_session);
        return;
      }
      if (s->head.status != 200 || !s->sse) return;
      s->served = true;
    }
    // The server ended the stream or it went silent: reopen it.
    if (s->got_event) s->backoff = 1000ms;
    auto delay = s->server_retry ? *s->server_retry : s->backoff;
    s->backoff = std::min<std::chrono::milliseconds>(s->backoff * 2, 30000ms);
    auto self = shared_from_this();
    after(delay, [self] { self->stream_attempt(); });
  }

  // ---- shutdown ----------------------------------------------------------

  void abort_all() {
    closing = true;
    closing_flag = true;
    queue.clear();
    for (auto id : active)
      client.cancel(id);
    active.clear();
    for (auto id : timers)
      client.cancel_timer(id);
    timers.clear();
  }

  void send_delete(std::optional<std::string> sid, std::optional<std::string> ver,
                   std::optional<std::string> authorization) {
    auto self = shared_from_this();
    auto report_closed = [self] {
      if (self->events.on_closed) self->emit([&] { self->events.on_closed(); }, true);
      else self->emit([] {}, true);
    };
    if (!sid || !url) {
      report_closed();
      return;
    }
    header_list h = base_headers;
    if (authorization) h.emplace_back("Authorization", *authorization);
    h.emplace_back(k_session_header, *sid);
    if (ver) h.emplace_back(k_version_header, *ver);
    auto req = make_request("DELETE", std::move(h), opts.close_timeout);
    req.connect_timeout = opts.close_timeout;
    http_handlers handlers;
    // Best effort: the outcome does not matter. Not among `active`: the
    // destructor lets it finish.
    handlers.on_done = [report_closed](const http_outcome&) { report_closed(); };
    client.start(std::move(req), std::move(handlers));
  }
};

http_transport::http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                               http_client& client, std::chrono::milliseconds request_timeout)
    : http_transport(std::move(url), std::move(headers), std::move(events), client, [&] {
        http_transport_options o;
        o.request_timeout = request_timeout;
        return o;
      }()) {}

http_transport::http_transport(std::string url, std::map<std::string, std::string> headers, http_events events,
                               http_client& client, http_transport_options options) {
  if (options.max_in_flight == 0) options.max_in_flight = 1;
  // A configured Authorization header is the user's own credential: OAuth
  // stays out of its way.
  for (const auto& h : headers)
    if (ascii_iequals(h.first, "Authorization")) options.auth.reset();
  state_ = std::make_shared<state>(client, std::move(events), options);
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
    state_->base_headers.emplace_back(name, value);
  }
  // Longer secrets first, so a value containing another is redacted whole.
  std::sort(state_->secrets.begin(), state_->secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  if (!state_->url || !why.empty()) {
    if (state_->url) why = state_->display + ": " + why;
    state_->url.reset(); // unusable: sends are dropped
    auto s = state_;
    client.post([s, why] { s->error(why); });
  }
}

http_transport::~http_transport() {
  if (state_->opts.auth) state_->opts.auth->cancel();
  auto s = state_;
  // On the loop thread, so no callback is running and none will.
  s->client.run_sync([s] {
    s->abort_all();
    s->dead = true;
  });
  s->auth.stop();
}

void http_transport::send(std::string json_message) {
  send(std::move(json_message), {});
}

void http_transport::send(std::string json_message, std::vector<std::pair<std::string, std::string>> extra_headers) {
  if (state_->closing_flag.load() || !state_->url) return;
  std::optional<std::string> sid;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    sid = state_->session;
  }
  auto s = state_;
  s->client.post([s, msg = std::move(json_message), sid = std::move(sid), extra = std::move(extra_headers)]() mutable {
    if (s->closing) return;
    s->queue.push_back({std::move(msg), std::move(sid), std::move(extra)});
    s->pump();
  });
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
  if (state_->closing_flag.load() || !state_->url) return false;
  auto s = state_;
  s->client.post([s] {
    if (s->closing || s->stream_started || s->stream_deferred) return;
    // Opened right after notifications/initialized was queued, the GET goes
    // out once that was accepted (as the reference client does), so the
    // stream is open before any request a server might answer with a
    // request of its own on it.
    if (!s->barrier_open || !s->queue.empty()) {
      s->stream_deferred = true;
      return;
    }
    s->open_stream();
  });
  return true;
}

void http_transport::close() {
  if (state_->closing_flag.exchange(true)) return;
  if (state_->opts.auth) state_->opts.auth->cancel();
  auto s = state_;
  s->client.post([s] {
    if (s->closing && s->closed_reported) return;
    std::optional<std::string> sid, version;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      sid = s->session;
      version = s->version;
    }
    s->abort_all();
    if (sid && s->url && s->opts.auth) {
      // The authorization may take a token refresh: off the loop thread.
      s->auth.post([s, sid, version] {
        auto a = s->opts.auth->authorization();
        s->client.post([s, sid, version, a] { s->send_delete(sid, version, a); });
      });
      return;
    }
    s->send_delete(sid, version, std::nullopt);
  });
}

} // namespace mcprt::io
