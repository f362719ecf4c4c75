// The daemon's HTTP server on libmicrohttpd in "external epoll" mode: MHD
// parses and writes, our one loop thread waits on MHD's epoll descriptor
// and an eventfd for work posted from other threads. Every MHD call and
// every connection record is touched on that thread only, so closing a
// connection's socket (the request deadline, eviction, a dropped stream)
// can never hit a descriptor that was closed and reused meanwhile: MHD
// reports a connection closed (NOTIFY_CLOSED, where its record goes) before
// it closes the socket, on this same thread.

#include "cli/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <spdlog/spdlog.h>

#include "core/untrusted_text.hpp"
#include "io/reactor.hpp"

namespace mcprt::cli {

using clock_type = std::chrono::steady_clock;

// -- streams -----------------------------------------------------------------------

void http_stream::attach(std::function<void(bool)> notify) {
  std::lock_guard<std::mutex> guard{notify_mtx_};
  notify_ = std::move(notify);
}

void http_stream::notify(bool abort) {
  std::function<void(bool)> fn;
  {
    std::lock_guard<std::mutex> guard{notify_mtx_};
    fn = notify_;
  }
  if (fn) fn(abort);
}

void http_stream::wake() {
  notify(false);
}

void http_stream::abort() {
  notify(true);
}

struct exchange_state;

namespace {

/// Connections MHD may hold beyond `max_connections` while we close the
/// oldest slow ones (its hard limit).
constexpr std::size_t connection_slack = 16;

/// Marks the mailbox's eventfd among the loop's descriptors (the others
/// carry their connection record, or nothing for MHD's own).
char mailbox_tag;

/// Work handed to the loop thread from any thread.
class loop_mailbox {
public:
  loop_mailbox() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~loop_mailbox() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

  void post(std::function<void()> fn) {
    // From the loop thread itself (an answer the loop's own turn produced)
    // no wake-up is needed: the loop looks before it waits (has_local).
    bool local = std::this_thread::get_id() == loop_.load(std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (closed_) return;
      tasks_.push_back(std::move(fn));
      if (local) {
        local_.store(true, std::memory_order_relaxed);
        return;
      }
    }
    uint64_t one = 1;
    // EAGAIN means the counter is already set: the loop wakes anyway.
    [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
  }

  /// The thread that runs the loop now.
  void loop_thread(std::thread::id id) { loop_.store(id, std::memory_order_relaxed); }
  /// Work was posted from the loop thread and not taken yet.
  bool has_local() const { return local_.load(std::memory_order_relaxed); }

  /// `signalled`: the loop saw the eventfd readable (else it is not read:
  /// one system call less on most turns).
  std::vector<std::function<void()>> take(bool signalled) {
    if (signalled) {
      uint64_t count;
      [[maybe_unused]] auto n = ::read(fd_, &count, sizeof count);
    }
    std::lock_guard<std::mutex> guard{mtx_};
    local_.store(false, std::memory_order_relaxed);
    return std::exchange(tasks_, {});
  }

  void close() {
    std::lock_guard<std::mutex> guard{mtx_};
    closed_ = true;
    tasks_.clear();
  }

private:
  int fd_;
  std::mutex mtx_;
  std::vector<std::function<void()>> tasks_;
  bool closed_ = false;
  std::atomic<std::thread::id> loop_{};
  std::atomic<bool> local_{false};
};

/// What the loop knows of one connection, from MHD's NOTIFY_STARTED to
/// NOTIFY_CLOSED.
struct connection_record {
  int fd = -1;
  clock_type::time_point since; // the current request's first moment
  bool reading = true;          // still receiving a request (or waiting for the next)
  bool closing = false;         // its socket was shut down by us
  /// A stream asleep on this connection: MHD does not watch a suspended
  /// connection, so we watch it for the client hanging up.
  exchange_state* asleep = nullptr;
};

} // namespace

// -- one request -------------------------------------------------------------------------

struct exchange_state final : http_exchange, std::enable_shared_from_this<exchange_state> {
  http_server::impl* server = nullptr;
  MHD_Connection* conn = nullptr;
  connection_record* record = nullptr;
  std::shared_ptr<loop_mailbox> mailbox;
  std::thread::id loop_thread;
  http_request req;

  std::size_t body_seen = 0;
  bool too_large = false;
  bool dispatched = false;
  bool in_handler = false;   // on_request runs: an answer is taken directly
  bool suspended = false;    // MHD_suspend_connection is in force
  bool stream_waiting = false;
  bool gone = false;         // the client hung up while its stream slept
  bool done = false;         // MHD completed the request (the connection may be gone)
  bool queued = false;       // the response went to MHD
  std::optional<http_response> pending;
  std::shared_ptr<http_stream> stream;
  std::atomic<bool> answered{false};

  const http_request& request() const override { return req; }
  void respond(http_response r) override;
  void deliver(http_response r);
};

struct http_server::impl {
  http_handler& handler;
  http_server_options opts;
  MHD_Daemon* daemon = nullptr;
  int listen_fd = -1;
  int port = 0;
  int epoll_fd = -1;
  std::shared_ptr<loop_mailbox> mailbox = std::make_shared<loop_mailbox>();
  std::thread loop; // guarded by life_mtx
  std::thread::id loop_id;
  std::mutex life_mtx;
  std::condition_variable life_cv;
  bool finished = false; // guarded by life_mtx: the loop is over
  std::list<connection_record> records;
  std::atomic<std::size_t> open_connections{0};
  std::vector<std::weak_ptr<exchange_state>> live; // requests not yet completed (pruned as they end)

  struct periodic {
    clock_type::time_point next;
    std::chrono::milliseconds interval;
    std::function<void()> fn;
  };
  std::vector<periodic> timers;

  std::mutex stop_mtx;
  bool stop_requested = false;
  bool stopping = false;
  clock_type::time_point stop_deadline;
  bool started = false;

  impl(http_handler& h, http_server_options o) : handler(h), opts(o) {}

  bool start(bool with_listener, std::string& error);
  /// The loop on a thread of its own: wait, step, until it is over.
  void run();
  /// One turn with what `epoll_wait` returned; false once the loop is over.
  bool step(const epoll_event* ev, int n);
  /// After the last turn.
  void finish();
  /// The loop is over and nothing runs it any more: stop() may return.
  void mark_finished();
  class guest;
  void sweep(clock_type::time_point now);
  int next_timeout_ms(clock_type::time_point now);
  void begin_stop();
  void evict_for_newcomer(connection_record* newcomer);
  void watch_hangup(connection_record& r, exchange_state* st);
  void unwatch_hangup(connection_record& r);
  void wake_stream(exchange_state& st);

  // MHD callbacks
  static MHD_Result on_access(void* cls, MHD_Connection* conn, const char* url, const char* method,
                              const char* version, const char* upload, size_t* upload_size, void** con_cls);
  static void on_completed(void* cls, MHD_Connection* conn, void** con_cls, MHD_RequestTerminationCode toe);
  static void on_connection(void* cls, MHD_Connection* conn, void** socket_context,
                            MHD_ConnectionNotificationCode toe);
  static size_t no_unescape(void*, MHD_Connection*, char* s) { return std::strlen(s); }
  static void on_log(void*, const char* fmt, va_list ap);
  static ssize_t pull_stream(void* cls, uint64_t pos, char* buf, size_t max);
  static void free_stream(void* cls);

  MHD_Result access(MHD_Connection* conn, const char* url, const char* method, const char* version,
                    const char* upload, size_t* upload_size, void** con_cls);
  MHD_Result queue(exchange_state& st, http_response r);
  void dispatch(exchange_state& st);
};

namespace {

http_response plain_error_response(int status, const std::string& code, const std::string& message) {
  http_response r;
  r.status = status;
  r.body = dump_json({{"error", code}, {"message", message}}) + "\n";
  return r;
}

/// Closes the connection's socket for reading and writing; MHD notices at
/// its next look and closes it. Only on the loop thread, with the record
/// alive (so the descriptor is still this connection's).
void shut(connection_record& rec) {
  if (rec.closing || rec.fd < 0) return;
  rec.closing = true;
  ::shutdown(rec.fd, SHUT_RDWR);
}

} // namespace

// -- answers -------------------------------------------------------------------------------

void exchange_state::respond(http_response r) {
  if (answered.exchange(true)) return;
  if (std::this_thread::get_id() == loop_thread && in_handler) {
    pending = std::move(r);
    return;
  }
  auto self = shared_from_this();
  mailbox->post([self, r = std::move(r)]() mutable { self->deliver(std::move(r)); });
}

void exchange_state::deliver(http_response r) {
  if (done || queued) return;
  pending = std::move(r);
  if (suspended) {
    suspended = false;
    MHD_resume_connection(conn);
  }
}

MHD_Result http_server::impl::queue(exchange_state& st, http_response r) {
  MHD_Response* resp = nullptr;
  if (r.stream && st.req.method != "HEAD") {
    st.stream = r.stream;
    auto holder = new std::shared_ptr<exchange_state>(st.shared_from_this());
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, &impl::pull_stream, holder,
                                             &impl::free_stream);
    if (!resp) {
      delete holder;
      return MHD_NO;
    }
    auto weak = std::weak_ptr<exchange_state>(st.shared_from_this());
    auto mb = mailbox;
    st.stream->attach([weak, mb](bool abort) {
      mb->post([weak, abort] {
        auto s = weak.lock();
        if (!s || s->done) return;
        if (abort && s->record) shut(*s->record);
        if (s->suspended && (s->stream_waiting || abort)) s->server->wake_stream(*s);
      });
    });
  } else {
    resp = MHD_create_response_from_buffer(r.body.size(), r.body.data(), MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", r.content_type.c_str());
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  for (auto& [k, v] : r.headers)
    MHD_add_response_header(resp, k.c_str(), v.c_str());
  auto ok = MHD_queue_response(st.conn, static_cast<unsigned>(r.status), resp);
  MHD_destroy_response(resp);
  if (ok == MHD_YES) {
    st.queued = true;
    handler.on_answered(st.req, r.status);
  }
  return ok;
}

ssize_t http_server::impl::pull_stream(void* cls, uint64_t, char* buf, size_t max) {
  auto& st = **static_cast<std::shared_ptr<exchange_state>*>(cls);
  if (!st.stream || st.done || st.gone) return MHD_CONTENT_READER_END_WITH_ERROR;
  http_stream::chunk c;
  try {
    c = st.stream->pull(buf, max);
  } catch (...) {
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  switch (c.st) {
    case http_stream::state::data: return static_cast<ssize_t>(std::min(c.size, max));
    case http_stream::state::end: return MHD_CONTENT_READER_END_OF_STREAM;
    case http_stream::state::fail: return MHD_CONTENT_READER_END_WITH_ERROR;
    case http_stream::state::wait: break;
  }
  // Nothing yet: sleep until the stream wakes us (MHD would call again at once).
  st.stream_waiting = true;
  st.suspended = true;
  MHD_suspend_connection(st.conn);
  if (st.record) st.server->watch_hangup(*st.record, &st);
  return 0;
}

void http_server::impl::free_stream(void* cls) {
  delete static_cast<std::shared_ptr<exchange_state>*>(cls);
}

// -- requests ------------------------------------------------------------------------------

namespace {

struct header_collector {
  http::header_list* out;
  std::size_t count = 0;
};

MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, size_t key_size, const char* value,
                          size_t value_size) {
  auto& c = *static_cast<header_collector*>(cls);
  ++c.count;
  std::string name(key, key_size);
  for (auto& ch : name)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  c.out->push_back({std::move(name), value ? std::string(value, value_size) : std::string()});
  return MHD_YES;
}

/// The declared body length: nullopt without Content-Length (chunked or
/// none); a malformed one reads as "too large".
std::optional<uint64_t> declared_length(const http::header_list& headers) {
  auto v = http::header_values(headers, "content-length");
  if (v.empty()) return std::nullopt;
  uint64_t n = 0;
  std::string_view s = v.front();
  if (s.empty() || s.size() > 18) return UINT64_MAX;
  for (char c : s) {
    if (c < '0' || c > '9') return UINT64_MAX;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

} // namespace

MHD_Result http_server::impl::on_access(void* cls, MHD_Connection* conn, const char* url, const char* method,
                                        const char* version, const char* upload, size_t* upload_size,
                                        void** con_cls) {
  auto& self = *static_cast<impl*>(cls);
  try {
    return self.access(conn, url, method, version, upload, upload_size, con_cls);
  } catch (const std::exception& e) {
    spdlog::error("http: a request failed: {}", escape_for_display(e.what()));
  } catch (...) {
    spdlog::error("http: a request failed");
  }
  return MHD_NO; // MHD closes the connection
}

MHD_Result http_server::impl::access(MHD_Connection* conn, const char* url, const char* method,
                                     const char* version, const char* upload, size_t* upload_size,
                                     void** con_cls) {
  if (*con_cls == nullptr) {
    // The head has arrived.
    auto st = std::make_shared<exchange_state>();
    st->server = this;
    st->conn = conn;
    st->mailbox = mailbox;
    st->loop_thread = loop_id;
    if (auto info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT))
      st->record = static_cast<connection_record*>(info->socket_context);
    st->req.method = method ? method : "";
    st->req.target = url ? url : "";
    st->req.version = version ? version : "";
    header_collector hc{&st->req.headers};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, &collect_header, &hc);
    *con_cls = new std::shared_ptr<exchange_state>(st);
    live.push_back(st);
    if (stopping) return queue(*st, plain_error_response(503, "unavailable", "the daemon is stopping"));
    if (hc.count > opts.max_headers)
      return queue(*st, plain_error_response(431, "headers_too_large",
                                       "the request has " + std::to_string(hc.count) + " headers; at most "
                                         + std::to_string(opts.max_headers) + " are read"));
    if (auto early = handler.on_head(st->req)) return queue(*st, std::move(*early));
    // A body declared too large is refused; up to 16 times the limit it is
    // read and dropped first, so a client that writes it all before reading
    // (most do) gets the 413 instead of a broken pipe.
    auto declared = declared_length(st->req.headers);
    if (declared && *declared > opts.max_body) {
      if (*declared > 16 * static_cast<uint64_t>(opts.max_body))
        return queue(*st, plain_error_response(413, "payload_too_large",
                                         "the request body is larger than " + std::to_string(opts.max_body)
                                           + " bytes"));
      st->too_large = true;
    }
    return MHD_YES;
  }
  auto& st = **static_cast<std::shared_ptr<exchange_state>*>(*con_cls);
  if (*upload_size > 0) {
    // A chunked body is counted as it comes; past the limit the rest is
    // read and dropped (MHD cannot answer mid-body), then refused.
    st.body_seen += *upload_size;
    if (st.too_large || st.body_seen > opts.max_body) {
      st.too_large = true;
      st.req.body.clear();
      st.req.body.shrink_to_fit();
      // Far past it: close instead of reading on.
      if (st.body_seen > 16 * opts.max_body) return MHD_NO;
    } else {
      st.req.body.append(upload, *upload_size);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (st.queued) return MHD_YES;
  if (st.pending) {
    auto r = std::move(*st.pending);
    st.pending.reset();
    return queue(st, std::move(r));
  }
  if (!st.dispatched) {
    st.dispatched = true;
    if (st.record) st.record->reading = false;
    if (st.too_large)
      return queue(st, plain_error_response(413, "payload_too_large",
                                      "the request body is larger than " + std::to_string(opts.max_body) + " bytes"));
    if (stopping) return queue(st, plain_error_response(503, "unavailable", "the daemon is stopping"));
    dispatch(st);
    if (st.pending) {
      auto r = std::move(*st.pending);
      st.pending.reset();
      return queue(st, std::move(r));
    }
  }
  // The answer comes later: sleep until it does.
  st.suspended = true;
  MHD_suspend_connection(conn);
  return MHD_YES;
}

void http_server::impl::dispatch(exchange_state& st) {
  st.in_handler = true;
  try {
    handler.on_request(st.shared_from_this());
  } catch (const std::exception& e) {
    spdlog::error("http: {} {}: {}", escape_for_display(st.req.method), http::shown(st.req.target),
                  escape_for_display(e.what()));
    st.respond(plain_error_response(500, "internal_error", "the request failed: " + escape_for_display(e.what())));
  }
  st.in_handler = false;
}

void http_server::impl::on_completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
  auto& self = *static_cast<impl*>(cls);
  if (*con_cls == nullptr) return;
  auto holder = static_cast<std::shared_ptr<exchange_state>*>(*con_cls);
  auto& st = **holder;
  st.done = true;
  st.answered = true;
  if (st.record) {
    self.unwatch_hangup(*st.record);
    // A kept-alive connection now waits for its next request: a new deadline.
    st.record->reading = true;
    st.record->since = clock_type::now();
  }
  if (st.stream) st.stream->attach(nullptr);
  delete holder;
  *con_cls = nullptr;
  auto& live = self.live;
  live.erase(std::remove_if(live.begin(), live.end(), [](auto& w) { return w.expired(); }), live.end());
}

void http_server::impl::on_connection(void* cls, MHD_Connection* conn, void** socket_context,
                                      MHD_ConnectionNotificationCode toe) {
  auto& self = *static_cast<impl*>(cls);
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    connection_record rec;
    if (auto info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)) rec.fd = info->connect_fd;
    rec.since = clock_type::now();
    self.records.push_back(rec);
    *socket_context = &self.records.back();
    ++self.open_connections;
    self.evict_for_newcomer(&self.records.back());
    return;
  }
  auto rec = static_cast<connection_record*>(*socket_context);
  if (!rec) return;
  self.unwatch_hangup(*rec);
  self.records.remove_if([rec](const connection_record& r) { return &r == rec; });
  *socket_context = nullptr;
  --self.open_connections;
}

void http_server::impl::evict_for_newcomer(connection_record* newcomer) {
  std::size_t open = 0;
  connection_record* oldest = nullptr;
  for (auto& r : records) {
    if (r.closing) continue;
    ++open;
    if (&r != newcomer && r.reading && (!oldest || r.since < oldest->since)) oldest = &r;
  }
  if (open <= opts.max_connections || !oldest) return;
  spdlog::debug("http: {} connections open: closing the oldest one still sending its request", open);
  shut(*oldest);
}

void http_server::impl::on_log(void*, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string msg = buf;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
    msg.pop_back();
  spdlog::debug("http: {}", escape_for_display(msg));
}

// -- the loop -----------------------------------------------------------------------------

void http_server::impl::watch_hangup(connection_record& r, exchange_state* st) {
  if (r.asleep || r.fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLRDHUP;
  ev.data.ptr = &r;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, r.fd, &ev) == 0) r.asleep = st;
}

void http_server::impl::unwatch_hangup(connection_record& r) {
  if (!r.asleep) return;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, r.fd, nullptr);
  r.asleep = nullptr;
}

void http_server::impl::wake_stream(exchange_state& st) {
  if (st.record) unwatch_hangup(*st.record);
  st.suspended = false;
  st.stream_waiting = false;
  MHD_resume_connection(st.conn);
}

void http_server::impl::sweep(clock_type::time_point now) {
  for (auto& r : records)
    if (r.reading && !r.closing && now - r.since >= opts.request_timeout) {
      spdlog::debug("http: closing a connection that did not send its request within {} ms",
                    opts.request_timeout.count());
      shut(r);
    }
}

int http_server::impl::next_timeout_ms(clock_type::time_point now) {
  if (mailbox->has_local()) return 0;
  auto next = now + std::chrono::seconds(60);
  for (auto& r : records)
    if (r.reading && !r.closing) next = std::min(next, r.since + opts.request_timeout);
  for (auto& t : timers)
    next = std::min(next, t.next);
  if (stopping) next = std::min(next, now + std::chrono::milliseconds(20));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
  if (MHD_get_timeout(daemon, &mhd_ms) == MHD_YES) ms = std::min<long long>(ms, static_cast<long long>(mhd_ms));
  return static_cast<int>(std::max<long long>(0, ms));
}

void http_server::impl::begin_stop() {
  if (stopping) return;
  stopping = true;
  if (listen_fd >= 0) {
    MHD_quiesce_daemon(daemon);
    ::close(listen_fd);
    listen_fd = -1;
  }
  // Whatever still waits for an answer gets one now.
  for (auto& w : live)
    if (auto st = w.lock())
      if (!st->stream) st->respond(plain_error_response(503, "unavailable", "the daemon is stopping"));
}

void http_server::impl::run() {
  loop_id = std::this_thread::get_id();
  mailbox->loop_thread(loop_id);
  epoll_event ev[8];
  io::loop_turn turn{opts.turn_hook};
  for (;;) {
    turn.end();
    int n = ::epoll_wait(epoll_fd, ev, 8, next_timeout_ms(clock_type::now()));
    turn.begin();
    if (!step(ev, n)) break;
  }
  turn.end();
  finish();
  mark_finished();
}

bool http_server::impl::step(const epoll_event* ev, int n) {
  if (n < 0 && errno != EINTR) {
    spdlog::error("http: epoll_wait: {}", std::strerror(errno));
    begin_stop(); // closes the listener (ours, not MHD's, to close)
    return false;
  }
  // A client left a sleeping stream: close it now, not at its next write.
  bool posted = false;
  for (int i = 0; i < n; ++i) {
    if (ev[i].data.ptr == &mailbox_tag) {
      posted = true;
      continue;
    }
    auto* rec = static_cast<connection_record*>(ev[i].data.ptr);
    if (!rec || !rec->asleep) continue;
    auto* st = rec->asleep;
    st->gone = true;
    shut(*rec);
    if (st->suspended) wake_stream(*st);
    else unwatch_hangup(*rec);
  }
  for (auto& task : mailbox->take(posted)) {
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("http: {}", escape_for_display(e.what()));
    }
  }
  {
    std::lock_guard<std::mutex> guard{stop_mtx};
    if (stop_requested && !stopping) begin_stop();
  }
  MHD_run(daemon);
  auto now = clock_type::now();
  sweep(now);
  for (auto& t : timers)
    if (now >= t.next) {
      t.next = now + t.interval;
      t.fn();
    }
  // Stopping: over once everything is answered (streams ended) or the
  // grace is over.
  return !stopping || (open_connections != 0 && now < stop_deadline);
}

void http_server::impl::finish() {
  // MHD must not be stopped with a connection still suspended.
  for (auto& w : live)
    if (auto st = w.lock())
      if (st->suspended) {
        if (st->record) unwatch_hangup(*st->record);
        st->suspended = false;
        if (!st->pending && !st->stream) st->pending = plain_error_response(503, "unavailable", "the daemon is stopping");
        MHD_resume_connection(st->conn);
      }
  mailbox->close();
  MHD_stop_daemon(daemon);
  daemon = nullptr;
}

void http_server::impl::mark_finished() {
  std::lock_guard<std::mutex> guard{life_mtx};
  finished = true;
  life_cv.notify_all();
}

/// The loop as a guest of the runtime's reactor: one turn per call, with
/// the reactor's own turn hook around it. When the reactor stops first,
/// the loop goes on in a thread of its own.
class http_server::impl::guest final : public io::guest_loop {
public:
  explicit guest(impl& p) : p_(p) {}

  int fd() const override { return p_.epoll_fd; }

  std::optional<time_point> run_ready(bool readable) noexcept override {
    if (p_.loop_id != std::this_thread::get_id()) {
      p_.loop_id = std::this_thread::get_id();
      p_.mailbox->loop_thread(p_.loop_id);
    }
    epoll_event ev[8];
    // MHD often has more to do at once (a connection that sent its answer
    // goes back to reading): a few steps here save the reactor a turn.
    // What the descriptor has when it was not seen readable waits for the
    // reactor's next turn (level-triggered): no look of our own then.
    for (int steps = 0;; ++steps) {
      int n = readable && steps == 0 ? ::epoll_wait(p_.epoll_fd, ev, 8, 0) : 0;
      if (!p_.step(ev, n)) {
        p_.finish();
        return std::nullopt;
      }
      auto now = clock_type::now();
      int wait = p_.next_timeout_ms(now);
      if (wait > 0 || steps == 3) return now + std::chrono::milliseconds(wait);
    }
  }

  bool wants_turn() const noexcept override { return p_.mailbox->has_local(); }

  void released(bool orphaned) noexcept override {
    if (!orphaned) {
      p_.mark_finished();
      return;
    }
    std::lock_guard<std::mutex> guard{p_.life_mtx};
    try {
      p_.loop = std::thread([p = &p_] { p->run(); });
    } catch (const std::system_error& e) {
      spdlog::error("http: cannot start the server's own thread: {}", e.what());
      p_.finished = true; // nobody will run the loop: stop() must not wait for it
      p_.life_cv.notify_all();
    }
  }

private:
  impl& p_;
};

bool http_server::impl::start(bool with_listener, std::string& error) {
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (!with_listener) flags |= MHD_USE_NO_LISTEN_SOCKET;
  if (mailbox->fd() < 0) {
    error = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  std::vector<MHD_OptionItem> options{
    // Room above our own limit: MHD stops accepting at its limit, and only
    // a connection it accepted lets us close the oldest slow one.
    {MHD_OPTION_CONNECTION_LIMIT, static_cast<intptr_t>(opts.max_connections + connection_slack), nullptr},
    {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(opts.idle_timeout_s), nullptr},
    {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(opts.connection_memory), nullptr},
    {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&impl::on_completed), this},
    {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&impl::on_connection), this},
    {MHD_OPTION_UNESCAPE_CALLBACK, reinterpret_cast<intptr_t>(&impl::no_unescape), this},
    {MHD_OPTION_STRICT_FOR_CLIENT, 1, nullptr},
  };
  if (with_listener) options.push_back({MHD_OPTION_LISTEN_SOCKET, listen_fd, nullptr});
  options.push_back({MHD_OPTION_END, 0, nullptr});
  // The logger first: MHD reports through the standard one until it is set.
  daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &impl::on_access, this, MHD_OPTION_EXTERNAL_LOGGER,
                            &impl::on_log, this, MHD_OPTION_ARRAY, options.data(), MHD_OPTION_END);
  if (!daemon) {
    error = "libmicrohttpd could not start";
    return false;
  }
  auto info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (!info || epoll_fd < 0) {
    error = "epoll: " + std::string(std::strerror(errno));
    MHD_stop_daemon(daemon);
    daemon = nullptr;
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr; // not a connection record
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, info->epoll_fd, &ev);
  ev.data.ptr = &mailbox_tag;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, mailbox->fd(), &ev);
  started = true;
  if (opts.run_on) {
    opts.run_on->host(std::make_shared<guest>(*this));
  } else {
    std::lock_guard<std::mutex> guard{life_mtx};
    loop = std::thread([this] { run(); });
  }
  return true;
}

// -- the facade ---------------------------------------------------------------------------------

http_server::http_server(http_handler& handler, http_server_options opts)
  : impl_(std::make_unique<impl>(handler, opts)) {}

http_server::~http_server() {
  stop(std::chrono::milliseconds(0));
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  if (impl_->epoll_fd >= 0) ::close(impl_->epoll_fd);
}

bool http_server::listen(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return false;
  }
  int fd = -1;
  std::string why = "no address";
  for (auto* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (impl_->opts.sndbuf > 0)
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &impl_->opts.sndbuf, sizeof impl_->opts.sndbuf);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    error = why;
    return false;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  impl_->port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  impl_->listen_fd = fd;
  if (!impl_->start(true, error)) {
    ::close(fd);
    impl_->listen_fd = -1;
    return false;
  }
  return true;
}

bool http_server::start_without_listener(std::string& error) {
  return impl_->start(false, error);
}

int http_server::port() const {
  return impl_->port;
}

void http_server::add_connection(int fd) {
  auto* p = impl_.get();
  impl_->mailbox->post([p, fd] {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || len == 0) {
      ::close(fd);
      return;
    }
    if (p->stopping || MHD_add_connection(p->daemon, fd, reinterpret_cast<sockaddr*>(&ss), len) != MHD_YES)
      ::close(fd);
  });
}

void http_server::post(std::function<void()> fn) {
  impl_->mailbox->post(std::move(fn));
}

void http_server::every(std::chrono::milliseconds interval, std::function<void()> fn) {
  auto* p = impl_.get();
  impl_->mailbox->post([p, interval, fn = std::move(fn)]() mutable {
    p->timers.push_back({clock_type::now() + interval, interval, std::move(fn)});
  });
}

void http_server::stop(std::chrono::milliseconds grace) {
  auto& p = *impl_;
  if (!p.started) return;
  {
    std::lock_guard<std::mutex> guard{p.stop_mtx};
    if (!p.stop_requested) {
      p.stop_requested = true;
      p.stop_deadline = clock_type::now() + grace;
    }
  }
  p.mailbox->post([] {}); // wakes the loop
  std::unique_lock<std::mutex> lock{p.life_mtx};
  // Hosted by a reactor, the loop may move to a thread of its own on the
  // way; `finished` says it has left either.
  p.life_cv.wait(lock, [&p] { return p.finished; });
  auto loop = std::move(p.loop);
  lock.unlock();
  if (loop.joinable()) loop.join();
}

std::size_t http_server::connections() const {
  return impl_->open_connections;
}

} // namespace mcprt::cli
