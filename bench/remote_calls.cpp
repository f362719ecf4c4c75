// remote_calls: the same tool call (echo of mcprt-test-server) to a server
// over stdio, over streamable HTTP answering with JSON and with SSE, all
// through one `mcprt serve`'s HTTP API (POST /workspace/mcp/tools/call):
// calls per second and p50/p99 for 1 and N clients, printed beside the
// stdio baseline of the same run. Then the latency of one quick call to an
// HTTP server while K other HTTP servers each run a slow call (a fresh
// daemon per K), beside the same quick call unloaded, and the daemon's
// threads while they run.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "bench.hpp"
#include "call_loop.hpp"
#include "child_process.hpp"

namespace mcprt::bench {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using remote_clock = std::chrono::steady_clock;

/// A kept-alive client of the daemon's HTTP API with the owner's token.
std::shared_ptr<httplib::Client> api_client(int port, const std::string& token, int read_timeout_s = 30) {
  auto client = std::make_shared<httplib::Client>("127.0.0.1", port);
  client->set_bearer_token_auth(token.c_str());
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  client->set_read_timeout(read_timeout_s, 0);
  return client;
}

std::string call_body(const std::string& server, const std::string& tool, const json& args) {
  return json{{"server", server}, {"tool", tool}, {"arguments", args}}.dump();
}

bool call_ok(const httplib::Result& res) {
  if (!res || res->status != 200) return false;
  auto body = json::parse(res->body, nullptr, false);
  return body.is_object() && !body.value("isError", false);
}

/// An HTTP test server on a port of its own: its URL, or "" when it did not
/// say where it listens.
std::string start_http_server(const std::string& server, const std::string& dir, const std::string& name,
                              bool sse, std::vector<child>& children) {
  std::vector<std::string> argv{server, "--http", "0"};
  if (sse) argv.push_back("--sse-responses");
  children.push_back(spawn(argv, dir + "/" + name + ".out", dir + "/" + name + ".err"));
  auto line = line_starting(dir + "/" + name + ".out", "listening on http://", 20);
  if (!line) return {};
  return line->substr(std::string("listening on ").size());
}

struct daemon_run {
  child proc;
  int port = 0;
  std::string token;
};

std::optional<daemon_run> start_calls_daemon(const std::string& mcprt, const std::string& tmp, const std::string& tag) {
  daemon_run d;
  d.proc = spawn({mcprt, "serve", "--workspace", tmp + "/ws", "--home", tmp + "/home", "--listen", "127.0.0.1:0",
                  "--max-calls-per-server", "1000"},
                 tmp + "/mcprt-" + tag + ".out", tmp + "/mcprt-" + tag + ".err");
  auto line = line_starting(tmp + "/mcprt-" + tag + ".out", "listening on http://", 20);
  d.port = line ? port_of(*line) : 0;
  if (!d.port) {
    stop(d.proc);
    return std::nullopt;
  }
  d.token = owner_token(tmp + "/home");
  use_token(d.port, d.token);
  return d;
}

struct loaded_result {
  int slow = 0;
  double quick_ms = -1; // -1: no answer within the timeout
  int threads = 0;
};

} // namespace

int remote_calls(const std::vector<std::string>& args) {
  double seconds = 3;
  int many = 64;
  int slow_ms = 5000;
  std::vector<int> loads{1, 16, 64};
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--seconds" && i + 1 < args.size()) seconds = std::stod(args[++i]);
    else if (args[i] == "--clients" && i + 1 < args.size()) many = std::stoi(args[++i]);
    else if (args[i] == "--slow-ms" && i + 1 < args.size()) slow_ms = std::stoi(args[++i]);
    else if (args[i] == "--slow" && i + 1 < args.size()) {
      loads.clear();
      std::stringstream in(args[++i]);
      for (std::string k; std::getline(in, k, ',');)
        loads.push_back(std::stoi(k));
    } else {
      std::cerr << "usage: mcprt-bench remote_calls [--seconds S] [--clients N] [--slow-ms MS] [--slow K,K,...]\n";
      return 2;
    }
  }
  int most = 0;
  for (int k : loads)
    most = std::max(most, k);
  auto dir = exe_dir();
  auto server = dir + "/mcprt-test-server";
  auto mcprt = dir + "/mcprt";
  auto tmp = (fs::temp_directory_path() / ("mcprt-bench-remotes-" + std::to_string(::getpid()))).string();
  fs::create_directories(tmp + "/ws");
  fs::create_directories(tmp + "/home/.mcprt");
  std::vector<child> children;
  auto cleanup = [&] {
    for (auto& c : children)
      stop(c);
    std::error_code ec;
    fs::remove_all(tmp, ec);
  };

  json servers{{"stdio", {{"command", server}, {"args", json::array()}}}};
  auto json_url = start_http_server(server, tmp, "json", false, children);
  auto sse_url = start_http_server(server, tmp, "sse", true, children);
  if (json_url.empty() || sse_url.empty()) {
    std::cerr << "remote_calls: an HTTP test server did not start (" << tmp << ")\n";
    cleanup();
    return 1;
  }
  servers["http-json"] = {{"httpUrl", json_url}};
  servers["http-sse"] = {{"httpUrl", sse_url}};
  for (int i = 0; i < most; ++i) {
    auto url = start_http_server(server, tmp, "slow" + std::to_string(i), false, children);
    if (url.empty()) {
      std::cerr << "remote_calls: slow server " << i << " did not start (" << tmp << ")\n";
      cleanup();
      return 1;
    }
    servers["slow" + std::to_string(i)] = {{"httpUrl", url}};
  }
  std::ofstream(tmp + "/home/.mcprt/settings.json") << json{{"mcpServers", servers}}.dump(2) << "\n";

  json echo_args{{"text", "ping"}};
  bool broke = false;
  std::vector<std::pair<std::string, std::vector<loop_result>>> rows;
  std::vector<loaded_result> loaded;
  double unloaded_quick_us = 0;

  // 1. One transport at a time, 1 and N clients.
  {
    auto d = start_calls_daemon(mcprt, tmp, "transports");
    if (!d) {
      std::cerr << "remote_calls: mcprt serve did not say where it listens (" << tmp << ")\n";
      cleanup();
      return 1;
    }
    for (const char* name : {"stdio", "http-json", "http-sse"}) {
      auto make = [&, name]() -> call_fn {
        auto client = api_client(d->port, d->token);
        auto body = call_body(name, "echo", echo_args);
        return [client, body] { return call_ok(client->Post("/workspace/mcp/tools/call", body, "application/json")); };
      };
      if (!warm_up(make())) {
        std::cerr << "remote_calls: echo never answered over " << name << "\n";
        broke = true;
        continue;
      }
      std::vector<loop_result> rs;
      rs.push_back(run_call_loop(make, 1, seconds));
      if (many > 1) rs.push_back(run_call_loop(make, many, seconds));
      rows.emplace_back(name, rs);
      if (std::string(name) == "http-json") unloaded_quick_us = rs.front().p50_us;
    }
    stop(d->proc);
  }

  // 2. A quick call while K slow calls run on K other HTTP servers.
  for (int k : loads) {
    auto d = start_calls_daemon(mcprt, tmp, "load" + std::to_string(k));
    if (!d) {
      broke = true;
      continue;
    }
    auto quick_client = api_client(d->port, d->token, 60);
    auto quick_body = call_body("http-json", "echo", echo_args);
    if (!warm_up([&] { return call_ok(quick_client->Post("/workspace/mcp/tools/call", quick_body, "application/json")); })) {
      broke = true;
      stop(d->proc);
      continue;
    }
    for (int i = 0; i < k; ++i)
      warm_up([&] {
        return call_ok(api_client(d->port, d->token)->Post(
          "/workspace/mcp/tools/call", call_body("slow" + std::to_string(i), "echo", echo_args), "application/json"));
      });
    std::vector<std::thread> slow;
    for (int i = 0; i < k; ++i)
      slow.emplace_back([&, i] {
        auto client = api_client(d->port, d->token, 600);
        client->Post("/workspace/mcp/tools/call", call_body("slow" + std::to_string(i), "sleep", {{"ms", slow_ms}}),
                     "application/json");
      });
    // The slow calls go out first: give them a tenth of their length.
    std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms / 10));
    loaded_result r;
    r.slow = k;
    r.threads = proc_threads(d->proc.pid);
    auto t0 = remote_clock::now();
    if (call_ok(quick_client->Post("/workspace/mcp/tools/call", quick_body, "application/json")))
      r.quick_ms = std::chrono::duration<double, std::milli>(remote_clock::now() - t0).count();
    loaded.push_back(r);
    for (auto& t : slow)
      t.join();
    stop(d->proc);
  }
  cleanup();

  std::cout << "remote_calls: tools/call echo through mcprt serve's HTTP API, " << seconds << " s per row\n";
  std::cout << std::left << std::setw(11) << "server" << std::right << std::setw(9) << "clients" << std::setw(12)
            << "calls/s" << std::setw(11) << "p50 us" << std::setw(11) << "p99 us" << std::setw(9) << "errors"
            << std::setw(16) << "p50 vs stdio" << "\n";
  double stdio_p50 = rows.empty() ? 0 : rows.front().second.front().p50_us;
  for (auto& [name, rs] : rows)
    for (auto& r : rs) {
      if (r.calls == 0) broke = true;
      std::cout << std::left << std::setw(11) << name << std::right << std::setw(9) << r.clients << std::setw(12)
                << std::fixed << std::setprecision(0) << r.rate() << std::setw(11) << r.p50_us << std::setw(11)
                << r.p99_us << std::setw(9) << r.errors;
      if (r.clients == 1 && stdio_p50 > 0)
        std::cout << std::setw(15) << std::setprecision(1) << r.p50_us / stdio_p50 << "x";
      std::cout << "\n";
    }
  std::cout << "target: HTTP p50 <= 2 x stdio p50 + 1 ms (stdio p50 " << std::setprecision(0) << stdio_p50
            << " us)\n";
  std::cout << "a quick call to http-json while K other HTTP servers each run a " << slow_ms
            << " ms call (unloaded p50 " << unloaded_quick_us << " us)\n"
            << std::setw(6) << "K" << std::setw(14) << "quick ms" << std::setw(10) << "threads" << "\n";
  for (auto& r : loaded) {
    std::cout << std::setw(6) << r.slow << std::setw(14) << std::setprecision(1);
    if (r.quick_ms < 0) std::cout << "no answer";
    else std::cout << r.quick_ms;
    std::cout << std::setw(10) << r.threads << "\n";
  }
  std::cout << "target: the quick call within 10 ms of its unloaded time, threads constant\n";
  json out{{"bench", "remote_calls"}, {"slow_ms", slow_ms}, {"unloaded_quick_us", unloaded_quick_us}};
  for (auto& [name, rs] : rows)
    for (auto& r : rs)
      out["rows"].push_back({{"server", name}, {"clients", r.clients}, {"calls_per_s", r.rate()},
                             {"p50_us", r.p50_us}, {"p99_us", r.p99_us}, {"errors", r.errors}});
  for (auto& r : loaded)
    out["loaded"].push_back({{"slow_calls", r.slow}, {"quick_ms", r.quick_ms}, {"threads", r.threads}});
  std::cout << out.dump() << "\n";
  return broke ? 1 : 0;
}

} // namespace mcprt::bench
