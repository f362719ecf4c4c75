// soak: a live `mcprt serve` under a long mix of what people and servers
// do — settings saves (real edits, formatting-only saves, broken saves that
// a good one fixes), server crashes (SIGKILL of a server process), approvals
// and rejections of a project server, and tool calls — while an event stream
// stays open. The daemon's RSS, open descriptors and threads are read from
// /proc after warm-up and at the end, each time once the daemon has settled;
// descriptors and threads must be equal and RSS within a small margin. After
// SIGTERM no process started under the daemon may be left (every process
// carries a tag in its environment; /proc is scanned for it).
// Not in CI (it runs for minutes): `mcprt-bench soak [--saves N]`.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench.hpp"

extern char** environ;

namespace mcprt::bench {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using clock_type = std::chrono::steady_clock;

struct soak_options {
  int saves = 1000;
  int warmup = 100;
  int servers = 4;
  int debounce_ms = 20;
  bool keep = false; // keep the temp directory
};

struct process_figures {
  long rss_kb = 0;
  int fds = 0;
  int threads = 0;
};

long status_field(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  auto len = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, len, key) == 0) return std::stol(line.substr(len));
  return -1;
}

process_figures soak_figures_of(pid_t pid) {
  process_figures f;
  f.rss_kb = status_field(pid, "VmRSS:");
  f.threads = static_cast<int>(status_field(pid, "Threads:"));
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    ++f.fds;
  return f;
}

/// Processes whose environment carries `tag`, other than `except`.
std::vector<pid_t> tagged_processes(const std::string& tag, pid_t except) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (pid == except || pid == ::getpid()) continue;
    std::ifstream in(it->path() / "environ", std::ios::binary);
    std::string env;
    try {
      env.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
      continue; // the process ended while it was read (ESRCH)
    }
    if (env.find(tag) != std::string::npos) out.push_back(pid);
  }
  return out;
}

void save_atomically(const fs::path& p, const std::string& text) {
  auto tmp = p.parent_path() / (".soak." + p.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, p);
}

struct daemon_process {
  pid_t pid = -1;
  std::string url;
};

daemon_process start_daemon(const fs::path& mcprt, const fs::path& ws, const fs::path& home, const std::string& tag,
                            int debounce_ms) {
  std::vector<std::string> args = {mcprt.string(), "serve",     "--workspace", ws.string(),
                                   "--home",       home.string(), "--listen",  "127.0.0.1:0",
                                   "--debounce-ms", std::to_string(debounce_ms), "--log-level", "error"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; e && *e; ++e)
    env_s.emplace_back(*e);
  env_s.push_back(tag);
  std::vector<char*> envp;
  for (auto& e : env_s)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  daemon_process d;
  d.pid = ::fork();
  if (d.pid < 0) throw std::runtime_error("fork failed");
  if (d.pid == 0) {
    ::dup2(out[1], 1);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  // The first line is "listening on URL".
  std::string line;
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  char c;
  while (clock_type::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    if (::read(out[0], &c, 1) != 1) break;
    if (c == '\n') break;
    line += c;
  }
  ::close(out[0]);
  const std::string prefix = "listening on ";
  if (line.rfind(prefix, 0) != 0) throw std::runtime_error("the daemon did not start: '" + line + "'");
  d.url = line.substr(prefix.size());
  return d;
}

json soak_server_spec(const std::string& bin, int tools) {
  return {{"command", bin}, {"args", {"--tools", std::to_string(tools)}}};
}

json user_settings(const std::string& bin, const std::vector<int>& tools) {
  json servers = json::object();
  for (std::size_t i = 0; i < tools.size(); ++i)
    servers["s" + std::to_string(i + 1)] = soak_server_spec(bin, tools[i]);
  return {{"mcpServers", servers}};
}

/// Waits until the snapshot shows every admitted server connected and no
/// reconcile running, and the figures stop moving.
bool settle(httplib::Client& cli, pid_t daemon, std::size_t servers, process_figures& out) {
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  process_figures last{-1, -1, -1};
  int stable = 0;
  while (clock_type::now() < deadline) {
    auto r = cli.Get("/workspace/mcp");
    bool idle = false;
    if (r && r->status == 200) {
      auto j = json::parse(r->body, nullptr, false);
      std::size_t connected = 0;
      if (j.is_object())
        for (auto& s : j.value("servers", json::array()))
          if (s.value("status", "") == "connected") ++connected;
      bool reconciling = j.is_object() && j.contains("reconcile") && j["reconcile"].value("in_progress", false);
      idle = connected >= servers && !reconciling;
    }
    auto f = soak_figures_of(daemon);
    if (idle && f.fds == last.fds && f.threads == last.threads) {
      if (++stable >= 5) {
        out = f;
        return true;
      }
    } else {
      stable = 0;
    }
    last = f;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  out = last;
  return false;
}

} // namespace

int soak(const std::vector<std::string>& args) {
  soak_options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto next = [&] { return i + 1 < args.size() ? args[++i] : std::string("0"); };
    if (args[i] == "--saves") o.saves = std::stoi(next());
    else if (args[i] == "--warmup") o.warmup = std::stoi(next());
    else if (args[i] == "--servers") o.servers = std::stoi(next());
    else if (args[i] == "--debounce-ms") o.debounce_ms = std::stoi(next());
    else if (args[i] == "--keep") o.keep = true;
    else {
      std::cerr << "usage: mcprt-bench soak [--saves N] [--warmup N] [--servers N] [--debounce-ms D] [--keep]\n";
      return 2;
    }
  }
  fs::path bin = exe_dir();
  auto test_server = (bin / "mcprt-test-server").string();
  char templ[] = "/tmp/mcprt-soak-XXXXXX";
  if (!::mkdtemp(templ)) return 1;
  fs::path root = templ, home = root / "home", ws = root / "ws";
  fs::create_directories(home / ".mcprt");
  fs::create_directories(ws);
  std::mt19937 rng(12345);
  std::vector<int> tools(static_cast<std::size_t>(o.servers), 3);
  save_atomically(home / ".mcprt" / "settings.json", user_settings(test_server, tools).dump(2));
  save_atomically(ws / ".mcp.json", json{{"mcpServers", {{"proj", soak_server_spec(test_server, 2)}}}}.dump(2));
  std::string tag = "MCPRT_SOAK_TAG=" + std::to_string(::getpid()) + "-" + std::to_string(rng());

  std::cout << "soak: " << o.saves << " settings saves, " << o.servers << " servers + 1 project server, debounce "
            << o.debounce_ms << " ms, warm-up " << o.warmup << " saves\n";
  auto d = start_daemon(bin / "mcprt", ws, home, tag, o.debounce_ms);
  httplib::Client cli(d.url);
  cli.set_read_timeout(30, 0);
  httplib::Client stream_cli(d.url);
  stream_cli.set_read_timeout(60, 0);
  // The owner's token, which the daemon made under --home.
  std::string token;
  std::getline(std::ifstream(home / ".mcprt" / "token"), token);
  cli.set_bearer_token_auth(token.c_str());
  stream_cli.set_bearer_token_auth(token.c_str());

  // An event stream open for the whole run, counting frames.
  std::atomic<long> frames{0};
  std::atomic<bool> stop_stream{false};
  std::thread stream([&] {
    stream_cli.Get("/workspace/mcp/events", [&](const char* data, size_t len) {
      frames += static_cast<long>(std::count(data, data + len, '\n'));
      return !stop_stream.load();
    });
  });

  long calls_ok = 0, calls_failed = 0, crashes = 0, decisions = 0, broken_saves = 0;
  auto post = [&](const std::string& path, const json& body) {
    return cli.Post(path.c_str(), body.dump(), "application/json");
  };
  auto step = [&](int i) {
    auto pick = static_cast<std::size_t>(rng() % tools.size());
    int kind = static_cast<int>(rng() % 10);
    if (kind == 0) {
      // Formatting only: nothing may restart.
      save_atomically(home / ".mcprt" / "settings.json", user_settings(test_server, tools).dump(4));
    } else if (kind == 1) {
      // A broken save, then the good one.
      save_atomically(home / ".mcprt" / "settings.json", "{\"mcpServers\": {\"s1\": ");
      ++broken_saves;
      std::this_thread::sleep_for(std::chrono::milliseconds(o.debounce_ms * 2));
      save_atomically(home / ".mcprt" / "settings.json", user_settings(test_server, tools).dump(2));
    } else {
      tools[pick] = tools[pick] == 3 ? 4 : 3;
      save_atomically(home / ".mcprt" / "settings.json", user_settings(test_server, tools).dump(2));
    }
    auto server = "s" + std::to_string(rng() % tools.size() + 1);
    auto r = post("/workspace/mcp/tools/call", {{"server", server}, {"tool", "echo"}, {"arguments", {{"text", "hi"}}}});
    (r && r->status == 200 ? calls_ok : calls_failed)++;
    if (i % 10 == 5) {
      // A crash: the server tells its pid, and dies of SIGKILL.
      auto p = post("/workspace/mcp/tools/call", {{"server", server}, {"tool", "pid"}, {"arguments", json::object()}});
      if (p && p->status == 200) {
        auto j = json::parse(p->body, nullptr, false);
        std::string text;
        if (j.is_object() && j.contains("content") && !j["content"].empty())
          text = j["content"][0].value("text", "");
        if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
          ::kill(std::stoi(text), SIGKILL);
          ++crashes;
        }
      }
    }
    if (i % 20 == 10) {
      post(std::string("/workspace/mcp/proj/") + ((i / 20) % 2 == 0 ? "approve" : "reject"), json::object());
      ++decisions;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.debounce_ms + 5));
  };

  auto t0 = clock_type::now();
  for (int i = 0; i < o.warmup; ++i)
    step(i);
  // The project server ends the warm-up approved, as it ends the run.
  post("/workspace/mcp/proj/approve", json::object());
  process_figures warm, end;
  auto expected_servers = tools.size() + 1;
  bool warm_settled = settle(cli, d.pid, expected_servers, warm);
  auto live_warm = tagged_processes(tag, d.pid);
  for (int i = o.warmup; i < o.saves; ++i)
    step(i);
  post("/workspace/mcp/proj/approve", json::object());
  bool end_settled = settle(cli, d.pid, expected_servers, end);
  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto live = tagged_processes(tag, d.pid);

  stop_stream = true;
  ::kill(d.pid, SIGTERM);
  int status = 0;
  auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (::waitpid(d.pid, &status, WNOHANG) == 0 && clock_type::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stream.join();
  std::vector<pid_t> left;
  for (auto until = clock_type::now() + std::chrono::seconds(5); clock_type::now() < until;) {
    left = tagged_processes(tag, -1);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  auto rss_margin_kb = std::max(4096L, warm.rss_kb / 20); // 4 MiB or 5%
  bool fds_equal = warm.fds == end.fds, threads_equal = warm.threads == end.threads;
  bool rss_ok = end.rss_kb - warm.rss_kb <= rss_margin_kb;
  std::cout << std::fixed << std::setprecision(1) << "ran " << o.saves << " saves in " << secs << " s: "
            << calls_ok << " tool calls answered, " << calls_failed << " failed (servers restarting), " << crashes
            << " servers killed, " << decisions << " approvals/rejections, " << broken_saves
            << " broken saves, " << frames.load() << " event-stream lines\n"
            << "                 after warm-up   at the end\n"
            << "  RSS (KiB)      " << std::setw(13) << warm.rss_kb << std::setw(13) << end.rss_kb
            << (rss_ok ? "   ok" : "   GREW") << " (margin " << rss_margin_kb << " KiB)\n"
            << "  descriptors    " << std::setw(13) << warm.fds << std::setw(13) << end.fds
            << (fds_equal ? "   ok" : "   DIFFER") << "\n"
            << "  threads        " << std::setw(13) << warm.threads << std::setw(13) << end.threads
            << (threads_equal ? "   ok" : "   DIFFER") << "\n"
            << "  processes under the daemon   " << std::setw(4) << live_warm.size() << std::setw(13) << live.size()
            << (live.size() == live_warm.size() ? "   ok" : "   DIFFER") << " (" << expected_servers << " servers)\n"
            << "  daemon exit: " << (WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status)) : "signal")
            << ", processes left after it: " << left.size() << "\n";
  if (!warm_settled || !end_settled) std::cout << "  the daemon did not settle (servers not all connected)\n";
  if (!o.keep) {
    std::error_code ec;
    fs::remove_all(root, ec);
  } else {
    std::cout << "  kept " << root.string() << "\n";
  }
  bool ok = warm_settled && end_settled && fds_equal && threads_equal && rss_ok && left.empty()
            && live.size() == live_warm.size() && live.size() >= expected_servers && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::cout << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}

} // namespace mcprt::bench
