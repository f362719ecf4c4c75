#include "cli/daemon_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/daemon_identity.hpp"
#include "core/untrusted_text.hpp"
#include "io/state_dir.hpp"

namespace mcprt::cli {

namespace fs = std::filesystem;

std::string daemon_file(const std::string& workspace) {
  std::error_code ec;
  return (fs::absolute(workspace, ec).lexically_normal() / ".mcprt" / "daemon.json").string();
}

namespace {

/// Reads at most `max` bytes of an open descriptor.
std::optional<std::string> read_bounded(int fd, std::size_t max) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max) return std::nullopt;
  }
}

/// A file under /proc, whole (they are small), or nullopt.
std::optional<std::string> read_proc(const std::string& path, std::size_t max = 1 << 20) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  auto text = read_bounded(fd, max);
  ::close(fd);
  return text;
}

std::optional<std::string> read_link(const std::string& path) {
  std::error_code ec;
  auto target = fs::read_symlink(path, ec);
  if (ec) return std::nullopt;
  return target.string();
}

std::string program_name(std::string exe) {
  const std::string deleted = " (deleted)";
  if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0)
    exe.resize(exe.size() - deleted.size());
  return fs::path(exe).filename().string();
}

std::string same_path_key(const fs::path& p) {
  std::error_code ec;
  auto c = fs::weakly_canonical(p, ec);
  return (ec ? p.lexically_normal() : c).string();
}

/// The sockets listening on `port`, IPv4 and IPv6.
std::vector<listening_socket> listening_on(int port) {
  std::vector<listening_socket> out;
  for (auto [file, v6] : {std::pair{"/proc/net/tcp", false}, std::pair{"/proc/net/tcp6", true}})
    if (auto t = read_proc(file, 64 << 20))
      for (auto& s : parse_proc_net_tcp(*t, v6))
        if (s.port == port) out.push_back(s);
  return out;
}

/// The inodes of the sockets among `/proc/<pid>/fd` (`proc` is
/// `/proc/<pid>`); `ec` set when the descriptors cannot be listed.
std::vector<unsigned long> socket_inodes(const std::string& proc, std::error_code& ec) {
  std::vector<unsigned long> out;
  for (auto& e : fs::directory_iterator(proc + "/fd", ec)) {
    auto link = read_link(e.path().string());
    if (!link || link->rfind("socket:[", 0) != 0) continue;
    out.push_back(std::strtoul(link->c_str() + 8, nullptr, 10));
  }
  return out;
}

/// Whether `/proc/<pid>` (`proc`) runs this very program.
bool runs_this_program(const std::string& proc) {
  auto exe = read_link(proc + "/exe");
  auto self = read_link("/proc/self/exe");
  return exe && self && program_name(*exe) == program_name(*self);
}

} // namespace

token_file read_token_file(const std::string& path, const std::string& flag) {
  token_file out;
  auto where = flag + " '" + escape_for_display(path) + "'";
  // The path is the user's choice (a link to it is fine); a FIFO must not
  // hang us, and is refused as not a regular file.
  auto f = io::read_owner_file(path, 077, 4096, false);
  using problem = io::owner_file::problem;
  switch (f.what) {
    case problem::none:
      break;
    case problem::cannot_open:
    case problem::symlink:
      out.error = "cannot read " + where + ": " + std::strerror(f.error_number);
      return out;
    case problem::not_regular:
      out.error = where + " is not a regular file";
      return out;
    case problem::not_ours:
      out.error = where + " belongs to uid " + std::to_string(f.uid) + ", not to you (uid "
                  + std::to_string(::geteuid()) + "): a token file must be your own";
      return out;
    case problem::mode:
      out.error = where + " can be read or written by others (mode " + f.mode + "): run `chmod 600 "
                  + escape_for_display(path) + "`";
      return out;
    case problem::too_large:
    case problem::cannot_read:
      out.error = "cannot read " + where + " (a token file holds one line of at most 4096 bytes)";
      return out;
  }
  auto line = f.text.substr(0, f.text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  if (line.empty()) {
    out.error = where + " is empty";
    return out;
  }
  for (unsigned char c : line)
    if (c < 0x21 || c > 0x7E) {
      out.error = where + ": a token is printable ASCII without spaces";
      return out;
    }
  out.token = line;
  return out;
}

daemon_check check_daemon(const std::string& workspace, bool check_file) {
  daemon_check out;
  auto path = daemon_file(workspace);
  auto fail = [&](std::string why) {
    out.error = "not using " + path + ": " + std::move(why);
    return out;
  };
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    out.absent = true;
    out.error = "no daemon runs for " + workspace + " (no " + path + ")";
    return out;
  }
  if (!S_ISREG(st.st_mode)) return fail("it is not a regular file (a symlink?)");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return fail(std::string("cannot open it: ") + std::strerror(errno));
  struct stat fst {};
  ::fstat(fd, &fst);
  if (check_file) {
    if (!S_ISREG(fst.st_mode)) {
      ::close(fd);
      return fail("it is not a regular file");
    }
    if (fst.st_uid != ::geteuid()) {
      ::close(fd);
      return fail("it belongs to uid " + std::to_string(fst.st_uid) + ", not to you");
    }
    if ((fst.st_mode & 022) != 0) {
      ::close(fd);
      return fail("others can write it (mode " + io::octal_mode(fst.st_mode) + ")");
    }
  }
  auto text = read_bounded(fd, 64 * 1024);
  ::close(fd);
  if (!text) return fail("it cannot be read (or is over 64 KiB)");
  auto parsed = parse_daemon_record(*text);
  if (!parsed.record) return fail(parsed.error);
  auto& rec = *parsed.record;
  auto pid = static_cast<pid_t>(rec.pid);
  auto proc = "/proc/" + std::to_string(pid);
  auto pid_text = "pid " + std::to_string(pid);
  if (pid == ::getpid()) {
    // A reused pid: the file's daemon is long gone.
    out.absent = true;
    out.error = "no daemon runs for " + workspace + " (" + path + " names this very process)";
    return out;
  }

  // The process: alive, ours, an `mcprt serve` of this workspace.
  struct stat pst {};
  if (::stat(proc.c_str(), &pst) != 0) {
    out.absent = true;
    out.error = "no daemon runs for " + workspace + " (" + path + " names " + pid_text + ", which is not running)";
    return out;
  }
  if (pst.st_uid != ::geteuid()) return fail(pid_text + " belongs to uid " + std::to_string(pst.st_uid) + ", not to you");
  if (!runs_this_program(proc)) {
    auto exe = read_link(proc + "/exe");
    return fail(pid_text + " is not mcprt (it runs " + escape_for_display(exe ? program_name(*exe) : "?") + ")");
  }
  auto cmdline = read_proc(proc + "/cmdline");
  auto ws_arg = cmdline ? serve_workspace_arg(split_cmdline(*cmdline)) : std::nullopt;
  if (!ws_arg) return fail(pid_text + " is not an `mcprt serve`");
  auto cwd = read_link(proc + "/cwd");
  fs::path served = *ws_arg;
  if (served.is_relative()) {
    if (!cwd) return fail("cannot tell which workspace " + pid_text + " serves");
    served = fs::path(*cwd) / served;
  }
  if (same_path_key(served) != same_path_key(workspace))
    return fail(pid_text + " serves another workspace (" + escape_for_display(served.lexically_normal().string()) + ")");

  // The URL: a socket listening at its port must be one of the process's.
  auto endpoint = parse_http_url(rec.url);
  if (!endpoint) return fail("its url is not http://HOST:PORT");
  auto sockets = listening_on(endpoint->port);
  std::error_code ec;
  auto owned = socket_inodes(proc, ec);
  if (ec) return fail("cannot look at the descriptors of " + pid_text + ": " + ec.message());
  const listening_socket* chosen = nullptr;
  for (auto& s : sockets) {
    if (std::find(owned.begin(), owned.end(), s.inode) == owned.end()) continue;
    // The socket at the recorded address wins over another of the same port.
    if (!chosen || s.address == endpoint->host) chosen = &s;
  }
  if (!chosen)
    return fail("nothing " + pid_text + " owns listens on port " + std::to_string(endpoint->port)
                + " (the url points somewhere else)");
  verified_daemon d;
  auto addr = connect_address(chosen->address);
  d.url = "http://" + (addr.find(':') != std::string::npos ? "[" + addr + "]" : addr) + ":"
          + std::to_string(chosen->port);
  d.instance = rec.instance;
  d.pid = pid;
  d.approvals = rec.approvals;
  if (!rec.token_file.empty()) {
    // Its owner and mode are checked like --token-file's: only this user
    // can have put the token there.
    auto t = read_token_file(rec.token_file, "the token file " + path + " names");
    if (!t.error.empty()) return fail(t.error);
    d.token = t.token;
  }
  out.daemon = std::move(d);
  return out;
}

std::string check_owner_daemon_url(const std::string& url) {
  auto endpoint = parse_http_url(url);
  if (!endpoint) return "it is not http://HOST:PORT";
  auto host = endpoint->host == "localhost" ? std::string("127.0.0.1") : endpoint->host;
  bool v4_loopback = host.rfind("127.", 0) == 0;
  if (!v4_loopback && host != "::1") return "it is not a loopback address";
  std::vector<unsigned long> inodes;
  for (auto& s : listening_on(endpoint->port)) {
    // A wildcard listener also takes connections to loopback.
    bool reaches = s.address == host || s.address == "0.0.0.0" || s.address == "::"
                   || (v4_loopback && s.address == "::ffff:" + host);
    if (reaches) inodes.push_back(s.inode);
  }
  auto port = "port " + std::to_string(endpoint->port);
  if (inodes.empty()) return "nothing listens on " + port;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/proc", ec)) {
    auto name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto proc = e.path().string();
    struct stat pst {};
    if (::stat(proc.c_str(), &pst) != 0 || pst.st_uid != ::geteuid()) continue;
    std::error_code fd_ec;
    auto owned = socket_inodes(proc, fd_ec);
    if (std::find_first_of(owned.begin(), owned.end(), inodes.begin(), inodes.end()) == owned.end()) continue;
    auto cmdline = read_proc(proc + "/cmdline");
    if (!runs_this_program(proc) || !cmdline || !serve_workspace_arg(split_cmdline(*cmdline)))
      return "what listens on " + port + " is a process of yours, but not an `mcprt serve`";
    return {};
  }
  return "what listens on " + port + " is no process of yours";
}

std::string new_instance_id() { return io::random_hex(16); }

owner_token load_owner_token(const std::string& home) {
  owner_token out;
  std::string error;
  auto dir = io::state_dir::open(home, ".mcprt", error);
  out.path = (fs::path(home) / ".mcprt" / "token").string();
  if (!dir) {
    out.error = "cannot keep the owner's token: " + error;
    return out;
  }
  bool existed = false;
  if (!dir->create_once("token", io::random_hex(32) + "\n", existed, error) && !existed) {
    out.error = "cannot keep the owner's token: " + error;
    return out;
  }
  auto t = read_token_file(out.path, "the owner's token file");
  out.token = t.token;
  out.error = t.error;
  return out;
}

} // namespace mcprt::cli
