#pragma once

// The process table as /proc shows it, without the actor system: for the
// actor tests (through process_support.hpp) and the black-box CLI tests.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace mcprt::test {

struct proc_entry {
  pid_t pid;
  pid_t ppid;
  std::string comm;
  char state; // 'Z': it has ended and waits for its parent to reap it
};

inline std::vector<proc_entry> all_processes() {
  namespace fs = std::filesystem;
  std::vector<proc_entry> out;
  for (auto& entry : fs::directory_iterator("/proc")) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto open = line.find('(');
    auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    char state;
    int ppid;
    if (std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid) == 2)
      out.push_back({std::stoi(name), ppid, line.substr(open + 1, close - open - 1), state});
  }
  return out;
}

/// Field 22 of /proc/PID/stat (start time), with the state: a pid and its
/// start time name one process, even after the pid is reused.
inline std::optional<std::pair<char, unsigned long long>> state_and_start(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  char state = '?';
  unsigned long long start = 0;
  for (int n = 3; n <= 22 && rest >> field; ++n) {
    if (n == 3) state = field[0];
    if (n == 22) start = std::stoull(field);
  }
  return std::make_pair(state, start);
}

} // namespace mcprt::test
