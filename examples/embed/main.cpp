// A host embedding mcprt: it brings its own actor system, starts the runtime
// on a workspace, opens one session, prints every event as it arrives and,
// optionally, calls one tool once the server is connected. With --connect it
// does the same against the workspace of a remote node (`mcprt serve
// --caf-port`): only the lines that get the runtime differ. A node's CAF
// port admits only its owner: `use_owner_tls` loads the owner's identity
// from <home>/.mcprt/caf/ (--home, else $HOME), as `mcprt serve` does.
//
//   mcprt-embed-example (--workspace DIR | --connect HOST:PORT) [--home DIR]
//                       [--wait-connected N] [--call SERVER TOOL JSON] [--run-ms MS]
//
// Exit status: 0 on success, 1 when the servers did not connect in time or
// the call failed, 2 on bad arguments.

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include <caf/all.hpp>

#include "mcprt/owner_tls.hpp"
#include "mcprt/runtime.hpp"

namespace {

/// Writes one whole line: events arrive on an actor thread while main()
/// prints too, and std::cout keeps no line together by itself.
void say(const std::string& line) {
  static std::mutex mtx;
  std::lock_guard<std::mutex> guard{mtx};
  std::cout << line << std::endl;
}

/// What the printing subscriber shares with main(): a wake-up at every
/// connection's change.
struct seen {
  std::mutex mtx;
  std::condition_variable cv;
  uint64_t updates = 0;
};

mcprt::event_subscriber_actor::behavior_type printer(mcprt::event_subscriber_actor::pointer,
                                                     std::shared_ptr<seen> s) {
  return {
    [s](mcprt::event& ev) {
      say("event " + std::to_string(ev.seq) + ' ' + to_string(ev.kind) + ' ' + ev.data.value.dump());
      if (ev.kind != mcprt::event_kind::client_update) return;
      std::lock_guard<std::mutex> guard{s->mtx};
      ++s->updates;
      s->cv.notify_all();
    },
  };
}

int usage() {
  std::cerr << "usage: mcprt-embed-example (--workspace DIR | --connect HOST:PORT) [--home DIR]"
               " [--wait-connected N] [--call SERVER TOOL JSON] [--run-ms MS]\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  mcprt::runtime_options opts;
  std::size_t wait_connected = 0;
  std::string call_server, call_tool, call_args = "{}";
  long run_ms = 0;
  std::string connect_to;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--workspace") opts.workspace = next();
    else if (a == "--home") opts.home = next();
    else if (a == "--connect") connect_to = next();
    else if (a == "--wait-connected") wait_connected = std::stoul(next());
    else if (a == "--run-ms") run_ms = std::stol(next());
    else if (a == "--call") {
      call_server = next();
      call_tool = next();
      call_args = next();
    } else return usage();
  }
  if (opts.workspace.empty() == connect_to.empty()) return usage();
  auto colon = connect_to.rfind(':');
  if (!connect_to.empty() && (colon == std::string::npos || colon + 1 == connect_to.size())) return usage();
  for (auto& problem : mcprt::apply_environment(opts))
    std::cerr << "warning: " << problem << "\n";

  mcprt::tune_allocator_for_messages(); // process-wide: the host's call
  caf::actor_system_config cfg;
  mcprt::add_mcprt_types(cfg);
  mcprt::use_mcprt_scheduler(cfg); // fair scheduling, one worker per core
  if (!connect_to.empty()) {
    if (auto err = mcprt::use_owner_tls(cfg, opts.home)) {
      std::cerr << "cannot start: " << caf::to_string(err) << "\n";
      return 1;
    }
  }
  caf::actor_system sys{cfg};

  auto rt = connect_to.empty()
              ? mcprt::runtime::start(sys, opts)
              : mcprt::runtime::connect(sys, connect_to.substr(0, colon),
                                        static_cast<uint16_t>(std::stoul(connect_to.substr(colon + 1))));
  if (!rt) {
    std::cerr << "cannot start: " << sys.render(rt.error()) << "\n";
    return 1;
  }
  auto& runtime = **rt;
  auto s = std::make_shared<seen>();
  auto sink = sys.spawn(printer, s);
  runtime.subscribe(sink);
  auto session = runtime.open_session();
  std::string opened = "session " + session + " capabilities";
  for (auto& c : runtime.capabilities())
    opened += ' ' + c;
  say(opened);

  // The session's own view: a server another session (the daemon's, on a
  // remote node) connected already brings no client_update to wait for.
  auto connected = [&] {
    std::size_t n = 0;
    if (auto st = runtime.session_state(session))
      for (auto& srv : st->servers)
        n += srv.status == mcprt::connection_status::connected ? 1 : 0;
    return n;
  };
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (connected() < wait_connected) {
    std::unique_lock<std::mutex> lock{s->mtx};
    auto seen_updates = s->updates;
    // Woken by the next client_update; re-checked at least every 100 ms.
    s->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return s->updates != seen_updates; });
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "only " << connected() << " of " << wait_connected << " servers connected\n";
      status = 1;
      break;
    }
  }
  if (status == 0 && !call_server.empty()) {
    auto args = nlohmann::json::parse(call_args, nullptr, false);
    auto r = runtime.call_tool(session, call_server, call_tool, args);
    if (r) say("result " + r->dump());
    else {
      say("call failed: " + sys.render(r.error()));
      status = 1;
    }
  }
  if (run_ms > 0) {
    std::unique_lock<std::mutex> lock{s->mtx};
    s->cv.wait_for(lock, std::chrono::milliseconds(run_ms), [] { return false; });
  }
  say("snapshot " + runtime.snapshot().dump());
  auto drained = runtime.shutdown();
  say("shutdown drained " + std::to_string(drained.drained) + " forced " + std::to_string(drained.forced));
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  return status;
}
