#include "io/sse_transport.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "core/ascii.hpp"
#include "core/http_url.hpp"
#include "core/sse_endpoint.hpp"
#include "core/sse_parser.hpp"
#include "io/http_common.hpp"

namespace mcprt::io {

namespace {

constexpr std::size_t k_max_error_body = 4096;

} // namespace

// Everything lives on the client's loop thread, but `closing_flag` (read by
// send() and close() on the caller's thread).
struct sse_transport::state : std::enable_shared_from_this<sse_transport::state> {
  state(http_client& c, sse_events ev, sse_transport_options o) : client(c), events(std::move(ev)), opts(o) {}

  http_client& client;
  const sse_events events;
  const sse_transport_options opts;
  std::optional<http_url> url;
  std::string display;
  std::vector<std::pair<std::string, std::string>> base_headers;
  std::vector<std::string> secrets; // header values; the endpoint's query values join later
  std::atomic<bool> closing_flag{false};

  // ---- loop thread only --------------------------------------------------
  std::optional<http_url> endpoint;
  std::deque<std::string> queue;
  bool posting = false;
  bool closing = false;
  bool failed = false;
  bool dead = false;
  bool closed_reported = false;
  http_client::request_id post_id = 0;
  http_client::request_id stream_id = 0;

  // ---- callbacks ---------------------------------------------------------

  template <typename F>
  void emit(F&& f, bool is_close = false) {
    if (dead || closed_reported) return;
    if (!is_close && closing) return;
    if (is_close) closed_reported = true;
    try {
      f();
    } catch (...) {
      // Nobody to rethrow to on the loop thread.
    }
  }

  std::string redact(std::string s) const {
    auto all = secrets;
    std::sort(all.begin(), all.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const auto& v : all) {
      if (v.size() < 4) continue;
      for (auto pos = s.find(v); pos != std::string::npos; pos = s.find(v, pos + 10))
        s.replace(pos, v.size(), "<redacted>");
    }
    return s;
  }

  void stop_requests() {
    queue.clear();
    if (post_id) client.cancel(post_id);
    if (stream_id) client.cancel(stream_id);
    post_id = stream_id = 0;
  }

  // The first failure is reported and ends the transport: queued messages
  // are dropped, the stream and the POST in flight stopped. close() still
  // reports on_closed afterwards.
  void error(const std::string& reason) {
    if (failed) return;
    failed = true;
    stop_requests();
    if (!events.on_error) return;
    auto r = redact(reason);
    emit([&] { events.on_error(r); });
  }

  void message(std::string m) {
    if (!events.on_message || failed) return;
    emit([&] { events.on_message(std::move(m)); });
  }

  http_request make_request(const char* method, const std::string& target, std::chrono::milliseconds idle) const {
    http_request r;
    r.method = method;
    r.url = url->origin() + target;
    r.headers = base_headers;
    r.connect_timeout = opts.connect_timeout;
    r.idle_timeout = idle;
    r.proxy = opts.proxy;
    r.ca_file = opts.ca_file;
    return r;
  }

  // ---- POSTs -------------------------------------------------------------

  struct post_ctx {
    std::string where;
    http_response_head head;
    std::string body;
  };

  void pump() {
    if (closing || failed || posting || !endpoint || queue.empty()) return;
    posting = true;
    auto req = make_request("POST", endpoint->target, opts.post_timeout);
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("Accept", "application/json, text/event-stream");
    req.body = std::move(queue.front());
    queue.pop_front();
    auto ctx = std::make_shared<post_ctx>();
    ctx->where = endpoint->display;
    auto self = shared_from_this();
    http_handlers h;
    h.on_head = [self, ctx](const http_response_head& head) {
      ctx->head = head;
      return !self->closing;
    };
    // The answer is an acknowledgement ("Accepted"); keep only enough of
    // it for an error message.
    h.on_data = [self, ctx](std::string_view bytes) {
      if (ctx->body.size() < k_max_error_body) ctx->body.append(bytes.substr(0, k_max_error_body - ctx->body.size()));
      return !self->closing;
    };
    h.on_done = [self, ctx](const http_outcome& o) {
      self->post_id = 0;
      self->posting = false;
      if (self->closing) return;
      const int status = ctx->head.status;
      if (!o.ok()) {
        self->error("POST " + ctx->where + ": " + o.reason);
      } else if (status < 200 || status >= 300) {
        std::string reason = "POST " + ctx->where + ": HTTP " + std::to_string(status);
        if (!ctx->head.reason.empty()) reason += " " + excerpt(ctx->head.reason, 60);
        if (!trim_space(ctx->body).empty()) reason += ": " + excerpt(trim_space(ctx->body));
        self->error(reason);
      }
      self->pump();
    };
    post_id = client.start(std::move(req), std::move(h));
  }

  // ---- the event stream --------------------------------------------------

  struct stream_ctx {
    http_response_head head;
    bool sse = false;
    bool too_big = false;
    std::optional<std::string> bad_endpoint;
    std::string body;
    std::optional<sse_parser> parser;
  };

  void on_event(stream_ctx& s, sse_parser::event&& e) {
    if (s.bad_endpoint) return;
    if (e.type == "endpoint") {
      // The first endpoint stands: a later one must not redirect a session
      // in progress.
      if (endpoint) return;
      std::string why;
      auto ep = resolve_sse_endpoint(*url, e.data, &why);
      if (!ep) {
        s.bad_endpoint = why;
        return;
      }
      for (auto& v : query_values(ep->target))
        secrets.push_back(std::move(v));
      endpoint = std::move(ep);
      pump();
    } else if (e.type == "message") {
      message(std::move(e.data));
    }
  }

  void open_stream() {
    auto req = make_request("GET", url->target, opts.stream_idle_timeout);
    req.headers.emplace_back("Accept", "text/event-stream");
    // A vanished peer is found in about two minutes, long before the idle
    // timeout.
    req.tcp_keepalive = true;
    auto s = std::make_shared<stream_ctx>();
    s->parser.emplace(opts.max_message_bytes);
    auto self = shared_from_this();
    http_handlers h;
    h.on_head = [self, s](const http_response_head& head) {
      s->head = head;
      s->sse = head.event_stream();
      return !self->closing;
    };
    h.on_data = [self, s](std::string_view bytes) {
      if (self->closing) return false;
      if (!s->sse) {
        if (s->body.size() < k_max_error_body) s->body.append(bytes.substr(0, k_max_error_body - s->body.size()));
        return true;
      }
      if (!s->parser->feed(bytes, [&](sse_parser::event&& e) { self->on_event(*s, std::move(e)); })) {
        s->too_big = true;
        return false;
      }
      return !s->bad_endpoint && !self->failed;
    };
    h.on_done = [self, s](const http_outcome& o) {
      self->stream_id = 0;
      if (self->closing || self->failed) return;
      self->stream_ended(*s, o);
    };
    stream_id = client.start(std::move(req), std::move(h));
  }

  void stream_ended(stream_ctx& s, const http_outcome& o) {
    if (o.ok() && s.sse && !s.too_big && !s.bad_endpoint)
      s.parser->finish([&](sse_parser::event&& e) { on_event(s, std::move(e)); });
    const std::string prefix = "GET " + display + ": ";
    const int status = s.head.status;
    if (s.bad_endpoint) {
      error(prefix + *s.bad_endpoint);
    } else if (s.too_big) {
      error(prefix + "an event exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
    } else if (!o.got_head) {
      error(prefix + o.reason);
    } else if (status != 200) {
      std::string reason = prefix + "HTTP " + std::to_string(status);
      if (!s.head.reason.empty()) reason += " " + excerpt(s.head.reason, 60);
      if (!trim_space(s.body).empty()) reason += ": " + excerpt(trim_space(s.body));
      error(reason);
    } else if (!s.sse) {
      error(prefix + "the answer is not an event stream (Content-Type '" + excerpt(s.head.media_type(), 60) + "')");
    } else if (o.failure == http_failure::idle_timeout) {
      error(prefix + "the event stream was silent for " + std::to_string(opts.stream_idle_timeout.count()) + " ms");
    } else if (!o.ok()) {
      error(prefix + "event stream lost: the connection was closed or reset mid-stream");
    } else {
      // This transport has no resumption: the session lived on this stream.
      error(prefix + "the server ended the event stream");
    }
  }

  void abort_all() {
    closing = true;
    closing_flag = true;
    stop_requests();
  }
};

sse_transport::sse_transport(std::string url, std::map<std::string, std::string> headers, sse_events events,
                             http_client& client, sse_transport_options options)
    : state_(std::make_shared<state>(client, std::move(events), options)) {
  std::string why;
  state_->url = http_url::parse(url, &why);
  // Never echo an invalid URL: it may carry credentials.
  state_->display = state_->url ? state_->url->display : "<invalid URL>";
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
    if (transport_owned_header(name)) continue;
    state_->base_headers.emplace_back(name, value);
  }
  auto s = state_;
  if (state_->url && why.empty()) {
    client.post([s] {
      if (!s->closing) s->open_stream();
    });
    return;
  }
  if (state_->url) why = "GET " + state_->display + ": " + why;
  client.post([s, why] { s->error(why); });
}

sse_transport::~sse_transport() {
  auto s = state_;
  // On the loop thread, so no callback is running and none will.
  s->client.run_sync([s] {
    s->abort_all();
    s->dead = true;
  });
}

void sse_transport::send(std::string json_message) {
  if (state_->closing_flag.load() || !state_->url) return;
  auto s = state_;
  s->client.post([s, msg = std::move(json_message)]() mutable {
    if (s->closing || s->failed) return;
    s->queue.push_back(std::move(msg));
    s->pump();
  });
}

void sse_transport::close() {
  if (state_->closing_flag.exchange(true)) return;
  auto s = state_;
  s->client.post([s] {
    s->abort_all();
    if (s->events.on_closed) s->emit([&] { s->events.on_closed(); }, true);
    else s->emit([] {}, true);
  });
}

const std::string& sse_transport::display_url() const {
  return state_->display;
}

} // namespace mcprt::io
