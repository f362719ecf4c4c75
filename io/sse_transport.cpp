#include "io/sse_transport.hpp"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <thread>
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

// Controls the stream thread. `stop` is atomic and read without `mu`:
// httplib calls the socket-options hook with its own socket mutex held,
// and request_stop() holds `mu` while ClientImpl::stop() takes that mutex.
struct sse_stream_ctl {
  std::mutex mu;
  std::atomic<bool> stop{false};
  httplib::ClientImpl* client = nullptr; // guarded by mu; set while the GET runs

  void request_stop() {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    if (client) client->stop();
  }
  bool stopped() const { return stop.load(); }
};

struct sse_transport::state : std::enable_shared_from_this<sse_transport::state> {
  state(http_worker_pool& p, sse_events ev, sse_transport_options o) : pool(p), events(std::move(ev)), opts(o) {}

  http_worker_pool& pool;
  const sse_events events;
  const sse_transport_options opts;
  std::optional<http_url> url;
  std::string display;
  httplib::Headers base_headers;
  std::vector<std::string> secrets; // header values; the endpoint's query values join later

  mutable std::mutex mu;
  std::optional<http_url> endpoint;
  std::deque<std::string> queue;
  bool posting = false;
  bool closing = false;
  httplib::ClientImpl* post_client = nullptr; // the POST in flight
  std::unique_ptr<httplib::ClientImpl> idle_client;
  std::shared_ptr<sse_stream_ctl> stream;

  std::atomic<bool> closing_flag{false};
  std::atomic<bool> failed{false};
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
      // Nobody to rethrow to on a worker thread.
    }
    cb_thread.store(prev);
  }

  std::string redact(std::string s) const {
    std::vector<std::string> all;
    {
      std::lock_guard<std::mutex> lock(mu);
      all = secrets;
    }
    std::sort(all.begin(), all.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const auto& v : all) {
      if (v.size() < 4) continue;
      for (auto pos = s.find(v); pos != std::string::npos; pos = s.find(v, pos + 10))
        s.replace(pos, v.size(), "<redacted>");
    }
    return s;
  }

  // The first failure is reported and ends the transport: queued messages
  // are dropped, the stream and the POST in flight stopped. close() still
  // reports on_closed afterwards.
  void error(const std::string& reason) {
    if (failed.exchange(true)) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.clear();
      if (post_client) post_client->stop();
      idle_client.reset();
      if (stream) stream->request_stop();
    }
    if (!events.on_error) return;
    auto r = redact(reason);
    emit([&] { events.on_error(r); });
  }

  void message(std::string m) {
    if (!events.on_message || failed.load()) return;
    emit([&] { events.on_message(std::move(m)); });
  }

  std::unique_ptr<httplib::ClientImpl> make_client(std::chrono::milliseconds read_timeout) const {
    return make_http_client(*url, opts.connect_timeout, read_timeout, opts.post_timeout);
  }

  // ---- POSTs -------------------------------------------------------------

  void pump_locked() {
    if (closing || failed.load() || posting || !endpoint || queue.empty()) return;
    posting = true;
    auto msg = std::move(queue.front());
    queue.pop_front();
    std::unique_ptr<httplib::ClientImpl> client = idle_client ? std::move(idle_client) : make_client(opts.post_timeout);
    post_client = client.get();
    auto self = shared_from_this();
    // std::function needs a copyable callable: hand the client over raw.
    auto* raw = client.release();
    pool.post([self, raw, target = endpoint->target, where = endpoint->display, msg = std::move(msg)]() mutable {
      self->run_post(std::unique_ptr<httplib::ClientImpl>(raw), target, where, std::move(msg));
    });
  }

  void run_post(std::unique_ptr<httplib::ClientImpl> client, const std::string& target, const std::string& where,
                std::string msg) {
    bool ok = false;
    if (!closing_flag.load() && !failed.load()) {
      httplib::Request req;
      req.method = "POST";
      req.path = target;
      req.headers = base_headers;
      req.headers.emplace("Content-Type", "application/json");
      req.headers.emplace("Accept", "application/json, text/event-stream");
      req.body = std::move(msg);
      std::string body;
      int status = -1;
      req.response_handler = [&](const httplib::Response& res) {
        status = res.status;
        return !closing_flag.load();
      };
      // The answer is an acknowledgement ("Accepted"); keep only enough of
      // it for an error message.
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (body.size() < k_max_error_body) body.append(data, std::min(n, k_max_error_body - body.size()));
        return !closing_flag.load();
      };
      httplib::Response res;
      httplib::Error err = httplib::Error::Success;
      ok = client->send(req, res, err);
      if (!closing_flag.load()) {
        if (!ok) {
          error("POST " + where + ": " + describe_http_error(err, opts.post_timeout));
        } else if (status < 200 || status >= 300) {
          std::string reason = "POST " + where + ": HTTP " + std::to_string(status);
          if (!res.reason.empty()) reason += " " + excerpt(res.reason, 60);
          if (!trim_space(body).empty()) reason += ": " + excerpt(trim_space(body));
          error(reason);
          ok = false;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    post_client = nullptr;
    if (ok && !closing && !failed.load()) idle_client = std::move(client);
    posting = false;
    pump_locked();
  }

  // ---- the event stream --------------------------------------------------

  void run_stream(const std::shared_ptr<sse_stream_ctl>& ctl) {
    auto client = make_client(opts.stream_idle_timeout);
    client->set_socket_options([ctl](int fd) {
      // httplib's default, plus TCP keep-alive (a vanished peer is found
      // in about 2 min, long before the idle timeout), plus: a stop that
      // came before this socket existed wins.
      int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof(yes));
      int idle = 60, interval = 10, count = 6;
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
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
    req.headers = base_headers;
    req.headers.emplace("Accept", "text/event-stream");

    int status = -1;
    bool sse = false;
    bool too_big = false;
    std::optional<std::string> bad_endpoint;
    std::string body;
    auto last_bytes = std::chrono::steady_clock::now();
    sse_parser parser(opts.max_message_bytes);
    auto on_event = [&](sse_parser::event&& e) {
      if (bad_endpoint) return;
      if (e.type == "endpoint") {
        std::lock_guard<std::mutex> lock(mu);
        // The first endpoint stands: a later one must not redirect a
        // session in progress.
        if (endpoint) return;
        std::string why;
        auto ep = resolve_sse_endpoint(*url, e.data, &why);
        if (!ep) {
          bad_endpoint = why;
          return;
        }
        for (auto& v : query_values(ep->target))
          secrets.push_back(std::move(v));
        endpoint = std::move(ep);
        pump_locked();
      } else if (e.type == "message") {
        message(std::move(e.data));
      }
    };
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      sse = status == 200 && media_type(res) == "text/event-stream";
      return !ctl->stopped();
    };
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      if (ctl->stopped()) return false;
      last_bytes = std::chrono::steady_clock::now();
      if (!sse) {
        if (body.size() < k_max_error_body) body.append(data, std::min(n, k_max_error_body - body.size()));
        return true;
      }
      if (!parser.feed(std::string_view(data, n), on_event)) {
        too_big = true;
        return false;
      }
      return !bad_endpoint;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    bool ok = client->send(req, res, err);
    {
      std::lock_guard<std::mutex> lock(ctl->mu);
      ctl->client = nullptr;
      if (ctl->stop) return;
    }
    if (ok && sse && !too_big && !bad_endpoint) parser.finish(on_event);

    const std::string prefix = "GET " + display + ": ";
    if (bad_endpoint) {
      error(prefix + *bad_endpoint);
    } else if (too_big) {
      error(prefix + "an event exceeds " + std::to_string(opts.max_message_bytes) + " bytes");
    } else if (!ok && status != 200) {
      error(prefix + describe_http_error(err, opts.stream_idle_timeout));
    } else if (status != 200) {
      std::string reason = prefix + "HTTP " + std::to_string(status);
      if (!res.reason.empty()) reason += " " + excerpt(res.reason, 60);
      if (!trim_space(body).empty()) reason += ": " + excerpt(trim_space(body));
      error(reason);
    } else if (!sse) {
      error(prefix + "the answer is not an event stream (Content-Type '" + excerpt(media_type(res), 60) + "')");
    } else if (!ok) {
      // httplib reports a silent stream and a dropped connection alike.
      auto silent = std::chrono::steady_clock::now() - last_bytes;
      if (err != httplib::Error::Read)
        error(prefix + "event stream lost: " + describe_http_error(err, opts.stream_idle_timeout));
      else if (silent >= opts.stream_idle_timeout)
        error(prefix + "the event stream was silent for " + std::to_string(opts.stream_idle_timeout.count()) + " ms");
      else
        error(prefix + "event stream lost: the connection was closed or reset mid-stream");
    } else {
      // This transport has no resumption: the session lived on this stream.
      error(prefix + "the server ended the event stream");
    }
  }

  // Called with `mu` held.
  void abort_all_locked() {
    closing = true;
    closing_flag = true;
    queue.clear();
    if (post_client) post_client->stop();
    idle_client.reset();
    if (stream) stream->request_stop();
  }
};

sse_transport::sse_transport(std::string url, std::map<std::string, std::string> headers, sse_events events,
                             http_worker_pool& pool, sse_transport_options options)
    : state_(std::make_shared<state>(pool, std::move(events), options)) {
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
    state_->base_headers.emplace(name, value);
  }
  if (state_->url && why.empty()) {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto ctl = std::make_shared<sse_stream_ctl>();
    auto self = state_;
    if (pool.start_event_stream([self, ctl] { self->run_stream(ctl); })) {
      state_->stream = ctl;
      return;
    }
    why = "too many open event streams (" + std::to_string(pool.max_event_streams()) + ")";
  }
  if (state_->url) why = "GET " + state_->display + ": " + why;
  auto s = state_;
  pool.post([s, why] { s->error(why); });
}

sse_transport::~sse_transport() {
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

void sse_transport::send(std::string json_message) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->closing || state_->failed.load() || !state_->url) return;
  state_->queue.push_back(std::move(json_message));
  state_->pump_locked();
}

void sse_transport::close() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closing) return;
    state_->abort_all_locked();
  }
  auto s = state_;
  s->pool.post([s] {
    if (s->events.on_closed) s->emit([&] { s->events.on_closed(); }, true);
    else s->emit([] {}, true);
  });
}

const std::string& sse_transport::display_url() const {
  return state_->display;
}

} // namespace mcprt::io
