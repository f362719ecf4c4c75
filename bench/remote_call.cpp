// remote_call: tool-call round trips (echo of mcprt-test-server)
// from a C++ host through CAF's middleman to a `mcprt serve --caf-port`
// node (runtime::connect), against the same calls through that daemon's
// HTTP API (POST /workspace/mcp/tools/call, one kept-alive connection per
// client) and in-process (runtime::start in this process, its own echo
// child), in the same run: calls per second and p50/p99 latency for 1 and
// N concurrent clients.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <httplib.h>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include "mcprt/scheduler.hpp"
#include "bench.hpp"
#include "call_loop.hpp"
#include "child_process.hpp"
#include "mcprt/owner_tls.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt::bench {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// The host's actor system, over TLS with the owner's identity in `home`
/// (the node is started on the same home), as every CAF port requires.
struct host_config : caf::actor_system_config {
  explicit host_config(const std::string& home) {
    add_mcprt_types(*this);
    tls_error = use_owner_tls(*this, home);
    use_mcprt_scheduler(*this);
  }
  caf::error tls_error;
};

bool echo_ok(const caf::expected<json>& r) {
  return r && r->is_object() && !r->value("isError", false);
}

} // namespace

int remote_call(const std::vector<std::string>& args) {
  double seconds = 3;
  int many = 8;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--seconds" && i + 1 < args.size()) seconds = std::stod(args[++i]);
    else if (args[i] == "--clients" && i + 1 < args.size()) many = std::stoi(args[++i]);
    else {
      std::cerr << "usage: mcprt-bench remote_call [--seconds S] [--clients N]\n";
      return 2;
    }
  }
  std::vector<int> levels{1};
  if (many > 1) levels.push_back(many);
  auto dir = exe_dir();
  auto server = dir + "/mcprt-test-server";
  auto mcprt = dir + "/mcprt";
  auto tmp = (fs::temp_directory_path() / ("mcprt-bench-remote-" + std::to_string(::getpid()))).string();
  fs::create_directories(tmp + "/ws");
  fs::create_directories(tmp + "/home/.mcprt");
  std::ofstream(tmp + "/home/.mcprt/settings.json")
    << json{{"mcpServers", {{"echo", {{"command", server}, {"args", json::array()}}}}}}.dump(2) << "\n";
  json echo_args{{"text", "ping"}};
  bool broke = false;
  std::vector<std::pair<std::string, std::vector<loop_result>>> rows;

  host_config cfg(tmp + "/home");
  if (cfg.tls_error) {
    std::cerr << "remote_call: " << caf::to_string(cfg.tls_error) << "\n";
    return 1;
  }
  caf::actor_system sys{cfg};
  // One row per level, once a first call has answered (unmeasured).
  auto measure = [&](const std::string& path, const std::function<call_fn()>& make) {
    if (!warm_up(make())) {
      std::cerr << "remote_call: echo never answered (" << path << ")\n";
      broke = true;
      return;
    }
    std::vector<loop_result> rs;
    for (int n : levels)
      rs.push_back(run_call_loop(make, n, seconds));
    rows.emplace_back(path, rs);
  };

  // 1. In-process: an embedded runtime on the same settings.
  {
    runtime_options o;
    o.workspace = tmp + "/ws";
    o.home = tmp + "/home";
    o.max_calls_per_server = 0;
    auto rt = runtime::start(sys, o);
    if (!rt) {
      std::cerr << "remote_call: cannot start the runtime: " << sys.render(rt.error()) << "\n";
      return 1;
    }
    auto session = (*rt)->open_session();
    auto& r = **rt;
    measure("in-process", [&r, session, echo_args]() -> call_fn {
      return [&r, session, echo_args] { return echo_ok(r.call_tool(session, "echo", "echo", echo_args)); };
    });
    r.shutdown();
  }

  // 2 and 3: the daemon, over CAF's middleman and over HTTP.
  auto c = spawn({mcprt, "serve", "--workspace", tmp + "/ws", "--home", tmp + "/home", "--listen", "127.0.0.1:0",
                  "--caf-port", "0", "--max-calls-per-server", "1000"},
                 tmp + "/mcprt.out", tmp + "/mcprt.err");
  auto http_line = line_starting(tmp + "/mcprt.out", "listening on http://", 20);
  auto caf_line = line_starting(tmp + "/mcprt.out", "listening on caf+tls://", 5);
  int http_port = http_line ? port_of(*http_line) : 0;
  int caf_port = caf_line ? std::stoi(caf_line->substr(caf_line->rfind(':') + 1)) : 0;
  if (!http_port || !caf_port) {
    std::cerr << "remote_call: mcprt serve did not say where it listens (" << tmp << "/mcprt.err)\n";
    stop(c);
    return 1;
  }
  {
    auto rt = runtime::connect(sys, "127.0.0.1", static_cast<uint16_t>(caf_port));
    if (!rt) {
      std::cerr << "remote_call: connect: " << sys.render(rt.error()) << "\n";
      broke = true;
    } else {
      auto& r = **rt;
      auto session = r.open_session();
      measure("middleman", [&r, session, echo_args]() -> call_fn {
        return [&r, session, echo_args] { return echo_ok(r.call_tool(session, "echo", "echo", echo_args)); };
      });
      r.shutdown();
    }
  }
  {
    auto make = [http_port, echo_args, token = owner_token(tmp + "/home")]() -> call_fn {
      auto client = std::make_shared<httplib::Client>("127.0.0.1", http_port);
      client->set_bearer_token_auth(token.c_str());
      client->set_keep_alive(true);
      client->set_tcp_nodelay(true);
      client->set_read_timeout(30, 0);
      auto body = json{{"server", "echo"}, {"tool", "echo"}, {"arguments", echo_args}}.dump();
      return [client, body] {
        auto res = client->Post("/workspace/mcp/tools/call", body, "application/json");
        return res && res->status == 200;
      };
    };
    measure("http-api", make);
  }
  stop(c);
  std::error_code ec;
  fs::remove_all(tmp, ec);

  std::cout << "remote_call: tools/call echo of mcprt-test-server, " << seconds << " s per row\n";
  std::cout << std::left << std::setw(12) << "path" << std::right << std::setw(9) << "clients" << std::setw(12)
            << "calls/s" << std::setw(11) << "p50 us" << std::setw(11) << "p99 us" << std::setw(9) << "errors"
            << "\n";
  for (auto& [name, rs] : rows)
    for (auto& r : rs) {
      if (r.calls == 0) broke = true;
      std::cout << std::left << std::setw(12) << name << std::right << std::setw(9) << r.clients << std::setw(12)
                << std::fixed << std::setprecision(0) << r.rate() << std::setw(11) << r.p50_us << std::setw(11)
                << r.p99_us << std::setw(9) << r.errors << "\n";
    }
  json out = json::array();
  for (auto& [name, rs] : rows)
    for (auto& r : rs)
      out.push_back({{"path", name}, {"clients", r.clients}, {"calls_per_s", r.rate()}, {"p50_us", r.p50_us},
                     {"p99_us", r.p99_us}, {"errors", r.errors}});
  std::cout << json{{"bench", "remote_call"}, {"rows", out}}.dump() << "\n";
  return broke ? 1 : 0;
}

} // namespace mcprt::bench
