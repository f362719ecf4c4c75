#include "io/http_client.hpp"

// Plain declarations, no type-checking macros: calls go through pointers.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "core/ascii.hpp"
#include "core/http_head.hpp"
#include "core/http_url.hpp"
#include "core/proxy_choice.hpp"
#include "io/shared_library.hpp"

namespace mcprt::io {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string http_response_head::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (ascii_iequals(n, name)) return v;
  return {};
}

bool http_response_head::has_header(std::string_view name) const {
  for (const auto& h : headers)
    if (ascii_iequals(h.first, name)) return true;
  return false;
}

std::string http_response_head::media_type() const {
  auto type = header("Content-Type");
  auto semi = type.find(';');
  return ascii_lower(trim_space(std::string_view(type).substr(0, semi)));
}

std::string describe_http_failure(http_failure failure, std::chrono::milliseconds idle_timeout) {
  switch (failure) {
    case http_failure::none: return "ok";
    case http_failure::resolve: return "cannot resolve the host name";
    case http_failure::connect: return "cannot connect (connection refused or host unreachable)";
    case http_failure::connect_timeout: return "connect timed out";
    case http_failure::tls: return "TLS handshake failed";
    case http_failure::send: return "connection lost while sending the request";
    case http_failure::receive: return "connection lost before the response was complete";
    case http_failure::idle_timeout:
      return "nothing received within " + std::to_string(idle_timeout.count()) + " ms (timed out)";
    case http_failure::total_timeout: return "no complete answer in time (timed out)";
    case http_failure::aborted: return "request aborted";
    case http_failure::other: return "request failed";
  }
  return "request failed";
}

namespace {

// epoll_event.data.u64 of the wake-up eventfd; sockets use their fd.
constexpr std::uint64_t k_wake_tag = ~std::uint64_t{0};

// libcurl is loaded with the first HTTP request, not with the program: a
// runtime without remote servers does not map it and the dozen libraries
// it pulls in (Kerberos, LDAP, SSH, RTMP), about 3 MB of PSS.
struct curl_api {
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_multi_add_handle) multi_add_handle = nullptr;
  decltype(&::curl_multi_cleanup) multi_cleanup = nullptr;
  decltype(&::curl_multi_info_read) multi_info_read = nullptr;
  decltype(&::curl_multi_init) multi_init = nullptr;
  decltype(&::curl_multi_remove_handle) multi_remove_handle = nullptr;
  decltype(&::curl_multi_setopt) multi_setopt = nullptr;
  decltype(&::curl_multi_socket_action) multi_socket_action = nullptr;
  decltype(&::curl_multi_strerror) multi_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
};

const curl_api& curl() {
  static const curl_api api = [] {
    curl_api api;
    shared_library lib("libcurl.so.4", "HTTP servers need libcurl (Debian: libcurl4)");
    lib.resolve("curl_easy_cleanup", api.easy_cleanup);
    lib.resolve("curl_easy_getinfo", api.easy_getinfo);
    lib.resolve("curl_easy_init", api.easy_init);
    lib.resolve("curl_easy_setopt", api.easy_setopt);
    lib.resolve("curl_easy_strerror", api.easy_strerror);
    lib.resolve("curl_global_init", api.global_init);
    lib.resolve("curl_multi_add_handle", api.multi_add_handle);
    lib.resolve("curl_multi_cleanup", api.multi_cleanup);
    lib.resolve("curl_multi_info_read", api.multi_info_read);
    lib.resolve("curl_multi_init", api.multi_init);
    lib.resolve("curl_multi_remove_handle", api.multi_remove_handle);
    lib.resolve("curl_multi_setopt", api.multi_setopt);
    lib.resolve("curl_multi_socket_action", api.multi_socket_action);
    lib.resolve("curl_multi_strerror", api.multi_strerror);
    lib.resolve("curl_slist_append", api.slist_append);
    lib.resolve("curl_slist_free_all", api.slist_free_all);
    // Not thread-safe before 7.84: runs once, here.
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
    return api;
  }();
  return api;
}

http_outcome outcome_of(CURLcode code, const char* detail) {
  http_outcome o;
  switch (code) {
    case CURLE_OK: return o;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: o.failure = http_failure::resolve; break;
    case CURLE_COULDNT_CONNECT: o.failure = http_failure::connect; break;
#if LIBCURL_VERSION_NUM >= 0x074900
    case CURLE_PROXY:
      o.failure = http_failure::connect;
      o.reason = "the proxy refused the connection";
      break;
#endif
    case CURLE_OPERATION_TIMEDOUT: o.failure = http_failure::connect_timeout; break;
    case CURLE_SSL_CONNECT_ERROR: o.failure = http_failure::tls; break;
    case CURLE_PEER_FAILED_VERIFICATION:
      o.failure = http_failure::tls;
      o.reason = "TLS server certificate verification failed";
      break;
    case CURLE_SSL_CACERT_BADFILE:
      o.failure = http_failure::tls;
      o.reason = "cannot load the TLS CA certificates";
      break;
    case CURLE_SEND_ERROR: o.failure = http_failure::send; break;
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: o.failure = http_failure::receive; break;
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK: o.failure = http_failure::aborted; break;
    default:
      o.failure = http_failure::other;
      o.reason = std::string("request failed (") + curl().easy_strerror(code) + ")";
      break;
  }
  (void)detail;
  return o;
}

} // namespace

struct http_client::impl : std::enable_shared_from_this<http_client::impl> {
  struct request_state {
    request_id id = 0;
    impl* self = nullptr;
    CURL* easy = nullptr;
    curl_slist* header_list = nullptr;
    http_request req;
    http_handlers handlers;
    std::size_t body_offset = 0;
    bool body_reported = false;
    http_head_reader reader;
    http_response_head head;
    bool head_delivered = false;
    bool cancelled = false;  // no handler runs any more
    bool report_shutdown = false; // a fetch's: on_done even when the client stops
    std::optional<http_failure> forced; // set when we end the transfer ourselves
    clock_type::time_point last_activity;
    timer_id idle_timer = 0;
    timer_id total_timer = 0;
    curl_slist* connect_to = nullptr;
    char error[CURL_ERROR_SIZE] = {};
  };

  explicit impl(http_client_options o) : opts(o) {}

  ~impl() {
    if (multi) curl().multi_cleanup(multi);
    if (epfd >= 0) ::close(epfd);
    if (wakefd >= 0) ::close(wakefd);
  }

  const http_client_options opts;

  // ---- shared with other threads --------------------------------------
  mutable std::mutex mu;
  mutable std::condition_variable idle_cv;
  std::deque<std::function<void()>> tasks; // guarded by mu
  bool started = false;                    // guarded by mu
  bool stopping = false;                   // guarded by mu
  std::thread thread;
  std::atomic<std::thread::id> loop_id{};
  std::atomic<request_id> next_request{1};
  std::atomic<timer_id> next_timer{1};
  std::atomic<std::size_t> active{0};
  std::atomic<std::uint64_t> connections{0};

  // ---- loop thread only -----------------------------------------------
  int epfd = -1;
  int wakefd = -1;
  CURLM* multi = nullptr;
  std::unordered_map<request_id, std::unique_ptr<request_state>> requests;
  std::unordered_map<curl_socket_t, std::uint32_t> watched; // fd -> epoll interest
  std::optional<clock_type::time_point> curl_deadline;
  std::multimap<clock_type::time_point, timer_id> timer_queue;
  std::unordered_map<timer_id, std::pair<clock_type::time_point, std::function<void()>>> timers;
  int in_curl = 0; // depth of curl calls that may run our callbacks
  std::vector<request_id> deferred_removals;

  // ---- starting the loop ----------------------------------------------

  // Called with mu held.
  void start_locked() {
    if (started) return;
    epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) throw std::system_error(errno, std::generic_category(), "http_client: epoll_create1");
    wakefd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wakefd < 0) throw std::system_error(errno, std::generic_category(), "http_client: eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = k_wake_tag;
    ::epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev);
    started = true;
    thread = std::thread([this] { run(); });
  }

  // On the loop thread, with the first request. Empty, or why not.
  std::string ensure_multi() {
    if (multi) return {};
    try {
      const auto& api = curl();
      multi = api.multi_init();
      if (!multi) return "cannot start libcurl (curl_multi_init failed)";
      api.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &impl::socket_cb);
      api.multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
      api.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &impl::timer_cb);
      api.multi_setopt(multi, CURLMOPT_TIMERDATA, this);
      api.multi_setopt(multi, CURLMOPT_PIPELINING, long(CURLPIPE_MULTIPLEX));
      api.multi_setopt(multi, CURLMOPT_MAXCONNECTS, long(opts.max_idle_connections));
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  bool enqueue(std::function<void()> fn) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return false;
      start_locked();
      tasks.push_back(std::move(fn));
      // The loop drains its tasks before it waits again: no wake-up needed
      // from its own thread.
      wake = loop_id.load() != std::this_thread::get_id();
    }
    if (wake) {
      std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wakefd, &one, sizeof(one));
    }
    return true;
  }

  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!started) {
        stopping = true;
        return;
      }
      if (stopping) return;
      stopping = true;
    }
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakefd, &one, sizeof(one));
    if (thread.joinable()) thread.join();
  }

  // ---- the loop -------------------------------------------------------

  void run() {
    loop_id = std::this_thread::get_id();
    std::vector<epoll_event> events(64);
    for (;;) {
      std::deque<std::function<void()>> batch;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) break;
        batch.swap(tasks);
      }
      for (auto& t : batch) {
        try {
          t();
        } catch (...) {
          // One bad task must not end every request of the process.
        }
      }
      process_removals();
      int timeout = wait_timeout();
      int n = ::epoll_wait(epfd, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == k_wake_tag) {
          std::uint64_t v;
          while (::read(wakefd, &v, sizeof(v)) > 0) {
          }
          continue;
        }
        int flags = 0;
        if (events[i].events & EPOLLIN) flags |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
        if (events[i].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
        socket_action(static_cast<curl_socket_t>(events[i].data.u64), flags);
      }
      auto now = clock_type::now();
      if (curl_deadline && *curl_deadline <= now) {
        curl_deadline.reset();
        socket_action(CURL_SOCKET_TIMEOUT, 0);
      }
      run_due_timers(now);
      process_removals();
    }
    shutdown_all();
  }

  int wait_timeout() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!tasks.empty() || stopping) return 0;
    }
    std::optional<clock_type::time_point> next = curl_deadline;
    if (!timer_queue.empty() && (!next || timer_queue.begin()->first < *next)) next = timer_queue.begin()->first;
    if (!next) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - clock_type::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 60000));
  }

  void socket_action(curl_socket_t fd, int flags) {
    int running = 0;
    ++in_curl;
    curl().multi_socket_action(multi, fd, flags, &running);
    --in_curl;
    read_done();
  }

  void run_due_timers(clock_type::time_point now) {
    while (!timer_queue.empty() && timer_queue.begin()->first <= now) {
      auto id = timer_queue.begin()->second;
      timer_queue.erase(timer_queue.begin());
      auto it = timers.find(id);
      if (it == timers.end()) continue;
      auto fn = std::move(it->second.second);
      timers.erase(it);
      try {
        fn();
      } catch (...) {
      }
    }
  }

  // The loop ends: every request still running ends too. A fetch's on_done
  // runs (its caller on another thread must not wait for ever); no other
  // handler does, as their owners may be gone already.
  void shutdown_all() {
    std::vector<http_handlers> ended;
    for (auto& [id, r] : requests) {
      if (r->easy) {
        curl().multi_remove_handle(multi, r->easy);
        curl().easy_cleanup(r->easy);
      }
      if (r->header_list) curl().slist_free_all(r->header_list);
      if (r->connect_to) curl().slist_free_all(r->connect_to);
      if (!r->cancelled && r->report_shutdown) ended.push_back(std::move(r->handlers));
    }
    requests.clear();
    timers.clear();
    timer_queue.clear();
    active = 0;
    idle_cv.notify_all();
    http_outcome o;
    o.failure = http_failure::aborted;
    o.reason = "the HTTP client stopped";
    for (auto& h : ended)
      if (h.on_done) {
        try {
          h.on_done(o);
        } catch (...) {
        }
      }
  }

  // ---- curl callbacks -------------------------------------------------

  static int socket_cb(CURL*, curl_socket_t s, int what, void* userp, void*) {
    auto* self = static_cast<impl*>(userp);
    if (what == CURL_POLL_REMOVE) {
      ::epoll_ctl(self->epfd, EPOLL_CTL_DEL, s, nullptr);
      self->watched.erase(s);
      return 0;
    }
    std::uint32_t interest = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) interest |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) interest |= EPOLLOUT;
    epoll_event ev{};
    ev.events = interest;
    ev.data.u64 = static_cast<std::uint64_t>(s);
    auto it = self->watched.find(s);
    int op = it == self->watched.end() ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (::epoll_ctl(self->epfd, op, s, &ev) != 0) {
      // A closed fd whose number came back: the old registration is gone
      // with the old file, or still there for the new one.
      if (errno == EEXIST) ::epoll_ctl(self->epfd, EPOLL_CTL_MOD, s, &ev);
      else if (errno == ENOENT) ::epoll_ctl(self->epfd, EPOLL_CTL_ADD, s, &ev);
    }
    self->watched[s] = interest;
    return 0;
  }

  static int timer_cb(CURLM*, long timeout_ms, void* userp) {
    auto* self = static_cast<impl*>(userp);
    if (timeout_ms < 0) self->curl_deadline.reset();
    else self->curl_deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
    return 0;
  }

  static curl_socket_t open_socket_cb(void* userp, curlsocktype, curl_sockaddr* addr) {
    auto* self = static_cast<impl*>(userp);
    auto fd = ::socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    if (fd >= 0) self->connections.fetch_add(1);
    return fd < 0 ? CURL_SOCKET_BAD : fd;
  }

  static std::size_t read_cb(char* buf, std::size_t size, std::size_t n, void* ud) {
    auto* r = static_cast<request_state*>(ud);
    if (r->cancelled) return CURL_READFUNC_ABORT;
    const auto& body = r->req.body;
    std::size_t len = std::min(size * n, body.size() - r->body_offset);
    std::memcpy(buf, body.data() + r->body_offset, len);
    r->body_offset += len;
    if (r->body_offset == body.size()) r->self->body_sent(*r);
    return len;
  }

  static std::size_t header_cb(char* buf, std::size_t size, std::size_t n, void* ud) {
    auto* r = static_cast<request_state*>(ud);
    const std::size_t len = size * n;
    if (r->cancelled) return 0;
    r->last_activity = clock_type::now();
    if (r->head_delivered) return len; // trailers
    switch (r->reader.feed(std::string_view(buf, len))) {
      case http_head_reader::step::more: return len;
      case http_head_reader::step::too_large:
        r->forced = http_failure::other;
        return 0;
      case http_head_reader::step::complete: return r->self->deliver_head(*r) ? len : 0;
    }
    return len;
  }

  static std::size_t write_cb(char* buf, std::size_t size, std::size_t n, void* ud) {
    auto* r = static_cast<request_state*>(ud);
    const std::size_t len = size * n;
    if (r->cancelled) return 0;
    r->last_activity = clock_type::now();
    if (!r->head_delivered && !r->self->deliver_head(*r)) return 0;
    if (r->cancelled) return 0;
    if (r->handlers.on_data) {
      bool go = false;
      try {
        go = r->handlers.on_data(std::string_view(buf, len));
      } catch (...) {
        go = false;
      }
      if (!go) {
        if (!r->forced) r->forced = http_failure::aborted;
        return 0;
      }
    }
    return r->cancelled ? 0 : len;
  }

  // ---- per request ----------------------------------------------------

  void body_sent(request_state& r) {
    if (r.body_reported || r.cancelled) return;
    r.body_reported = true;
    if (r.handlers.on_body_sent) {
      try {
        r.handlers.on_body_sent();
      } catch (...) {
      }
    }
  }

  bool deliver_head(request_state& r) {
    if (r.head_delivered) return true;
    r.head_delivered = true;
    body_sent(r); // the answer came: whatever was to be sent, was
    if (r.cancelled) return false;
    r.head.status = r.reader.head().status;
    r.head.reason = r.reader.head().reason;
    r.head.headers = r.reader.head().headers;
    long version = 0;
    curl().easy_getinfo(r.easy, CURLINFO_HTTP_VERSION, &version);
    r.head.http_version = version >= CURL_HTTP_VERSION_2_0 ? 2 : 1;
    if (!r.handlers.on_head) return true;
    bool go = false;
    try {
      go = r.handlers.on_head(r.head);
    } catch (...) {
      go = false;
    }
    if (!go && !r.forced) r.forced = http_failure::aborted;
    return go && !r.cancelled;
  }

  void add_request(std::unique_ptr<request_state> r) {
    if (auto why = ensure_multi(); !why.empty()) {
      finish_unstarted(std::move(r), why);
      return;
    }
    auto* easy = curl().easy_init();
    if (!easy) {
      finish_unstarted(std::move(r), "cannot create an HTTP request");
      return;
    }
    r->easy = easy;
    auto& q = r->req;
    std::string why;
    auto url = http_url::parse(q.url, &why);
    if (!url) {
      curl().easy_cleanup(easy);
      r->easy = nullptr;
      finish_unstarted(std::move(r), why.empty() ? "invalid URL" : why);
      return;
    }
    // What our parser read, not what curl might read into the same text.
    const auto canonical = url->origin() + url->target;
    curl().easy_setopt(easy, CURLOPT_URL, canonical.c_str());
    curl().easy_setopt(easy, CURLOPT_PRIVATE, r.get());
    curl().easy_setopt(easy, CURLOPT_ERRORBUFFER, r->error);
    curl().easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl().easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    curl().easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl().easy_setopt(easy, CURLOPT_HTTP_VERSION, long(CURL_HTTP_VERSION_2TLS));
    // Over TLS, ALPN tells at the handshake whether the connection
    // multiplexes: wait for that rather than open a second one. Over plain
    // HTTP it is HTTP/1.1, and curl would learn that only from the first
    // response's head: a slow call would hold back every other.
    if (url->scheme == "https") curl().easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
    curl().easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl().easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, long(q.connect_timeout.count()));
    if (q.tcp_keepalive) {
      curl().easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
      curl().easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 60L);
      curl().easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 10L);
    }
    if (q.fresh_connection) {
      curl().easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
      curl().easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    }
    auto proxy = choose_proxy(url->scheme, url->host, url->port, q.proxy, process_env());
    curl().easy_setopt(easy, CURLOPT_PROXY, proxy.c_str());
    if (!q.connect_address.empty() && proxy.empty()) {
      auto address = q.connect_address.find(':') != std::string::npos ? "[" + q.connect_address + "]" : q.connect_address;
      auto line = url->host + ":" + std::to_string(url->port) + ":" + address + ":" + std::to_string(url->port);
      if (url->host.find(':') != std::string::npos) line = "[" + url->host + "]" + line.substr(url->host.size());
      r->connect_to = curl().slist_append(nullptr, line.c_str());
      curl().easy_setopt(easy, CURLOPT_CONNECT_TO, r->connect_to);
    }
    curl().easy_setopt(easy, CURLOPT_NOPROXY, "");
    curl().easy_setopt(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    if (!q.ca_file.empty()) {
      // In addition to the system store: the hashed directory Debian's
      // ca-certificates keeps (curl's own default is the bundle file).
      curl().easy_setopt(easy, CURLOPT_CAINFO, q.ca_file.c_str());
      curl().easy_setopt(easy, CURLOPT_CAPATH, "/etc/ssl/certs");
    }
    curl().easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &impl::open_socket_cb);
    curl().easy_setopt(easy, CURLOPT_OPENSOCKETDATA, this);
    curl().easy_setopt(easy, CURLOPT_HEADERFUNCTION, &impl::header_cb);
    curl().easy_setopt(easy, CURLOPT_HEADERDATA, r.get());
    curl().easy_setopt(easy, CURLOPT_WRITEFUNCTION, &impl::write_cb);
    curl().easy_setopt(easy, CURLOPT_WRITEDATA, r.get());

    const bool with_body = q.method != "GET" && q.method != "HEAD";
    if (q.method == "POST") {
      curl().easy_setopt(easy, CURLOPT_POST, 1L);
    } else if (q.method != "GET") {
      curl().easy_setopt(easy, CURLOPT_CUSTOMREQUEST, q.method.c_str());
    }
    if (with_body && !q.body.empty()) {
      curl().easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(q.body.size()));
      curl().easy_setopt(easy, CURLOPT_READFUNCTION, &impl::read_cb);
      curl().easy_setopt(easy, CURLOPT_READDATA, r.get());
    } else if (with_body && q.method == "POST") {
      curl().easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(0));
      curl().easy_setopt(easy, CURLOPT_POSTFIELDS, "");
    }
    for (const auto& [name, value] : q.headers) {
      auto line = name + ": " + value;
      if (value.empty()) line = name + ";"; // curl's way to send an empty value
      r->header_list = curl().slist_append(r->header_list, line.c_str());
    }
    // No "Expect: 100-continue" round trip, and curl's default Accept only
    // where the caller set none.
    r->header_list = curl().slist_append(r->header_list, "Expect:");
    curl().easy_setopt(easy, CURLOPT_HTTPHEADER, r->header_list);

    r->last_activity = clock_type::now();
    r->self = this;
    auto id = r->id;
    if (q.idle_timeout.count() > 0) r->idle_timer = schedule(q.idle_timeout, [this, id] { check_idle(id); });
    if (q.total_timeout.count() > 0)
      r->total_timer = schedule(q.total_timeout, [this, id] {
        auto it = requests.find(id);
        if (it == requests.end()) return;
        it->second->total_timer = 0;
        it->second->forced = http_failure::total_timeout;
        finish(id, CURLE_OPERATION_TIMEDOUT);
      });
    auto* raw = r.get();
    requests.emplace(id, std::move(r));
    ++in_curl;
    auto rc = curl().multi_add_handle(multi, easy);
    --in_curl;
    if (rc != CURLM_OK) {
      raw->forced = http_failure::other;
      std::snprintf(raw->error, sizeof(raw->error), "%s", curl().multi_strerror(rc));
      finish(id, CURLE_FAILED_INIT);
    }
  }

  void finish_unstarted(std::unique_ptr<request_state> r, const std::string& why) {
    http_outcome o;
    o.failure = http_failure::other;
    o.reason = why;
    auto handlers = std::move(r->handlers);
    if (r->header_list) curl().slist_free_all(r->header_list);
    r.reset();
    --active;
    idle_cv.notify_all();
    if (handlers.on_done) {
      try {
        handlers.on_done(o);
      } catch (...) {
      }
    }
  }

  void check_idle(request_id id) {
    auto it = requests.find(id);
    if (it == requests.end()) return;
    auto& r = *it->second;
    r.idle_timer = 0;
    auto quiet = clock_type::now() - r.last_activity;
    if (quiet < r.req.idle_timeout) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(r.req.idle_timeout - quiet);
      r.idle_timer = schedule(left, [this, id] { check_idle(id); });
      return;
    }
    r.forced = http_failure::idle_timeout;
    finish(id, CURLE_OPERATION_TIMEDOUT);
  }

  void read_done() {
    int left = 0;
    while (CURLMsg* m = curl().multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      request_state* r = nullptr;
      curl().easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &r);
      if (r) finish(r->id, m->data.result);
    }
  }

  // Takes the request out of curl and reports its end (unless cancelled).
  void finish(request_id id, CURLcode code) {
    auto it = requests.find(id);
    if (it == requests.end()) return;
    auto r = std::move(it->second);
    requests.erase(it);
    if (r->idle_timer) cancel_timer_now(r->idle_timer);
    if (r->total_timer) cancel_timer_now(r->total_timer);
    http_outcome o;
    if (r->forced) {
      o.failure = *r->forced;
      if (o.failure == http_failure::other && r->error[0]) o.reason = r->error;
      else if (o.failure == http_failure::other) o.reason = "response head too large";
    } else {
      o = outcome_of(code, r->error);
    }
    if (o.reason.empty()) o.reason = describe_http_failure(o.failure, r->req.idle_timeout);
    if (o.failure == http_failure::total_timeout)
      o.reason = "no complete answer within " + std::to_string(r->req.total_timeout.count()) + " ms (timed out)";
    o.got_head = r->head_delivered;
    // A head that ended the response with no body was not delivered yet.
    if (o.ok() && !r->head_delivered && r->reader.complete() && !r->cancelled) {
      if (!deliver_head(*r)) {
        o.failure = http_failure::aborted;
        o.reason = describe_http_failure(o.failure, r->req.idle_timeout);
      }
      o.got_head = true;
    }
    if (o.ok() && !r->body_reported) body_sent(*r);
    if (r->easy) {
      ++in_curl;
      curl().multi_remove_handle(multi, r->easy);
      --in_curl;
      curl().easy_cleanup(r->easy);
    }
    if (r->header_list) curl().slist_free_all(r->header_list);
    if (r->connect_to) curl().slist_free_all(r->connect_to);
    auto handlers = std::move(r->handlers);
    const bool cancelled = r->cancelled;
    r.reset();
    --active;
    idle_cv.notify_all();
    if (!cancelled && handlers.on_done) {
      try {
        handlers.on_done(o);
      } catch (...) {
      }
    }
  }

  void cancel_now(request_id id) {
    auto it = requests.find(id);
    if (it == requests.end()) return;
    it->second->cancelled = true;
    if (in_curl > 0) {
      deferred_removals.push_back(id);
      return;
    }
    finish(id, CURLE_ABORTED_BY_CALLBACK);
  }

  void process_removals() {
    while (!deferred_removals.empty()) {
      auto ids = std::move(deferred_removals);
      deferred_removals.clear();
      for (auto id : ids)
        finish(id, CURLE_ABORTED_BY_CALLBACK);
    }
  }

  // ---- timers ---------------------------------------------------------

  timer_id schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
    auto id = next_timer.fetch_add(1);
    schedule_with_id(id, delay, std::move(fn));
    return id;
  }

  void schedule_with_id(timer_id id, std::chrono::milliseconds delay, std::function<void()> fn) {
    auto at = clock_type::now() + delay;
    timers.emplace(id, std::make_pair(at, std::move(fn)));
    timer_queue.emplace(at, id);
  }

  void cancel_timer_now(timer_id id) {
    auto it = timers.find(id);
    if (it == timers.end()) return;
    auto range = timer_queue.equal_range(it->second.first);
    for (auto q = range.first; q != range.second; ++q)
      if (q->second == id) {
        timer_queue.erase(q);
        break;
      }
    timers.erase(it);
  }
};

http_client::http_client() : http_client(http_client_options{}) {}

http_client::http_client(http_client_options opts) : impl_(std::make_shared<impl>(opts)) {}

http_client::~http_client() {
  impl_->stop_and_join();
}

http_client::request_id http_client::start(http_request req, http_handlers handlers) {
  return start_request(std::move(req), std::move(handlers), false);
}

http_client::request_id http_client::start_request(http_request req, http_handlers handlers, bool report_shutdown) {
  auto r = std::make_unique<impl::request_state>();
  r->id = impl_->next_request.fetch_add(1);
  r->req = std::move(req);
  r->handlers = std::move(handlers);
  r->report_shutdown = report_shutdown;
  auto id = r->id;
  ++impl_->active;
  auto* self = impl_.get();
  // std::function needs a copyable closure: share the owner of the state.
  auto holder = std::make_shared<std::unique_ptr<impl::request_state>>(std::move(r));
  if (!impl_->enqueue([self, holder] { self->add_request(std::move(*holder)); })) {
    --impl_->active;
    // The client is stopping: a fetch ends here, on its caller's thread.
    if (auto& h = (*holder)->handlers; report_shutdown && h.on_done) {
      http_outcome o;
      o.failure = http_failure::aborted;
      o.reason = "the HTTP client stopped";
      h.on_done(o);
    }
  }
  return id;
}

void http_client::cancel(request_id id) {
  if (on_loop_thread()) {
    impl_->cancel_now(id);
    return;
  }
  auto* self = impl_.get();
  impl_->enqueue([self, id] { self->cancel_now(id); });
}

void http_client::post(std::function<void()> fn) {
  impl_->enqueue(std::move(fn));
}

void http_client::run_sync(const std::function<void()>& fn) {
  if (on_loop_thread()) {
    fn();
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    queued = !impl_->stopping;
  }
  if (!queued) {
    fn();
    return;
  }
  impl_->enqueue([&fn, done] {
    try {
      fn();
    } catch (...) {
    }
    done->set_value();
  });
  fut.wait();
}

http_client::timer_id http_client::run_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto id = impl_->next_timer.fetch_add(1);
  if (on_loop_thread()) {
    impl_->schedule_with_id(id, delay, std::move(fn));
    return id;
  }
  auto* self = impl_.get();
  auto shared = std::make_shared<std::function<void()>>(std::move(fn));
  impl_->enqueue([self, id, delay, shared] { self->schedule_with_id(id, delay, std::move(*shared)); });
  return id;
}

void http_client::cancel_timer(timer_id id) {
  if (on_loop_thread()) {
    impl_->cancel_timer_now(id);
    return;
  }
  auto* self = impl_.get();
  impl_->enqueue([self, id] { self->cancel_timer_now(id); });
}

bool http_client::on_loop_thread() const {
  return impl_->loop_id.load() == std::this_thread::get_id();
}

std::size_t http_client::active_requests() const {
  return impl_->active.load();
}

bool http_client::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->idle_cv.wait_for(lock, timeout, [&] { return impl_->active.load() == 0; });
}

std::uint64_t http_client::connections_opened() const {
  return impl_->connections.load();
}

std::size_t http_client::thread_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->started && !impl_->stopping ? 1 : 0;
}

http_client::response http_client::fetch(http_request req, std::size_t max_body) {
  return fetch(std::move(req), max_body, {});
}

http_client::response http_client::fetch(http_request req, std::size_t max_body,
                                          const std::function<void(std::function<void()> abort)>& started) {
  if (on_loop_thread()) throw std::logic_error("http_client::fetch on the loop thread would wait for itself");
  // Shared with the handlers and the abort function, which may outlive
  // this call.
  struct fetch_state {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    response result;
    void complete(const http_outcome& o) {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      result.outcome = o;
      done = true;
      cv.notify_all();
    }
  };
  auto st = std::make_shared<fetch_state>();
  http_handlers h;
  h.on_head = [st](const http_response_head& head) {
    std::lock_guard<std::mutex> lock(st->mu);
    st->result.head = head;
    return true;
  };
  h.on_data = [st, max_body](std::string_view bytes) {
    std::lock_guard<std::mutex> lock(st->mu);
    auto& body = st->result.body;
    if (body.size() + bytes.size() > max_body) {
      body.append(bytes.substr(0, max_body - body.size()));
      st->result.truncated = true;
      return false;
    }
    body.append(bytes);
    return true;
  };
  h.on_done = [st](const http_outcome& o) { st->complete(o); };
  auto id = start_request(std::move(req), std::move(h), true);
  if (started) {
    std::weak_ptr<impl> weak = impl_;
    started([weak, st, id] {
      if (auto i = weak.lock()) {
        auto* self = i.get();
        i->enqueue([self, id] { self->cancel_now(id); });
      }
      http_outcome o;
      o.failure = http_failure::aborted;
      o.reason = describe_http_failure(o.failure, {});
      st->complete(o);
    });
  }
  std::unique_lock<std::mutex> lock(st->mu);
  st->cv.wait(lock, [&] { return st->done; });
  return std::move(st->result);
}

} // namespace mcprt::io
