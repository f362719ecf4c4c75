// `mcprt serve`: the runtime on one workspace, with the HTTP API on top.

#include "cli/serve.hpp"
#include "cli/budget_server.hpp"
#include "core/http_url.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/io_thread_jobs.hpp"
#include "cli/daemon_file.hpp"
#include "cli/host_requests.hpp"
#include "cli/http_api.hpp"
#include "cli/http_server.hpp"
#include "core/budget_ledger.hpp"
#include "core/daemon_identity.hpp"
#include "core/http_rules.hpp"
#include "core/settings.hpp"
#include "core/oauth_endpoints.hpp"
#include "core/untrusted_text.hpp"
#include "core/workspace_view.hpp"
#include "io/state_dir.hpp"
#include "mcprt/gateway.hpp"
#include "mcprt/runtime.hpp"
#include "mcprt/runtime_access.hpp"
#include "mcprt/workspace_node.hpp"
#include "mcprt/version.hpp"

namespace mcprt::cli {

namespace fs = std::filesystem;
using nlohmann::json;

// -- addresses -----------------------------------------------------------------------

listen_address parse_listen(const std::string& s) {
  listen_address out;
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') {
      out.error = "--listen: expected [IPV6]:PORT, got '" + s + "'";
      return out;
    }
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) {
      out.error = "--listen: expected HOST:PORT (e.g. 127.0.0.1:0), got '" + s + "'";
      return out;
    }
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty()) {
    out.error = "--listen: no host in '" + s + "'";
    return out;
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos
      || std::stol(port) > 65535) {
    out.error = "--listen: the port must be a number from 0 to 65535, got '" + port + "'";
    return out;
  }
  out.host = host;
  out.port = static_cast<int>(std::stol(port));
  return out;
}

bool is_loopback(const std::string& host) {
  // A literal is what it says; a name is what it resolves to, every
  // address of it (`localhost` included: /etc/hosts decides).
  if (host.find_first_not_of("0123456789.") == std::string::npos || host.find(':') != std::string::npos)
    return http::is_loopback_host(host);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return false;
  bool all = true;
  for (auto* a = found; a; a = a->ai_next) {
    std::optional<oauth::ip_address> ip;
    if (a->ai_family == AF_INET)
      ip = oauth::ip_from_bytes(reinterpret_cast<const unsigned char*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr), 4);
    else if (a->ai_family == AF_INET6)
      ip = oauth::ip_from_bytes(reinterpret_cast<const unsigned char*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr), 16);
    if (!ip || oauth::scope_of(*ip) != oauth::address_scope::loopback) all = false;
  }
  ::freeaddrinfo(found);
  return all;
}

namespace {

// -- logging -------------------------------------------------------------------------

/// A log message safe for a terminal and a log file: one with control
/// characters or invalid UTF-8 (from any component: a path, a server's
/// output, a request) is escaped whole, so no message can forge a line or
/// steer a terminal. A clean message goes out as it is, so text a component
/// already escaped is not escaped twice.
std::string safe_message(std::string_view msg) {
  auto escaped = escape_for_display(msg);
  if (escaped.size() == msg.size()) return escaped;
  std::string doubled;
  doubled.reserve(msg.size() + 8);
  for (char c : msg) {
    doubled += c;
    if (c == '\\') doubled += c;
  }
  return escaped == doubled ? std::string(msg) : escaped;
}

/// The text format, with every message through safe_message.
class escaping_formatter final : public spdlog::formatter {
public:
  explicit escaping_formatter(std::string pattern)
    : pattern_(std::move(pattern)), inner_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto safe = safe_message(std::string_view(msg.payload.data(), msg.payload.size()));
    auto copy = msg;
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    inner_->format(copy, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<escaping_formatter>(pattern_); }

private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

/// One JSON object per line: {"ts", "level", "msg"}.
class json_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto t = std::chrono::system_clock::to_time_t(msg.time);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() % 1000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    auto level = spdlog::level::to_string_view(msg.level);
    json j{{"ts", buf},
           {"level", std::string(level.data(), level.size())},
           {"msg", safe_message(std::string_view(msg.payload.data(), msg.payload.size()))}};
    auto line = dump_json(j) + "\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};


} // namespace

void setup_logging(const std::string& level, const std::string& format) {
  auto logger = std::make_shared<spdlog::logger>("mcprt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == "json") logger->set_formatter(std::make_unique<json_formatter>());
  else logger->set_formatter(std::make_unique<escaping_formatter>("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v"));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

namespace {

// -- signals -------------------------------------------------------------------------

// SIGINT and SIGTERM are blocked in every thread (the mask is set before the
// first thread starts, and threads inherit it) and taken by one waiting
// thread with sigwait: no async handler, nothing that a sanitizer's deferred
// signal delivery can hold up. SIGUSR1 wakes that thread at a normal exit.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

bool block_stop_signals() {
  auto set = stop_signals();
  if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return false;
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}

int fail_usage(const std::string& msg) {
  std::cerr << "mcprt serve: " << msg << "\n";
  return 2;
}

} // namespace

namespace {

/// Servers' requests for the host: those of a gateway client's call go to
/// that client; the rest to what the daemon had without the gateway.
struct host_router {
  std::atomic<gateway*> gw{nullptr};
  host_handlers fallback;

  host_handlers handlers() {
    host_handlers h;
    // Set after the runtime starts, cleared before the gateway stops; the
    // runtime's one host thread is the only caller.
    auto self = this;
    h.sampling = [self](server_request req, host_responder r) {
      if (auto* g = self->gw.load(); g && g->forward(req, r)) return;
      if (self->fallback.sampling) return self->fallback.sampling(std::move(req), std::move(r));
      r.fail(-1, "sampling is answered only for the calls of a gateway client (or with mcprt serve --sampling ask)");
    };
    h.elicitation = [self](server_request req, host_responder r) {
      if (auto* g = self->gw.load(); g && g->forward(req, r)) return;
      if (self->fallback.elicitation) return self->fallback.elicitation(std::move(req), std::move(r));
      r.answer(nlohmann::json{{"action", "decline"}});
    };
    // A gateway client's request may bring its own roots; anyone else's
    // has the daemon's (the runtime answers when this fails).
    h.roots = [self](server_request req, host_responder r) {
      if (auto* g = self->gw.load(); g && g->forward(req, r)) return;
      r.fail(-32601, "no gateway client's roots for this request (the workspace's roots answer it)");
    };
    h.withdrawn = [self](const std::string& id) {
      if (auto* g = self->gw.load()) g->withdraw(id);
      if (self->fallback.withdrawn) self->fallback.withdrawn(id);
    };
    return h;
  }
};

} // namespace

int run_serve(const serve_flags& f) {
  // -- flags, all checked before anything starts --------------------------------------
  runtime_options opts;
  std::error_code ec;
  opts.workspace = fs::absolute(f.workspace, ec).lexically_normal();
  if (!fs::is_directory(opts.workspace, ec))
    return fail_usage("workspace '" + f.workspace + "' is not a directory");
  std::string no_home;
  auto home = resolve_home(f.home, std::getenv("HOME"), &no_home);
  if (!home) return fail_usage(no_home);
  opts.home = *home;
  opts.profile = f.profile;
  if (!f.mcp_config.empty()) {
    opts.mcp_config = fs::absolute(f.mcp_config, ec);
    if (!fs::is_regular_file(*opts.mcp_config, ec))
      return fail_usage("--mcp-config '" + f.mcp_config + "' is not a file");
  }
  if (f.allowed_names) opts.allowed_server_names = split_name_list(*f.allowed_names);
  opts.trusted = !f.untrusted;
  opts.event_history = static_cast<std::size_t>(f.event_history);
  if (f.debounce_ms < 0) return fail_usage("--debounce-ms must not be negative");
  if (f.threads < 0 || f.threads > 256) return fail_usage("--threads must be between 0 (one per core) and 256");
  opts.debounce = std::chrono::milliseconds(f.debounce_ms);
  // The flags as typed first (their errors name the flag), then the
  // environment the way every embedding host applies it.
  std::vector<std::string> bad;
  if (f.budget) {
    auto b = parse_budget_value(*f.budget);
    if (b.value) opts.budget = b.value;
    else bad.push_back("--budget: " + b.error);
  }
  if (f.budget_mode) {
    if (auto m = parse_budget_mode(*f.budget_mode)) opts.mode = *m;
    else bad.push_back("--budget-mode: expected off, warn or enforce, got '" + *f.budget_mode + "'");
  }
  opts.pool = !f.no_pool;
  if (f.fleet_budget) {
    if (!parse_host_port(*f.fleet_budget)) bad.push_back("--fleet-budget: expected HOST:PORT, got '" + escape_for_display(*f.fleet_budget) + "'");
    else if (f.no_pool) bad.push_back("--fleet-budget needs the pool: not with --no-pool");
    opts.fleet_budget = f.fleet_budget;
  }
  caf_tls_flags tls{f.caf_tls_cert, f.caf_tls_key, f.caf_tls_ca};
  if (auto t = check_caf_tls(tls); !t.empty()) bad.push_back(t);
  else if (tls.any() && !f.fleet_budget && !f.caf_port)
    bad.push_back("--caf-tls-* are for --fleet-budget or --caf-port, and neither is given");
  // Every CAF connection is TLS with mutual authentication: the flags' CA,
  // or the owner's own identity (resolved once the flags are checked).
  opts.fleet_tls = f.fleet_budget.has_value();
  if (f.caf_port) {
    if (*f.caf_port < 0 || *f.caf_port > 65535) bad.push_back("--caf-port must be between 0 and 65535");
    // The owner's identity is for this machine only: hosts elsewhere
    // need a CA of the fleet's.
    else if (auto why = check_caf_host(tls, f.caf_host); !why.empty())
      bad.push_back(why);
  }
  if (bad.empty()) bad = apply_environment(opts);
  if (!bad.empty()) {
    for (auto& e : bad)
      std::cerr << "mcprt serve: " << e << "\n";
    return 2;
  }

  auto addr = parse_listen(f.listen);
  if (!addr.error.empty()) return fail_usage(addr.error);
  // Every request carries a bearer token, loopback included: any local
  // user, and any process they run, can reach a loopback port. Without
  // --token-file it is the owner's (docs/security.md says why a file).
  std::string token, token_path;
  if (!f.token_file.empty()) {
    auto t = read_token_file(f.token_file);
    if (!t.error.empty()) return fail_usage(t.error);
    // A guessable token is no lock: the file may be any of the owner's
    // (an approvals store begins with `{`), named by whoever wrote the flag.
    if (auto why = weak_token_reason(t.token); !why.empty())
      return fail_usage("--token-file '" + escape_for_display(f.token_file) + "': " + why);
    token = t.token;
    std::error_code ec;
    token_path = fs::absolute(f.token_file, ec).lexically_normal().string();
  } else if (!is_loopback(addr.host)) {
    return fail_usage("refusing to listen on non-loopback address " + addr.host
                      + " without --token-file FILE (every request then needs Authorization: Bearer <token>; "
                        "the owner's own token stays on this machine)");
  } else {
    auto t = load_owner_token(opts.home.string());
    if (!t.error.empty()) {
      std::cerr << "mcprt serve: " << t.error << "\n";
      return 1;
    }
    token = t.token;
    token_path = t.path;
  }
  // Before any peer's bytes can reach CAF's BASP reader, the handshake
  // proves the peer holds the owner's key (or a certificate the CA signed).
  if (opts.fleet_budget || f.caf_port) {
    if (auto why = resolve_caf_tls(tls, opts.home.string()); !why.empty()) {
      std::cerr << "mcprt serve: " << why << "\n";
      return 1;
    }
  }
  for (auto& o : f.allow_origins)
    if (!http::is_origin(o))
      return fail_usage("--allow-origin '" + escape_for_display(o)
                        + "' is not an origin (scheme://host[:port], e.g. http://localhost:3000)");
  auto bounded = [](long long v, long long lo, long long hi) { return v >= lo && v <= hi; };
  if (!bounded(f.max_connections, 4, 100000)) return fail_usage("--max-connections must be between 4 and 100000");
  if (!bounded(f.max_streams, 1, f.max_connections))
    return fail_usage("--max-streams must be between 1 and --max-connections");
  if (!bounded(f.max_calls_per_server, 1, 100000)) return fail_usage("--max-calls-per-server must be between 1 and 100000");
  if (!bounded(f.request_timeout_ms, 100, 3600000))
    return fail_usage("--request-timeout-ms must be between 100 and 3600000");
  if (!bounded(f.max_body_bytes, 1024, 1LL << 30)) return fail_usage("--max-body-bytes must be between 1024 and 1073741824");
  opts.max_calls_per_server = static_cast<std::size_t>(f.max_calls_per_server);
  if (!bounded(f.io_poll_us, 0, 10000)) return fail_usage("--io-poll-us must be between 0 and 10000");
  opts.io_poll_before_sleep = std::chrono::microseconds(f.io_poll_us);
  // Servers' requests for the host.
  if (!f.elicitation.empty()) {
    auto p = parse_elicitation_policy(f.elicitation);
    if (!p) return fail_usage("--elicitation: expected decline, accept-defaults or ask, got '" + escape_for_display(f.elicitation) + "'");
    opts.elicitation = *p;
  }
  if (f.sampling != "off" && f.sampling != "ask")
    return fail_usage("--sampling: expected off or ask, got '" + escape_for_display(f.sampling) + "'");
  if (!bounded(f.host_request_timeout_ms, 10, 3600000))
    return fail_usage("--host-request-timeout must be between 10 and 3600000 (ms)");

  setup_logging(f.log_level, f.log_format);
  fs::path daemon_path = daemon_file(opts.workspace.string());
  {
    // Only a daemon of this workspace that still runs keeps us out; a file
    // it left behind (killed), or one that names anything else, is replaced.
    auto other = check_daemon(opts.workspace.string(), false);
    if (other.daemon) {
      std::cerr << "mcprt serve: a daemon already serves " << opts.workspace.string() << " at " << other.daemon->url
                << " (pid " << other.daemon->pid << ", " << daemon_path.string() << ")\n";
      return 1;
    }
    if (!other.absent) spdlog::warn("replacing {}: {}", daemon_path.string(), other.error);
    else if (fs::exists(daemon_path, ec)) spdlog::info("replacing {}: {}", daemon_path.string(), other.error);
  }
  // One daemon per workspace, also while the other one is still starting
  // (its daemon.json not written yet): two would each run a pool and a
  // budget of their own. Held until the process ends; not inherited.
  // The directory is the workspace's, that is a repository's: its files
  // are written through io::state_dir, never through a link planted there.
  std::string state_error;
  auto state = io::state_dir::open(daemon_path.parent_path().parent_path(), daemon_path.parent_path().filename().string(),
                                   state_error);
  if (!state) {
    std::cerr << "mcprt serve: " << escape_for_display(state_error) << "\n";
    return 1;
  }
  auto lock_path = daemon_path.parent_path() / "daemon.lock";
  int lock_fd = state->open_file("daemon.lock", O_RDWR | O_CREAT, state_error);
  if (lock_fd < 0) {
    std::cerr << "mcprt serve: " << escape_for_display(state_error) << "\n";
    return 1;
  }
  while (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      std::cerr << "mcprt serve: another mcprt serve is starting or running for " << opts.workspace.string()
                << " (it holds " << lock_path.string() << ")\n";
    else
      std::cerr << "mcprt serve: cannot lock " << lock_path.string() << ": " << std::strerror(errno) << "\n";
    ::close(lock_fd);
    return 1;
  }
  if (!block_stop_signals()) {
    std::cerr << "mcprt serve: cannot set up signal handling: " << std::strerror(errno) << "\n";
    return 1;
  }

  // -- the runtime ---------------------------------------------------------------------
  tune_allocator_for_messages();
  caf::actor_system_config cfg;
  add_mcprt_types(cfg);
  // Only a fleet node or a published one pays for the middleman's thread.
  if (opts.fleet_budget || f.caf_port) use_caf_tls(cfg, tls);
  if (f.scheduler == "caf") {
    // CAF's default is one worker per core already.
    if (f.threads > 0) cfg.set("scheduler.max-threads", static_cast<std::size_t>(f.threads));
  } else {
    use_mcprt_scheduler(cfg, static_cast<std::size_t>(f.threads));
  }
  caf::actor_system sys{cfg};
  // After the actor system (its responders answer through it), before the
  // runtime (whose host thread calls into it).
  std::optional<host_requests> asks;
  bool ask_elicitation = opts.elicitation == elicitation_policy::ask;
  if (ask_elicitation || f.sampling == "ask") {
    host_requests_options hro;
    hro.timeout = std::chrono::milliseconds(f.host_request_timeout_ms);
    asks.emplace(hro);
    opts.host = asks->handlers(ask_elicitation, f.sampling == "ask");
  }
  // The gateway's clients answer the requests of their own calls; the rest
  // go where they went without it (the HTTP answer routes, or declined /
  // refused). So servers are offered sampling, and `ask` elicitation, once
  // the gateway runs.
  auto router = std::make_shared<host_router>();
  if (!f.no_gateway) {
    router->fallback = std::move(opts.host);
    if (opts.elicitation == elicitation_policy::decline) opts.elicitation = elicitation_policy::ask;
    opts.host = router->handlers();
  }
  auto started = runtime::start(sys, opts);
  if (!started) {
    spdlog::error("cannot start: {}", sys.render(started.error()));
    return 1;
  }
  auto& rt = **started;
  auto session = rt.open_session();
  if (asks) {
    auto bus = runtime_access::bus(rt);
    asks->publish_through([bus](event_payload p) { caf::anon_send(bus, atom::publish_v, std::move(p)); });
  }
  {
    std::string caps;
    for (auto& c : rt.capabilities())
      caps += (caps.empty() ? "" : ",") + c;
    spdlog::info("workspace {} (profile {}, {}, pool {}, budget {}), capabilities {}", opts.workspace.string(),
                 opts.profile, opts.trusted ? "trusted" : "untrusted", opts.pool ? "on" : "off",
                 opts.budget ? std::to_string(*opts.budget) + " " + to_string(opts.mode) : "none", caps);
  }

  // -- the HTTP side ---------------------------------------------------------------------
  auto instance = new_instance_id();
  http_api_options ho;
  ho.token = token;
  ho.instance = instance;
  ho.host = addr.host;
  ho.allowed_origins = f.allow_origins;
  ho.keepalive = std::chrono::milliseconds(std::max(10LL, f.keepalive_ms));
  ho.sse_queue = static_cast<std::size_t>(std::max(1LL, f.sse_queue));
  ho.max_streams = static_cast<std::size_t>(f.max_streams);
  ho.max_body = static_cast<std::size_t>(f.max_body_bytes);
  ho.asks = asks ? &*asks : nullptr;
  http_server_options so;
  so.max_connections = static_cast<std::size_t>(f.max_connections);
  so.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  so.max_body = ho.max_body;
  so.sndbuf = static_cast<int>(std::max(0LL, std::min<long long>(f.sndbuf, 1 << 30)));
  // The HTTP server runs on the thread that serves the stdio servers' pipes,
  // and a request's actor work runs there when its turn ends: a gateway call
  // to a stdio server, there and back, wakes no other thread of the daemon.
  // (Only with a remote runtime does it keep a thread of its own.)
  so.run_on = runtime_access::reactor(rt);
  so.turn_hook = make_io_thread_jobs(sys);
  std::optional<gateway> gw;
  if (!f.no_gateway) {
    gateway_options go;
    go.catalog_session = session;
    go.idle_timeout = std::chrono::milliseconds(f.gateway_idle_ms);
    go.version = MCPRT_VERSION;
    // Without the pool every session spawns every server of its own: the
    // sessions a client can open bound the processes it can cause.
    go.max_sessions = f.max_gateway_sessions > 0 ? static_cast<std::size_t>(f.max_gateway_sessions)
                                                 : (opts.pool ? 4096 : 8);
    gw.emplace(rt, sys, go);
    if (!gw->start()) {
      spdlog::error("cannot start the gateway (event bus subscription)");
      rt.shutdown();
      return 1;
    }
    router->gw = &*gw;
    ho.gateway = &*gw;
  }
  http_api api(rt, sys, session, ho);
  http_server server(api, so);
  if (!api.install(server)) {
    spdlog::error("cannot subscribe to the event bus");
    rt.shutdown();
    return 1;
  }
  std::string listen_error;
  if (!server.listen(addr.host, addr.port, listen_error)) {
    spdlog::error("cannot listen on {}: {}", f.listen, listen_error);
    rt.shutdown();
    return 1;
  }
  api.listening_on(server.port());
  rt.set_own_listeners({{addr.host, server.port()}}); // no OAuth request comes back here
  bool v6 = addr.host.find(':') != std::string::npos;
  std::string url = "http://" + (v6 ? "[" + addr.host + "]" : addr.host) + ":" + std::to_string(server.port());
  // -- remote hosts ---------------------------------------------------------
  std::optional<workspace_node> node;
  std::string caf_url;
  if (f.caf_port) {
    node.emplace(sys, rt);
    auto& published = node->actor();
    auto port = caf::openssl::publish(published, static_cast<uint16_t>(*f.caf_port), f.caf_host.c_str(), true);
    if (!port) {
      spdlog::error("cannot listen on {}:{}: {}", f.caf_host, *f.caf_port, sys.render(port.error()));
      node->stop();
      server.stop(std::chrono::seconds(2));
      rt.shutdown();
      return 1;
    }
    bool caf_v6 = f.caf_host.find(':') != std::string::npos;
    caf_url = std::string("caf+tls://") + (caf_v6 ? "[" + f.caf_host + "]" : f.caf_host) +
              ":" + std::to_string(*port);
  }
  std::string werr;
  bool daemon_file_written = false;
  // `approvals` (the store the runtime resolved) lets `mcprt approve
  // --home/--profile` tell whether this daemon reads the store they name;
  // `instance` is what /healthz echoes, so a client knows it reached us.
  json record{{"url", url},
              {"pid", ::getpid()},
              {"instance", instance},
              {"workspace", opts.workspace.string()},
              {"approvals", fs::absolute(rt.options().approvals_file).lexically_normal().string()},
              {"token_file", token_path},
              {"caf", caf_url.empty() ? json(nullptr) : json(caf_url)}};
  daemon_file_written = state->write_atomically(daemon_path.filename().string(), record.dump(2) + "\n", werr);
  if (!daemon_file_written) spdlog::error("{}", werr);
  // The file first: whoever reads the line can use the file at once.
  std::cout << "listening on " << url << std::endl;
  spdlog::info("listening on {} (every request needs the bearer token in {})", url, escape_for_display(token_path));
  if (!caf_url.empty()) {
    std::cout << "listening on " << caf_url << std::endl;
    spdlog::info("listening on {} for remote hosts", caf_url);
  }

  // -- until a signal -----------------------------------------------------------------
  std::mutex mtx;
  std::condition_variable cv;
  bool stop_now = false;
  std::atomic<bool> exiting{false};
  std::atomic<bool> daemon_file_ours{daemon_file_written};
  std::thread waiter([&] {
    auto set = stop_signals();
    int stops = 0;
    for (;;) {
      int sig = 0;
      if (::sigwait(&set, &sig) != 0) continue;
      if (sig == SIGUSR1) {
        if (exiting) return;
        continue;
      }
      if (++stops > 1) {
        // The second signal: leave at once, without the file.
        if (daemon_file_ours) state->remove(daemon_path.filename().string());
        ::_exit(128 + sig);
      }
      spdlog::info("{}: stopping (a second signal forces)", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::lock_guard<std::mutex> guard{mtx};
      stop_now = true;
      cv.notify_all();
    }
  });
  {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait(lock, [&] { return stop_now; });
  }
  // Streams end, waiting requests get 503, then the runtime drains.
  api.stop();
  if (gw) {
    router->gw = nullptr;
    gw->stop();
  }
  // Parked requests are declined / refused, never left hanging; before the
  // server stops, so the tool calls waiting on them still get their answer.
  if (asks) asks->stop();
  server.stop(std::chrono::seconds(2));
  // Hosts' sessions close with the runtime; what the node runs for hosts
  // returns first, and nothing of it calls into the runtime after.
  if (node) node->stop();
  auto drained = rt.shutdown();
  spdlog::info("runtime stopped: {} connections drained, {} forced", drained.drained, drained.forced);
  state->remove(daemon_path.filename().string());
  daemon_file_ours = false;
  exiting = true;
  ::pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  return 0;
}

} // namespace mcprt::cli
