#include "io/state_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mcprt::io {

namespace fs = std::filesystem;

namespace {

std::string errno_message(const std::string& what, const fs::path& where) {
  return what + " " + where.string() + ": " + std::strerror(errno);
}

/// Sixteen hex digits from the kernel's random source, so that no one can
/// plant a link at a temporary name ahead of time.
std::string random_suffix() {
  unsigned char bytes[8] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  std::string out;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

bool write_whole(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool is_symlink_at(int dir_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

} // namespace

std::optional<state_dir> state_dir::open(const fs::path& parent, const std::string& name, std::string& error) {
  auto path = parent / name;
  int parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0) {
    error = errno_message("cannot open directory", parent);
    return std::nullopt;
  }
  if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    error = errno_message("cannot create directory", path);
    ::close(parent_fd);
    return std::nullopt;
  }
  int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (is_symlink_at(parent_fd, name)) {
      error = path.string() + " is a symbolic link, and mcprt writes its files through none (a repository may have "
                              "planted it); remove it";
    } else if (err == ENOTDIR) {
      error = path.string() + " is not a directory";
    } else {
      errno = err;
      error = errno_message("cannot open directory", path);
    }
    ::close(parent_fd);
    return std::nullopt;
  }
  ::close(parent_fd);
  return state_dir{fd, std::move(path)};
}

state_dir::state_dir(state_dir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

state_dir& state_dir::operator=(state_dir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

state_dir::~state_dir() {
  if (fd_ >= 0) ::close(fd_);
}

bool state_dir::write_atomically(const std::string& name, std::string_view text, std::string& error) const {
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto tmp = "." + name + "." + random_suffix() + ".tmp";
    int fd = ::openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      error = errno_message("cannot write", path_ / tmp);
      return false;
    }
    bool ok = write_whole(fd, text);
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
      error = errno_message("cannot write", path_ / name);
      ::unlinkat(fd_, tmp.c_str(), 0);
      return false;
    }
    return true;
  }
  error = "cannot write " + (path_ / name).string() + ": no unused temporary name in 8 tries";
  return false;
}

int state_dir::open_file(const std::string& name, int flags, std::string& error) const {
  flags |= O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(fd_, name.c_str(), flags, 0600);
  if (fd < 0 && errno == ELOOP && is_symlink_at(fd_, name) && ::unlinkat(fd_, name.c_str(), 0) == 0)
    fd = ::openat(fd_, name.c_str(), flags, 0600);
  if (fd < 0) error = errno_message("cannot open", path_ / name);
  return fd;
}

int state_dir::create_fresh(const std::string& name, std::string& error) const {
  ::unlinkat(fd_, name.c_str(), 0);
  int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) error = errno_message("cannot create", path_ / name);
  return fd;
}

bool state_dir::remove(const std::string& name) const {
  return ::unlinkat(fd_, name.c_str(), 0) == 0;
}

} // namespace mcprt::io
