#include "core/fingerprint_key.hpp"

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace mcprt {

namespace {

std::string key_errno_text(int err) {
  return std::generic_category().message(err);
}

std::string quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

class key_fd {
public:
  explicit key_fd(int fd) : fd_(fd) {}
  key_fd(const key_fd&) = delete;
  key_fd& operator=(const key_fd&) = delete;
  ~key_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

private:
  int fd_;
};

// Empty on success, else why the directory could not be made.
std::string make_key_dirs(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (auto p = dir; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return quoted(p) + " is not a directory";
      break;
    }
    if (errno != ENOENT) return "cannot reach " + quoted(p) + ": " + key_errno_text(errno);
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto i = missing.rbegin(); i != missing.rend(); ++i)
    if (::mkdir(i->c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create directory " + quoted(*i) + ": " + key_errno_text(errno);
  return {};
}

bool read_exactly(int fd, unsigned char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    auto r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

bool write_key_bytes(int fd, const unsigned char* data, std::size_t n) {
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

using status = fingerprint_key_result::status;

fingerprint_key_result key_failed(status s, std::string error) {
  fingerprint_key_result r;
  r.outcome = s;
  r.error = std::move(error);
  return r;
}

// nullopt: the file does not exist.
std::optional<fingerprint_key_result> load(const fs::path& path) {
  key_fd fd{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT) return std::nullopt;
    if (err == ELOOP)
      return key_failed(status::refused, "fingerprint key " + quoted(path) +
                                         " is a symbolic link; refusing to use it (remove it and a new key "
                                         "is created)");
    return key_failed(status::unavailable, "cannot open fingerprint key " + quoted(path) + ": " + key_errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return key_failed(status::unavailable, "cannot stat fingerprint key " + quoted(path) + ": " + key_errno_text(errno));
  if (!S_ISREG(st.st_mode))
    return key_failed(status::refused, "fingerprint key " + quoted(path) + " is not a regular file; refusing to use it");
  if (st.st_uid != ::geteuid())
    return key_failed(status::refused, "fingerprint key " + quoted(path) + " belongs to uid " +
                                       std::to_string(st.st_uid) + ", not to you; refusing to use it");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return key_failed(status::refused, "fingerprint key " + quoted(path) + " is accessible to others (mode " + mode +
                                       "); run `chmod 600 " + path.string() + "`");
  }
  fingerprint_key key;
  if (st.st_size != static_cast<off_t>(key.bytes.size()))
    return key_failed(status::refused, "fingerprint key " + quoted(path) + " holds " + std::to_string(st.st_size) +
                                       " bytes, not " + std::to_string(key.bytes.size()) +
                                       "; remove it and a new key is created");
  if (!read_exactly(fd.get(), key.bytes.data(), key.bytes.size()))
    return key_failed(status::unavailable, "cannot read fingerprint key " + quoted(path));
  fingerprint_key_result r;
  r.outcome = status::loaded;
  r.key = key;
  return r;
}

fingerprint_key_result create(const fs::path& path) {
  auto dir = path.parent_path().empty() ? fs::path{"."} : path.parent_path();
  if (auto why = make_key_dirs(dir); !why.empty())
    return key_failed(status::unavailable, "cannot create fingerprint key " + quoted(path) + ": " + why);
  auto key = random_fingerprint_key();
  // A name of its own (never derived from the key), so a stale temporary
  // file of a crashed process cannot collide.
  auto nonce = random_fingerprint_key();
  unsigned long long tag = 0;
  std::memcpy(&tag, nonce.bytes.data(), sizeof tag);
  auto tmp = dir / (".fingerprint.key.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(tag));
  key_fd fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (fd.get() < 0)
    return key_failed(status::unavailable, "cannot create fingerprint key " + quoted(path) + ": " + key_errno_text(errno));
  bool written = ::fchmod(fd.get(), 0600) == 0 && write_key_bytes(fd.get(), key.bytes.data(), key.bytes.size()) &&
                 ::fsync(fd.get()) == 0;
  int err = errno;
  bool closed = ::close(fd.release()) == 0;
  if (!written || !closed) {
    ::unlink(tmp.c_str());
    return key_failed(status::unavailable, "cannot write fingerprint key " + quoted(path) + ": " + key_errno_text(err));
  }
  // link() never replaces: a file that appeared meanwhile (another process
  // creating the key at the same moment) wins, and we read it.
  int linked = ::link(tmp.c_str(), path.c_str());
  err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (err == EEXIST) {
      auto theirs = load(path);
      if (theirs) return *theirs;
    }
    return key_failed(status::unavailable, "cannot create fingerprint key " + quoted(path) + ": " + key_errno_text(err));
  }
  key_fd dfd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dfd.get() >= 0) ::fsync(dfd.get());
  fingerprint_key_result r;
  r.outcome = status::created;
  r.key = key;
  return r;
}

} // namespace

fingerprint_key random_fingerprint_key() {
  fingerprint_key key;
  std::size_t got = 0;
  while (got < key.bytes.size()) {
    auto n = ::getrandom(key.bytes.data() + got, key.bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
  }
  return key;
}

std::string keyed_connection_id(std::string_view internal_id, const fingerprint_key& key) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.bytes.data(), static_cast<int>(key.bytes.size()),
       reinterpret_cast<const unsigned char*>(internal_id.data()), internal_id.size(), mac, &len);
  static constexpr char hex[] = "0123456789abcdef";
  auto sep = internal_id.rfind("::");
  std::string out(internal_id.substr(0, sep));
  out += "::";
  for (unsigned i = 0; i < 8 && i < len; ++i) {
    out.push_back(hex[mac[i] >> 4]);
    out.push_back(hex[mac[i] & 0xf]);
  }
  return out;
}

fs::path default_fingerprint_key_path(const fs::path& home, std::string_view config_dir) {
  return home / fs::path{config_dir} / "fingerprint.key";
}

fingerprint_key_result load_or_create_fingerprint_key(const fs::path& path) {
  if (auto existing = load(path)) return *existing;
  return create(path);
}

} // namespace mcprt
