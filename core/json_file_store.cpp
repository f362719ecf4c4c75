#include "core/json_file_store.hpp"

#include "core/untrusted_text.hpp"

#include <atomic>
#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mcprt {

namespace {

// std::system_error derives from std::runtime_error and renders the errno
// text after our message, so callers get "<what> '<path>': <reason>".
[[noreturn]] void throw_io(const std::string& what, const fs::path& p, int err) {
  throw std::system_error(err, std::generic_category(), what + " '" + p.string() + "'");
}

fs::path parent_or_dot(const fs::path& file) {
  auto dir = file.parent_path();
  return dir.empty() ? fs::path{"."} : dir;
}

// Closes on every exit path; a leaked descriptor would also leak the flock.
class unique_fd {
public:
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Hands the descriptor back so close() errors can be checked.
  int release() { return std::exchange(fd_, -1); }

private:
  int fd_;
};

void make_private_dirs(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (auto p = dir; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) throw_io("cannot create directory", dir, ENOTDIR);
      break;
    }
    if (errno != ENOENT) throw_io("cannot create directory", dir, errno);
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto i = missing.rbegin(); i != missing.rend(); ++i) {
    // EEXIST: another process won the race, which is just as good.
    if (::mkdir(i->c_str(), 0700) != 0 && errno != EEXIST) throw_io("cannot create directory", *i, errno);
  }
}

void write_all(int fd, const std::string& bytes, const fs::path& p) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    auto n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io("cannot write", p, errno);
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
}

// Readers without the lock see the old file or the new one, never a torn
// one; the fsyncs make the new content survive a crash right after rename.
void write_atomically(const fs::path& target, const std::string& bytes) {
  // Atomic: two stores in different threads of one process must not pick
  // the same temp name.
  static std::atomic<unsigned> counter{0};
  auto dir = parent_or_dot(target);
  auto tmp =
    dir / (target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
  unique_fd fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (fd.get() < 0) throw_io("cannot create temporary file", tmp, errno);
  try {
    // The umask may have narrowed the mode but never widens it; set it
    // exactly so a permissive umask cannot expose the content.
    if (::fchmod(fd.get(), 0600) != 0) throw_io("cannot set mode of", tmp, errno);
    write_all(fd.get(), bytes, tmp);
    if (::fsync(fd.get()) != 0) throw_io("cannot sync", tmp, errno);
    if (::close(fd.release()) != 0) throw_io("cannot close", tmp, errno);
    if (::rename(tmp.c_str(), target.c_str()) != 0) throw_io("cannot replace", target, errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  unique_fd dfd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dfd.get() < 0) throw_io("cannot open directory", dir, errno);
  // Some file systems cannot sync a directory; the rename is still done.
  if (::fsync(dfd.get()) != 0 && errno != EINVAL && errno != ENOTSUP)
    throw_io("cannot sync directory", dir, errno);
}

std::string utc_timestamp() {
  auto now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  auto n = std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return std::string(buf, n);
}

// What a sane store holds is small: a few hundred bytes per record. The
// bound is for a file that is not one (a repository's home with a symlink
// to a device, say).
constexpr std::size_t max_store_bytes = std::size_t{16} << 20;

// The stores nest a few levels (key → key → record); comments are allowed
// because users edit these files by hand.
json_limits store_limits() {
  json_limits lim;
  lim.max_bytes = max_store_bytes;
  lim.max_depth = 16;
  lim.allow_comments = true;
  return lim;
}

} // namespace

bool json_file_store::file_stamp::operator==(const file_stamp& other) const {
  return exists == other.exists && dev == other.dev && ino == other.ino && size == other.size
         && mtime_ns == other.mtime_ns;
}

json_file_store::json_file_store(fs::path file, std::string label, validator validate)
    : file_(std::move(file)), label_(std::move(label)), validate_(std::move(validate)) {}

std::string json_file_store::quoted_file() const {
  return "'" + file_.string() + "'";
}

json_file_store::file_stamp json_file_store::stat_file(int fd) const {
  file_stamp s;
  struct stat st {};
  if ((fd >= 0 ? ::fstat(fd, &st) : ::stat(file_.c_str(), &st)) != 0) return s;
  s.exists = true;
  s.dev = static_cast<unsigned long long>(st.st_dev);
  s.ino = static_cast<unsigned long long>(st.st_ino);
  s.size = static_cast<long long>(st.st_size);
  s.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return s;
}

json_file_store::loaded json_file_store::load(bool strict) {
  loaded out;
  // `err` 0: `what` says it all.
  auto fail = [&](const std::string& what, int err) {
    if (strict && err != 0) throw_io(what, file_, err);
    if (strict)
      throw std::runtime_error(label_ + " " + quoted_file() + " is " + what + "; refusing to replace it");
    // Stamp what we could not read, so the next lookup does not retry (and
    // warn) until the file actually changes.
    out.stamp = stat_file();
    out.problems.push_back(label_ + " " + quoted_file() + ": "
                           + (err != 0 ? what + ": " + std::generic_category().message(err) : "it is " + what)
                           + "; treating it as empty");
  };
  // Non-blocking: a FIFO planted at the path must not hang the reader (an
  // actor thread in the daemon); it is refused below as not a regular file.
  unique_fd fd{::open(file_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (fd.get() < 0) {
    if (errno != ENOENT) fail("cannot open", errno);
    return out;
  }
  // Stamp the descriptor, not the path, so the stamp matches these bytes
  // even if the file is replaced while we read.
  out.stamp = stat_file(fd.get());
  if (!out.stamp.exists) {
    fail("cannot stat", errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    fail("not a regular file", 0);
    return out;
  }
  if (static_cast<std::size_t>(st.st_size) > max_store_bytes) {
    fail("larger than " + std::to_string(max_store_bytes) + " bytes", 0);
    return out;
  }
  char buf[8192];
  for (;;) {
    auto n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read", errno);
      out.bytes.clear();
      return out;
    }
    if (n == 0) break;
    out.bytes.append(buf, static_cast<size_t>(n));
    // The file grew while we read it (it is still being written, or it is
    // not what it claims to be): stop at the bound.
    if (out.bytes.size() > max_store_bytes) {
      fail("larger than " + std::to_string(max_store_bytes) + " bytes", 0);
      out.bytes.clear();
      return out;
    }
  }
  // parse_bounded_json's messages never quote the input, which matters for
  // a file of secrets.
  auto doc = parse_bounded_json(out.bytes, store_limits());
  if (!doc.ok()) {
    out.malformed = true;
    out.problems.push_back(label_ + " " + quoted_file() + " is not valid JSON (at byte "
                           + std::to_string(doc.error->offset) + ": " + doc.error->message
                           + "); treating it as empty, it will be backed up before the next write");
    return out;
  }
  if (!doc.value.is_object()) {
    out.malformed = true;
    out.problems.push_back(label_ + " " + quoted_file() + " holds a JSON " + doc.value.type_name()
                           + ", not an object; treating it as empty, it will be backed up "
                             "before the next write");
    return out;
  }
  out.data = std::move(doc.value);
  if (validate_) {
    auto before = out.problems.size();
    validate_(out.data, out.problems);
    if (out.problems.size() != before) out.malformed = true;
  }
  return out;
}

void json_file_store::adopt(loaded&& l) {
  // The same bytes were already reported; don't repeat on every write.
  if (!(cached_ && l.stamp == stamp_))
    for (auto& p : l.problems)
      warnings_.push_back(std::move(p));
  data_ = std::move(l.data);
  stamp_ = l.stamp;
  cached_ = true;
}

const json& json_file_store::read() {
  if (!(cached_ && stat_file() == stamp_)) adopt(load(false));
  return data_;
}

void json_file_store::reload() {
  cached_ = false;
}

std::vector<std::string> json_file_store::take_warnings() {
  return std::exchange(warnings_, {});
}

void json_file_store::back_up_malformed(const std::string& bytes) {
  auto base = file_.string() + ".corrupt-" + utc_timestamp();
  fs::path backup = base;
  // Two recoveries within one second must not overwrite each other's
  // evidence; the caller holds the lock, so probing for a free name is safe.
  for (int i = 1; ::access(backup.c_str(), F_OK) == 0; ++i)
    backup = base + "-" + std::to_string(i);
  write_atomically(backup, bytes);
  warnings_.push_back(label_ + " " + quoted_file() + " was malformed; its old content " + "was saved to '"
                      + backup.string() + "' before rewriting it");
}

void json_file_store::update(const std::function<void(json&)>& mutate) {
  make_private_dirs(parent_or_dot(file_));
  auto lock_path = fs::path{file_.string() + ".lock"};
  // Never through a symlink: whoever can plant one next to the store (a
  // repository that ships a home directory, say) must not make us create
  // or open a file of their choosing.
  unique_fd lock{
    ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600)};
  if (lock.get() < 0) {
    if (errno == ELOOP)
      throw std::runtime_error("lock file '" + lock_path.string()
                               + "' is a symbolic link; refusing to use it (remove it)");
    throw_io("cannot open lock file", lock_path, errno);
  }
  struct stat lock_stat {};
  if (::fstat(lock.get(), &lock_stat) != 0 || !S_ISREG(lock_stat.st_mode))
    throw std::runtime_error("lock file '" + lock_path.string()
                             + "' is not a regular file; refusing to use it (remove it)");
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_io("cannot lock", lock_path, errno);
  }
  // Another process may have written since we last looked: apply the
  // change to what is on disk now, not to our cached copy. Adopting it first
  // also means a failed write leaves this store agreeing with the disk.
  auto current = load(true);
  auto old_bytes = std::move(current.bytes);
  auto malformed = current.malformed;
  adopt(std::move(current));
  auto data = data_;
  mutate(data);
  std::string bytes;
  try {
    bytes = data.dump(2) + "\n";
  } catch (const json::exception&) {
    // nlohmann's message quotes the offending byte; the document may hold
    // secrets, so say only what is wrong.
    throw std::invalid_argument(label_ + " " + quoted_file() + ": cannot write a string that is not valid UTF-8");
  }
  // A missing file stays missing while there is nothing to put in it (a
  // logout with no credentials stored, say).
  if (malformed || (stamp_.exists ? bytes != old_bytes : !data.empty())) {
    if (malformed) back_up_malformed(old_bytes);
    write_atomically(file_, bytes);
  }
  data_ = std::move(data);
  stamp_ = stat_file();
}

} // namespace mcprt
