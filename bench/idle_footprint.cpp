// idle_footprint: `mcprt serve` on an empty workspace, at rest once it
// answers GET /workspace/mcp: its resident memory (anonymous and file-backed,
// from /proc/PID/status), its threads and what they are called, and what
// each mapping holds resident (/proc/PID/smaps). Two baselines in the same
// run: mcprt-stack-floor (the shared libraries mcprt links, loaded, and a
// CAF actor system; none of mcprt's code), and mcp-hub idle with no servers
// (tests/peers). Issue 20's target: at most 8 MB RSS and 12 threads.

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "child_process.hpp"

namespace mcprt::bench {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct footprint {
  double rss_mb = 0, anon_mb = 0, file_mb = 0;
  // The proportional set size: shared library pages count by the share of
  // the processes mapping them, so it is what this process adds to a
  // machine that runs other programs on the same libraries.
  double pss_mb = 0;
  int threads = 0;
  std::map<std::string, int> thread_names; // comm -> how many
  std::map<std::string, double> by_mapping; // file name (or "[anon]") -> resident MB

  bool same_as(const footprint& o) const {
    return threads == o.threads && std::abs(rss_mb - o.rss_mb) < 0.0625; // 64 KiB
  }
};

double status_mb(const std::string& status, const std::string& key) {
  auto p = status.find("\n" + key + ":");
  if (p == std::string::npos) return 0;
  return std::atof(status.c_str() + p + key.size() + 2) / 1024.0;
}

std::optional<footprint> read_footprint(pid_t pid) {
  auto dir = "/proc/" + std::to_string(pid);
  std::ifstream in(dir + "/status");
  if (!in) return std::nullopt;
  std::string status = "\n" + std::string((std::istreambuf_iterator<char>(in)), {});
  footprint f;
  f.rss_mb = status_mb(status, "VmRSS");
  f.anon_mb = status_mb(status, "RssAnon");
  f.file_mb = status_mb(status, "RssFile");
  std::ifstream rollup(dir + "/smaps_rollup");
  std::string rolled = "\n" + std::string((std::istreambuf_iterator<char>(rollup)), {});
  f.pss_mb = status_mb(rolled, "Pss");
  std::ifstream smaps(dir + "/smaps");
  std::string line, mapping;
  while (std::getline(smaps, line)) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos) {
      // "start-end perms offset dev inode [path]": the path is the sixth field.
      std::istringstream fields(line);
      std::string skip, path;
      for (int i = 0; i < 5; ++i) fields >> skip;
      fields >> path;
      mapping = path.empty() || path[0] == '[' ? "[anon]" : fs::path(path).filename().string();
    } else if (line.rfind("Rss:", 0) == 0) {
      f.by_mapping[mapping] += std::atof(line.c_str() + 4) / 1024.0;
    }
  }
  std::error_code ec;
  for (auto& t : fs::directory_iterator(dir + "/task", ec)) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    ++f.thread_names[name];
    ++f.threads;
  }
  return f;
}

/// The footprint once two samples 100 ms apart agree (at most 5 s): the
/// daemon's start-up work (the first reload, the listener) is over.
std::optional<footprint> at_rest(pid_t pid) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto last = read_footprint(pid);
  while (last && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto now = read_footprint(pid);
    if (!now) return std::nullopt;
    if (now->same_as(*last)) return now;
    last = now;
  }
  return last;
}

std::string names_of(const footprint& f) {
  std::string out;
  for (auto& [name, n] : f.thread_names)
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  return out;
}

json to_json(const footprint& f) {
  return {{"rss_mb", f.rss_mb},   {"pss_mb", f.pss_mb},             {"anon_mb", f.anon_mb}, {"file_mb", f.file_mb},
          {"threads", f.threads}, {"thread_names", f.thread_names}, {"by_mapping_mb", f.by_mapping}};
}

/// The shared objects a footprint maps ("lib*.so*").
std::set<std::string> libraries_of(const footprint& f) {
  std::set<std::string> out;
  for (auto& [name, mb] : f.by_mapping)
    if (name.find(".so") != std::string::npos) out.insert(name);
  return out;
}

/// The mappings that hold the most of mcprt, beside the floor's figure for
/// the same file.
void print_mappings(const footprint& m, const footprint* floor) {
  std::vector<std::pair<double, std::string>> top;
  for (auto& [name, mb] : m.by_mapping)
    top.emplace_back(mb, name);
  std::sort(top.rbegin(), top.rend());
  std::cout << "resident by mapping, MB   mcprt" << (floor ? "   floor" : "") << "\n";
  double rest = 0, rest_floor = 0;
  for (std::size_t i = 0; i < top.size(); ++i) {
    auto& [mb, name] = top[i];
    double fl = 0;
    if (floor) {
      auto it = floor->by_mapping.find(name);
      fl = it == floor->by_mapping.end() ? 0 : it->second;
    }
    if (i >= 14) {
      rest += mb;
      rest_floor += fl;
      continue;
    }
    std::cout << "  " << std::left << std::setw(24) << name.substr(0, 24) << std::right << std::fixed
              << std::setprecision(2) << std::setw(6) << mb;
    if (floor) std::cout << std::setw(8) << fl;
    std::cout << "\n";
  }
  std::cout << "  " << std::left << std::setw(24) << "(the rest)" << std::right << std::setw(6) << rest;
  if (floor) std::cout << std::setw(8) << rest_floor;
  std::cout << "\n";
}

void print_footprint_row(const std::string& name, const footprint& f) {
  std::cout << std::left << std::setw(9) << name << std::right << std::fixed << std::setprecision(1) << std::setw(8)
            << f.rss_mb << std::setw(9) << f.pss_mb << std::setw(9) << f.anon_mb << std::setw(9) << f.file_mb
            << std::setw(9) << f.threads << "\n";
}

} // namespace

int idle_footprint(const std::vector<std::string>& args) {
  std::string mcprt = exe_dir() + "/mcprt";
  std::string floor_exe = exe_dir() + "/mcprt-stack-floor";
  std::string hub = std::string(MCPRT_SOURCE_DIR) + "/tests/peers/node_modules/mcp-hub/dist/cli.js";
  bool want_hub = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--mcprt" && i + 1 < args.size()) mcprt = args[++i];
    else if (args[i] == "--floor" && i + 1 < args.size()) floor_exe = args[++i];
    else if (args[i] == "--mcp-hub" && i + 1 < args.size()) hub = args[++i];
    else if (args[i] == "--no-mcp-hub") want_hub = false;
    else {
      std::cerr << "usage: mcprt-bench idle_footprint [--mcprt PATH] [--floor PATH] [--mcp-hub PATH/TO/dist/cli.js] [--no-mcp-hub]\n";
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  char tmpl[] = "/tmp/mcprt-idlebench-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::cerr << "idle_footprint: mkdtemp failed\n";
    return 1;
  }
  std::string tmp = tmpl;
  bool broke = false;
  std::map<std::string, footprint> rows;
  auto any_json = [](const json&) { return true; };

  {
    fs::create_directories(tmp + "/ws");
    fs::create_directories(tmp + "/home/.mcprt");
    auto c = spawn({mcprt, "serve", "--workspace", tmp + "/ws", "--home", tmp + "/home", "--listen", "127.0.0.1:0"},
                   tmp + "/mcprt.out", tmp + "/mcprt.err");
    auto line = first_line(c, 20);
    int port = line ? port_of(*line) : 0;
    if (port) use_token(port, owner_token(tmp + "/home"));
    std::optional<footprint> f;
    if (port && wait_http(port, "/workspace/mcp", any_json, 20)) f = at_rest(c.pid);
    if (f) rows["mcprt"] = *f;
    else {
      std::cerr << "idle_footprint: mcprt serve did not come up (" << tmp << "/mcprt.err)\n";
      broke = true;
    }
    stop(c);
  }

  {
    auto c = spawn({floor_exe}, tmp + "/floor.out", tmp + "/floor.err");
    auto line = first_line(c, 20);
    std::optional<footprint> f;
    if (line && line->rfind("ready", 0) == 0) f = at_rest(c.pid);
    if (f) rows["floor"] = *f;
    else {
      std::cerr << "idle_footprint: " << floor_exe << " did not come up (" << tmp << "/floor.err)\n";
      broke = true;
    }
    stop(c);
  }

  if (!want_hub) {
    std::cout << "mcp-hub: skipped (--no-mcp-hub)\n";
  } else if (!fs::exists(hub) || std::system("node --version >/dev/null 2>&1") != 0) {
    std::cout << "mcp-hub: skipped, not installed (" << hub << " or node missing)\n";
  } else {
    std::ofstream(tmp + "/hub.json") << json{{"mcpServers", json::object()}}.dump(2) << "\n";
    fs::create_directories(tmp + "/hubhome");
    int port = free_port();
    auto c = spawn({"node", hub, "--port", std::to_string(port), "--config", tmp + "/hub.json"}, tmp + "/hub.out",
                   tmp + "/hub.err", {{"HOME", tmp + "/hubhome"}, {"XDG_STATE_HOME", tmp + "/hubhome/state"}});
    std::optional<footprint> f;
    if (wait_http(port, "/api/health", any_json, 30)) f = at_rest(c.pid);
    if (f) rows["mcp-hub"] = *f;
    else {
      std::cerr << "idle_footprint: mcp-hub did not come up (" << tmp << "/hub.err)\n";
      broke = true;
    }
    stop(c);
  }

  std::cout << "idle_footprint: an idle daemon with no servers, at rest after start-up\n"
            << "process   rss_mb   pss_mb  anon_mb  file_mb  threads\n";
  json out{{"bench", "idle_footprint"}};
  for (const char* name : {"mcprt", "floor", "mcp-hub"}) {
    if (!rows.count(name)) continue;
    print_footprint_row(name, rows[name]);
    out[name] = to_json(rows[name]);
  }
  if (rows.count("mcprt")) {
    auto& m = rows["mcprt"];
    std::cout << "(floor: mcprt-stack-floor, the shared libraries mcprt links and a CAF actor system, no mcprt code)\n"
              << "mcprt threads: " << names_of(m) << "\n";
    const footprint* fl = rows.count("floor") ? &rows["floor"] : nullptr;
    print_mappings(m, fl);
    if (fl) {
      // A library the floor lacks would make the daemon's excess look
      // larger than it is: the floor's link list must follow mcprt's.
      std::string beyond;
      auto floor_libs = libraries_of(*fl);
      for (auto& lib : libraries_of(m))
        if (!floor_libs.count(lib)) beyond += " " + lib;
      if (!beyond.empty()) {
        std::cerr << "idle_footprint: mcprt-stack-floor lacks libraries mcprt maps; add them to its link list in "
                     "bench/CMakeLists.txt:"
                  << beyond << "\n";
        broke = true;
      }
      std::cout << "shared libraries mcprt maps that the floor does not:" << (beyond.empty() ? " none" : beyond)
                << "\n"
                << std::setprecision(1) << "mcprt above the floor: " << m.rss_mb - fl->rss_mb << " MB RSS ("
                << m.anon_mb - fl->anon_mb << " anonymous, " << m.file_mb - fl->file_mb << " file-backed)\n";
      out["above_floor_mb"] = m.rss_mb - fl->rss_mb;
      out["libraries_beyond_floor"] = beyond;
    }
    bool rss_ok = m.rss_mb <= 8, threads_ok = m.threads <= 12;
    std::cout << "target (issue 20: idle mcprt serve <= 8 MB RSS, <= 12 threads): rss " << std::setprecision(1)
              << m.rss_mb << " MB " << (rss_ok ? "ok" : "MISS");
    if (fl) std::cout << " (the floor alone: " << fl->rss_mb << " MB)";
    std::cout << ", threads " << m.threads << " " << (threads_ok ? "ok" : "MISS") << "\n";
    out["target"] = rss_ok && threads_ok ? "PASS" : "FAIL";
  }
  std::cout << out.dump() << "\n";
  if (broke) {
    std::cerr << "idle_footprint: logs kept in " << tmp << "\n";
    return 1;
  }
  fs::remove_all(tmp);
  return 0;
}

} // namespace mcprt::bench
