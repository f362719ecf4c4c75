#pragma once

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/server_config.hpp"

namespace mcprt::test {

/// A server config from a JSON literal; fails the test on a parse error.
inline server_config make_server(const std::string& name, const nlohmann::json& spec,
                                 config_scope scope = config_scope::user) {
  auto r = parse_server_config(name, spec, scope, {"mcpServers", name});
  if (!r.config) throw std::runtime_error("bad test config: " + r.error->message);
  return *r.config;
}

inline server_map make_map(const nlohmann::json& servers, config_scope scope = config_scope::user) {
  server_map out;
  for (auto& [name, spec] : servers.items())
    out.emplace(name, make_server(name, spec, scope));
  return out;
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// The permission bits of `p` (0 when it cannot be read).
inline mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

/// The files in `dir` whose names start with `prefix` (a store's backups).
inline std::vector<std::filesystem::path> files_starting_with(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::filesystem::path> out;
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

/// The lines of `xs`, each ended by a newline.
inline std::string joined(const std::vector<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += x + "\n";
  return out;
}

/// Runs `work(child)` in `children` forked processes that start together
/// (a pipe releases them at once, so their writes overlap); true when every
/// one returned without throwing. What the stores promise across processes
/// is tested with it.
inline bool run_forked_writers(int children, const std::function<void(int child)>& work) {
  int go[2];
  if (::pipe(go) != 0) return false;
  std::vector<pid_t> pids;
  for (int child = 0; child < children; ++child) {
    auto pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ::close(go[1]);
      char c;
      int rc = ::read(go[0], &c, 1) == 1 ? 0 : 3;
      if (rc == 0) {
        try {
          work(child);
        } catch (...) {
          rc = 2;
        }
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  std::string release(static_cast<std::size_t>(children), 'g');
  bool ok = ::write(go[1], release.data(), release.size()) == static_cast<ssize_t>(release.size());
  ::close(go[1]);
  for (auto pid : pids) {
    int status = 0;
    ok = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
  }
  return ok;
}

} // namespace mcprt::test
