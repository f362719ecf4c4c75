// Raw bytes as one HTTP request, or several pipelined, through the daemon's
// real HTTP side: libmicrohttpd parses them (fed through a socket pair with
// MHD_add_connection), then the real checks, routes and handlers answer on
// a runtime over a temp workspace (untrusted, so nothing is spawned; one
// project server waits for approval, so approve / reject / restart reach
// the gating actor). It must answer or close for any bytes, never crash,
// never answer 500, and never log text it was not given escaped.

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include <caf/all.hpp>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "cli/http_api.hpp"
#include "cli/http_server.hpp"
#include "core/untrusted_text.hpp"
#include "mcprt/runtime.hpp"

namespace {

namespace fs = std::filesystem;
using namespace mcprt;

/// Every message the daemon's side logs must already be safe to show:
/// escaped at its source, before any sink.
class checking_sink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    if (first_invalid_utf8(text)) __builtin_trap();
    for (unsigned char c : text)
      if (c < 0x20 || c == 0x7F) __builtin_trap();
  }
  void flush_() override {}
};

constexpr int fake_port = 8080; // the Host the seeds name

struct harness {
  fs::path dir;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<cli::http_api> api;
  std::unique_ptr<cli::http_server> server;

  harness() {
    auto logger = std::make_shared<spdlog::logger>("fuzz", std::make_shared<checking_sink>());
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
    char templ[] = "/tmp/mcprt-fuzz-http-XXXXXX";
    if (!::mkdtemp(templ)) std::abort();
    dir = templ;
    fs::create_directories(dir / "home");
    fs::create_directories(dir / "ws");
    std::ofstream(dir / "ws" / ".mcp.json") << R"({"mcpServers": {"proj": {"command": "/bin/true"}}})";
    add_mcprt_types(cfg);
    use_mcprt_scheduler(cfg, 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    runtime_options o;
    o.workspace = dir / "ws";
    o.home = dir / "home";
    o.trusted = false;
    o.watch = false;
    o.max_calls_per_server = 2;
    auto started = runtime::start(*sys, o);
    if (!started) std::abort();
    rt = std::move(*started);
    auto session = rt->open_session();
    cli::http_api_options ho;
    ho.instance = "fuzz";
    ho.allowed_origins = {"http://app.example:3000"};
    ho.keepalive = std::chrono::milliseconds(200);
    ho.max_streams = 4;
    ho.connect_wait = std::chrono::milliseconds(0);
    ho.call_timeout = std::chrono::milliseconds(2000);
    cli::http_server_options so;
    so.max_connections = 16;
    // Short: an input that stops mid-request (most mutations) is closed
    // by this deadline, and each one waited for it.
    so.request_timeout = std::chrono::milliseconds(100);
    api = std::make_unique<cli::http_api>(*rt, *sys, session, ho);
    server = std::make_unique<cli::http_server>(*api, so);
    std::string error;
    if (!api->install(*server) || !server->start_without_listener(error)) std::abort();
    api->listening_on(fake_port);
  }

  /// Stops the HTTP side and the runtime. The HTTP objects go (their
  /// threads joined: TSan reports threads never joined); the runtime and
  /// the actor system stay (reachable, so no leak is reported): CAF's actor
  /// system cannot be destroyed from an atexit handler, as statics it uses
  /// that were first touched after the handler was registered are already
  /// gone then.
  void stop() {
    api->stop();
    server->stop(std::chrono::milliseconds(500));
    rt->shutdown();
    server.reset();
    api.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

harness* the_harness = nullptr;

harness& get() {
  if (!the_harness) {
    the_harness = new harness;
    // Stopped before the statics it uses go (spdlog's registry among them).
    std::atexit([] { the_harness->stop(); });
  }
  return *the_harness;
}

/// Writes `input` while reading what comes back, then reads until the
/// daemon closes (or an event stream starts, or time is up).
std::string exchange(int fd, const uint8_t* data, std::size_t size) {
  std::string got;
  std::size_t sent = 0;
  bool half_closed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (sent == size && !half_closed) {
      ::shutdown(fd, SHUT_WR);
      half_closed = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (half_closed ? 0 : POLLOUT)), 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (p.revents & POLLOUT) {
      auto n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR) sent = size;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[16384];
      auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (n > 0) got.append(buf, static_cast<std::size_t>(n));
      // A stream never ends by itself: its head is enough.
      if (got.find("text/event-stream") != std::string::npos) break;
    }
  }
  return got;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  auto& h = get();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  h.server->add_connection(sv[0]);
  auto answer = exchange(sv[1], data, size);
  ::close(sv[1]);
  // A 500 is an exception that escaped a handler.
  for (std::size_t at = answer.find("HTTP/1.1 500"); at != std::string::npos; at = answer.find("HTTP/1.1 500", at + 1))
    if (at == 0 || answer[at - 1] == '\n') __builtin_trap();
  return 0;
}
