#include "io/state_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
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

std::string random_hex(std::size_t count) {
  std::string bytes(count, '\0');
  std::size_t got = 0;
  while (got < count) {
    ssize_t n = ::getrandom(bytes.data() + got, count - got, 0);
    if (n < 0 && errno == EINTR) continue;
    // getrandom does not fail on Linux >= 3.17 once the pool is ready;
    // a secret that silently had fewer random bytes would be worse.
    if (n <= 0) throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(count * 2);
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string octal_mode(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

owner_file read_owner_file(const fs::path& path, unsigned forbidden, std::size_t max, bool no_links) {
  owner_file out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (no_links ? O_NOFOLLOW : 0));
  if (fd < 0) {
    out.error_number = errno;
    out.what = no_links && errno == ELOOP ? owner_file::problem::symlink : owner_file::problem::cannot_open;
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) out.what = owner_file::problem::not_regular;
  else if (st.st_uid != ::geteuid()) {
    out.what = owner_file::problem::not_ours;
    out.uid = st.st_uid;
  } else if ((st.st_mode & forbidden) != 0) {
    out.what = owner_file::problem::mode;
    out.mode = octal_mode(st.st_mode);
  }
  char buf[4096];
  while (out.what == owner_file::problem::none) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.what = owner_file::problem::cannot_read;
      out.error_number = errno;
    }
    if (n <= 0) break;
    out.text.append(buf, static_cast<std::size_t>(n));
    if (out.text.size() > max) out.what = owner_file::problem::too_large;
  }
  ::close(fd);
  if (out.what != owner_file::problem::none) out.text.clear();
  return out;
}

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
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = errno_message("cannot look at directory", path);
    ::close(fd);
    return std::nullopt;
  }
  if (st.st_uid != ::geteuid()) {
    error = path.string() + " belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid "
            + std::to_string(::geteuid()) + "): mcprt keeps its files only in a directory of yours";
    ::close(fd);
    return std::nullopt;
  }
  if ((st.st_mode & 022) != 0) {
    error = path.string() + " can be written by others (mode " + octal_mode(st.st_mode)
            + "), who could swap mcprt's files in it: run `chmod go-w " + path.string() + "`";
    ::close(fd);
    return std::nullopt;
  }
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

std::string state_dir::write_temporary(const std::string& name, std::string_view text, std::string& error) const {
  for (int attempt = 0; attempt < 8; ++attempt) {
    // A random name, so that no one can plant a link at it ahead of time.
    auto tmp = "." + name + "." + random_hex(8) + ".tmp";
    int fd = ::openat(fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      error = errno_message("cannot write", path_ / tmp);
      return {};
    }
    bool ok = write_whole(fd, text);
    ok = ::close(fd) == 0 && ok;
    if (!ok) {
      error = errno_message("cannot write", path_ / tmp);
      ::unlinkat(fd_, tmp.c_str(), 0);
      return {};
    }
    return tmp;
  }
  error = "cannot write " + (path_ / name).string() + ": no unused temporary name in 8 tries";
  return {};
}

bool state_dir::write_atomically(const std::string& name, std::string_view text, std::string& error) const {
  auto tmp = write_temporary(name, text, error);
  if (tmp.empty()) return false;
  if (::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) {
    error = errno_message("cannot write", path_ / name);
    ::unlinkat(fd_, tmp.c_str(), 0);
    return false;
  }
  return true;
}

bool state_dir::create_once(const std::string& name, std::string_view text, bool& existed, std::string& error) const {
  existed = false;
  auto tmp = write_temporary(name, text, error);
  if (tmp.empty()) return false;
  bool ok = ::linkat(fd_, tmp.c_str(), fd_, name.c_str(), 0) == 0;
  if (!ok && errno == EEXIST) existed = true;
  else if (!ok) error = errno_message("cannot create", path_ / name);
  ::unlinkat(fd_, tmp.c_str(), 0);
  return ok;
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
