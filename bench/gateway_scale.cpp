// gateway_scale: N downstream MCP sessions on the daemon's gateway, each
// with its GET /mcp stream open, then one settings edit that changes the
// tool list. Prints the daemon's threads and RSS before and after (the
// baseline: the same daemon with no session), how long opening the sessions
// took, a tools/call's latency with all of them open, and how long the edit's
// tools/list_changed took to reach every stream.
//
//   mcprt-bench gateway_scale [--sessions N]        (default 1000)

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.hpp"

#include <nlohmann/json.hpp>

#include "bench.hpp"

namespace mcprt::bench {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using nlohmann::json;

int connect_port(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// One request on a fresh connection (Connection: close); the whole answer.
std::string exchange(int port, const std::string& method, const std::string& path, const std::string& body,
                     const std::string& extra_headers = {}) {
  int fd = connect_port(port);
  if (fd < 0) return {};
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port)
                    + "\r\nConnection: close\r\nAccept: application/json, text/event-stream\r\n" + extra_headers;
  if (auto t = token_for(port); !t.empty()) req += "Authorization: Bearer " + t + "\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string header(const std::string& response, const std::string& name) {
  auto lower = response.substr(0, response.find("\r\n\r\n"));
  for (auto& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return {};
  auto start = at + name.size() + 3;
  auto end = response.find("\r\n", start);
  auto v = response.substr(start, end - start);
  while (!v.empty() && v.front() == ' ')
    v.erase(0, 1);
  return v;
}

struct proc_figures {
  int threads = 0;
  double rss_mb = 0;
};

proc_figures figures_of(pid_t pid) {
  proc_figures f;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) f.threads = std::stoi(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) f.rss_mb = std::stod(line.substr(6)) / 1024.0;
  }
  return f;
}

double elapsed_ms(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

} // namespace

int gateway_scale(const std::vector<std::string>& args) {
  int sessions = 1000;
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--sessions") sessions = std::atoi(args[i + 1].c_str());
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto dir = fs::temp_directory_path() / ("mcprt-gateway-scale-" + std::to_string(::getpid()));
  fs::create_directories(dir / "ws");
  fs::create_directories(dir / "home/.mcprt");
  auto settings = dir / "home/.mcprt/settings.json";
  auto server = exe_dir() + "/mcprt-test-server";
  auto write_settings = [&](bool two) {
    json servers{{"echo", {{"command", server}, {"args", {"--tools", "3"}}}}};
    if (two) servers["calc"] = {{"command", server}, {"args", {"--name-prefix", "calc_"}}};
    std::ofstream(settings) << json{{"mcpServers", servers}}.dump();
  };
  write_settings(false);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return 1;
  auto max_conn = std::to_string(sessions * 2 + 64);
  auto max_streams = std::to_string(sessions + 64); // every session's GET stream
  pid_t daemon = ::fork();
  if (daemon == 0) {
    ::dup2(out[1], 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 2);
    auto mcprt = exe_dir() + "/mcprt";
    auto ws = (dir / "ws").string(), home = (dir / "home").string();
    ::execl(mcprt.c_str(), mcprt.c_str(), "serve", "--workspace", ws.c_str(), "--home", home.c_str(), "--listen",
            "127.0.0.1:0", "--max-connections", max_conn.c_str(), "--max-streams", max_streams.c_str(), "--debounce-ms", "50", "--log-level", "warn",
            nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string first;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n')
    first += c;
  auto cleanup = [&] {
    ::kill(daemon, SIGTERM);
    int st = 0;
    ::waitpid(daemon, &st, 0);
    ::close(out[0]);
    fs::remove_all(dir);
  };
  if (first.rfind("listening on http://", 0) != 0) {
    std::cerr << "gateway_scale: the daemon did not start\n";
    cleanup();
    return 1;
  }
  int port = std::stoi(first.substr(first.rfind(':') + 1));
  use_token(port, owner_token((dir / "home").string()));
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (exchange(port, "GET", "/workspace/mcp", "").find("\"status\":\"connected\"") == std::string::npos) {
    if (clock_type::now() > deadline) {
      std::cerr << "gateway_scale: the test server did not connect\n";
      cleanup();
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto idle = figures_of(daemon);

  std::string init =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scale","version":"1"}}})";
  std::vector<int> streams;
  std::vector<std::string> ids;
  auto t_open = clock_type::now();
  for (int i = 0; i < sessions; ++i) {
    auto r = exchange(port, "POST", "/mcp", init);
    auto sid = header(r, "mcp-session-id");
    if (sid.empty()) {
      std::cerr << "gateway_scale: session " << i << " did not open: " << r.substr(0, 200) << "\n";
      break;
    }
    exchange(port, "POST", "/mcp", R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
             "Mcp-Session-Id: " + sid + "\r\n");
    int fd = connect_port(port);
    std::string get = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port)
                      + "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + sid + "\r\nAuthorization: Bearer "
                      + token_for(port) + "\r\n\r\n";
    ::send(fd, get.data(), get.size(), MSG_NOSIGNAL);
    streams.push_back(fd);
    ids.push_back(sid);
  }
  auto open_ms = elapsed_ms(t_open);
  // Drain the streams' heads so only news is read below.
  std::vector<std::string> seen(streams.size());
  auto drain = [&](std::chrono::milliseconds wait) {
    std::vector<pollfd> pfds;
    for (int fd : streams)
      pfds.push_back({fd, POLLIN, 0});
    ::poll(pfds.data(), pfds.size(), static_cast<int>(wait.count()));
    for (std::size_t i = 0; i < pfds.size(); ++i)
      if (pfds[i].revents & POLLIN) {
        char buf[4096];
        auto n = ::recv(pfds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) seen[i].append(buf, static_cast<std::size_t>(n));
      }
  };
  drain(std::chrono::milliseconds(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto loaded = figures_of(daemon);

  std::string call_ms = "n/a";
  if (!ids.empty()) {
    auto t = clock_type::now();
    auto r = exchange(port, "POST", "/mcp",
                      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"x"}}})",
                      "Mcp-Session-Id: " + ids.back() + "\r\n");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", elapsed_ms(t));
    call_ms = r.find("\"result\"") != std::string::npos ? buf : "failed";
  }

  for (auto& s : seen)
    s.clear();
  auto t_edit = clock_type::now();
  write_settings(true);
  std::size_t told = 0;
  double all_told_ms = -1;
  auto edit_deadline = clock_type::now() + std::chrono::seconds(60);
  std::vector<bool> got(streams.size(), false);
  while (told < streams.size() && clock_type::now() < edit_deadline) {
    drain(std::chrono::milliseconds(100));
    for (std::size_t i = 0; i < streams.size(); ++i)
      if (!got[i] && seen[i].find("tools/list_changed") != std::string::npos) {
        got[i] = true;
        ++told;
      }
  }
  if (told == streams.size()) all_told_ms = elapsed_ms(t_edit);

  std::printf("gateway_scale: %zu sessions, each with its GET /mcp stream open\n", streams.size());
  std::printf("  %-34s %10s %10s\n", "", "threads", "RSS MiB");
  std::printf("  %-34s %10d %10.1f\n", "daemon, no session (baseline)", idle.threads, idle.rss_mb);
  std::printf("  %-34s %10d %10.1f\n", "daemon, all sessions open", loaded.threads, loaded.rss_mb);
  std::printf("  opening the sessions: %.0f ms (%.2f ms each, one client)\n", open_ms,
              streams.empty() ? 0.0 : open_ms / static_cast<double>(streams.size()));
  std::printf("  tools/call with all open: %s ms\n", call_ms.c_str());
  std::printf("  settings edit -> tools/list_changed on every stream: %s (%zu of %zu told; debounce 50 ms)\n",
              all_told_ms < 0 ? "not all told" : (std::to_string(static_cast<int>(all_told_ms)) + " ms").c_str(),
              told, streams.size());
  for (int fd : streams)
    ::close(fd);
  cleanup();
  return told == streams.size() && !streams.empty() && static_cast<int>(streams.size()) == sessions ? 0 : 1;
}

} // namespace mcprt::bench
