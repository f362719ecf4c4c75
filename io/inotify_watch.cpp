#include "io/inotify_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace mcprt::io {

namespace {

constexpr uint32_t watch_mask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE
                                | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

std::string describe_errno(const std::string& call, int err) {
  std::string out = call + ": " + std::strerror(err);
  if (err == ENOSPC) out += " (the per-user inotify watch limit is reached; raise fs.inotify.max_user_watches)";
  else if (err == EMFILE)
    out +=
      " (the per-user inotify instance limit, or the open file limit, is reached; raise "
      "fs.inotify.max_user_instances)";
  return out;
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// `p` itself if it is an existing directory, else its nearest ancestor
/// that is; "/" at worst.
std::string nearest_existing_dir(std::filesystem::path p) {
  while (true) {
    auto s = p.string();
    if (is_directory(s) || !p.has_relative_path()) return s.empty() ? "/" : s;
    p = p.parent_path();
  }
}

std::string join(const std::string& dir, const char* name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + name;
}

bool is_ancestor(const std::string& dir, const std::string& file) {
  if (dir == "/") return file.size() > 1 && file[0] == '/';
  return file.size() > dir.size() && file.compare(0, dir.size(), dir) == 0 && file[dir.size()] == '/';
}

} // namespace

struct inotify_watch::impl {
  std::vector<std::string> files; // absolute, lexically normal
  callback on_change;
  error_callback on_error;
  int ifd = -1;
  int efd = -1;
  std::thread thread;

  mutable std::mutex mtx; // guards the maps and last_err
  std::map<int, std::string> wd_to_dir;
  std::map<std::string, int> dir_to_wd;
  std::string last_err;

  ~impl() {
    if (ifd >= 0) ::close(ifd);
    if (efd >= 0) ::close(efd);
  }

  /// The directory to watch for `file`: the nearest existing one on the way,
  /// skipping those that could not be watched (so that a directory we may
  /// not read leaves its parent watched rather than nothing).
  std::string armed_dir_of(const std::string& file, const std::set<std::string>& failed) const {
    std::filesystem::path p = std::filesystem::path(file).parent_path();
    while (true) {
      auto d = nearest_existing_dir(p);
      if (!failed.count(d) || d == "/") return d;
      p = std::filesystem::path(d).parent_path();
    }
  }

  bool relevant(const std::string& path) const {
    for (auto& f : files)
      if (f == path || is_ancestor(path, f)) return true;
    return false;
  }

  bool on_the_way(const std::string& path) const {
    for (auto& f : files)
      if (is_ancestor(path, f)) return true;
    return false;
  }

  void forget(int wd, bool remove_watch) {
    auto i = wd_to_dir.find(wd);
    if (i == wd_to_dir.end()) return;
    if (remove_watch) ::inotify_rm_watch(ifd, wd);
    dir_to_wd.erase(i->second);
    wd_to_dir.erase(i);
  }

  /// Makes the watched set the nearest existing directory of every file's
  /// parent. Returns the files whose own directory became watched (after
  /// the initial arm: they may have been written before the watch was in
  /// place). Throws on
  /// errors when `initial`, records them otherwise.
  std::vector<std::string> rearm(bool initial, std::vector<std::string>& errors) {
    std::lock_guard<std::mutex> lk(mtx);
    std::set<std::string> added;
    std::set<std::string> desired;
    std::set<std::string> failed;
    // A directory can vanish between the stat and the add, and a deeper one
    // can appear between the stat and the add (its creation then happened
    // before the watch and went unreported): look again until nothing moves.
    for (int attempt = 0; attempt < 16; ++attempt) {
      desired.clear();
      for (auto& f : files)
        desired.insert(armed_dir_of(f, failed));
      bool retry = false;
      for (auto& d : desired) {
        if (dir_to_wd.count(d)) continue;
        int wd = ::inotify_add_watch(ifd, d.c_str(), watch_mask);
        if (wd < 0) {
          int err = errno;
          if (err == ENOENT || err == ENOTDIR) {
            retry = true;
            continue;
          }
          auto msg = describe_errno("inotify_add_watch(" + d + ")", err);
          if (initial) throw inotify_error(msg);
          // Reported once while it persists; the parent is watched instead.
          if (msg != last_err) errors.push_back(msg);
          last_err = msg;
          failed.insert(d);
          retry = true;
          continue;
        }
        // The same inode under another path (a symlinked directory): keep one.
        if (auto old = wd_to_dir.find(wd); old != wd_to_dir.end()) dir_to_wd.erase(old->second);
        wd_to_dir[wd] = d;
        dir_to_wd[d] = wd;
        added.insert(d);
        retry = true;
      }
      if (!retry) break;
    }
    for (auto i = dir_to_wd.begin(); i != dir_to_wd.end();) {
      if (desired.count(i->first)) {
        ++i;
        continue;
      }
      ::inotify_rm_watch(ifd, i->second);
      wd_to_dir.erase(i->second);
      i = dir_to_wd.erase(i);
    }
    // A file can only exist once its own directory does: report it when
    // that directory became watched (not when an ancestor did).
    std::vector<std::string> report;
    if (!initial)
      for (auto& f : files) {
        auto parent = std::filesystem::path(f).parent_path().string();
        if (added.count(parent) && armed_dir_of(f, failed) == parent) report.push_back(f);
      }
    return report;
  }

  void notify(const std::string& path) {
    if (!on_change) return;
    try {
      on_change(path);
    } catch (...) {
    }
  }

  void notify_error(const std::string& msg) {
    if (!on_error) return;
    try {
      on_error(msg);
    } catch (...) {
    }
  }

  /// Handles one read of events; returns the paths to report.
  void handle(const char* buf, ssize_t len) {
    std::vector<std::string> report;
    std::vector<std::string> errors;
    bool need_rearm = false;
    bool overflow = false;
    {
      std::lock_guard<std::mutex> lk(mtx);
      for (const char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
          overflow = true;
          continue;
        }
        auto i = wd_to_dir.find(ev->wd);
        if (i == wd_to_dir.end()) continue; // a watch already dropped
        const std::string dir = i->second;
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
          // The watched directory itself went away (or moved): fall back to
          // the nearest existing ancestor.
          report.push_back(dir);
          forget(ev->wd, (ev->mask & IN_MOVE_SELF) != 0);
          need_rearm = true;
          continue;
        }
        if (ev->len == 0 || ev->name[0] == '\0') continue;
        auto path = join(dir, ev->name);
        if (!relevant(path)) continue;
        report.push_back(path);
        if (on_the_way(path)) need_rearm = true;
      }
      if (overflow) {
        for (auto& [wd, d] : wd_to_dir)
          ::inotify_rm_watch(ifd, wd);
        wd_to_dir.clear();
        dir_to_wd.clear();
        need_rearm = true;
      }
    }
    if (need_rearm) {
      auto more = rearm(false, errors);
      report.insert(report.end(), more.begin(), more.end());
    }
    if (overflow) report.insert(report.end(), files.begin(), files.end());
    for (auto& e : errors)
      notify_error(e);
    // Consecutive duplicates (a save produces modify + close_write) once.
    for (std::size_t k = 0; k < report.size(); ++k)
      if (k == 0 || report[k] != report[k - 1]) notify(report[k]);
  }

  void run() {
    alignas(inotify_event) char buf[16 * 1024];
    pollfd fds[2] = {{ifd, POLLIN, 0}, {efd, POLLIN, 0}};
    while (true) {
      int n = ::poll(fds, 2, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        auto msg = describe_errno("poll", errno);
        {
          std::lock_guard<std::mutex> lk(mtx);
          last_err = msg;
        }
        notify_error(msg);
        return;
      }
      if (fds[1].revents) return; // stop requested
      if (fds[0].revents & POLLIN) {
        ssize_t r = ::read(ifd, buf, sizeof buf);
        if (r < 0) {
          if (errno == EINTR || errno == EAGAIN) continue;
          auto msg = describe_errno("read(inotify)", errno);
          {
            std::lock_guard<std::mutex> lk(mtx);
            last_err = msg;
          }
          notify_error(msg);
          return;
        }
        handle(buf, r);
      }
    }
  }

  void stop() {
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(efd, &one, sizeof one);
  }
};

inotify_watch::inotify_watch(std::vector<std::filesystem::path> files, callback on_change, error_callback on_error)
    : impl_(std::make_shared<impl>()) {
  auto& im = *impl_;
  for (auto& f : files) {
    auto abs = std::filesystem::absolute(f).lexically_normal().string();
    while (abs.size() > 1 && abs.back() == '/')
      abs.pop_back();
    im.files.push_back(std::move(abs));
  }
  im.on_change = std::move(on_change);
  im.on_error = std::move(on_error);
  im.ifd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (im.ifd < 0) throw inotify_error(describe_errno("inotify_init1", errno));
  im.efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (im.efd < 0) throw inotify_error(describe_errno("eventfd", errno));
  std::vector<std::string> errors;
  im.rearm(true, errors);
  // The thread holds the state too, so it may outlive this object (see the
  // destructor).
  im.thread = std::thread([state = impl_] { state->run(); });
}

inotify_watch::~inotify_watch() {
  impl_->stop();
  if (impl_->thread.get_id() == std::this_thread::get_id())
    impl_->thread.detach(); // destroyed from inside a callback
  else if (impl_->thread.joinable()) impl_->thread.join();
}

std::string inotify_watch::last_error() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  return impl_->last_err;
}

std::vector<std::string> inotify_watch::watched_directories() const {
  std::lock_guard<std::mutex> lk(impl_->mtx);
  std::vector<std::string> out;
  for (auto& [d, wd] : impl_->dir_to_wd)
    out.push_back(d);
  return out;
}

} // namespace mcprt::io
