#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mcprt::io {

/// inotify could not be set up (no instance left, no watch left, ...). The
/// message names the call, the path and, for the usual limits, the sysctl to
/// raise (fs.inotify.max_user_instances / fs.inotify.max_user_watches).
class inotify_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Watches a set of FILE paths for changes, with one thread and inotify.
/// Linux only.
///
/// - Never watches a file itself: editors save by writing a temp file and
///   renaming it over the original, which a watch on the old inode would
///   miss. It watches the file's parent directory instead.
/// - A parent that does not exist (yet) is not an error: the nearest
///   existing ancestor is watched, and the watch moves deeper as the missing
///   directories get created (any number of levels). When a watched
///   directory is deleted or moved away, the watch falls back to its nearest
///   existing ancestor.
/// - `on_change(path)` is called, on the watch thread, with the affected
///   path for every create / modify / close_write / move / delete / attrib
///   event that concerns one of the watched files, or one of the directories
///   on the way to them (the directory's path then). When a file's own
///   directory becomes watched after start (it may already hold the file:
///   the file can be written before the new watch is in place), it is also
///   called once with that file's path. Several calls per save are normal;
///   the consumer is expected to debounce and compare contents.
/// - Events about OTHER entries of a watched directory (an unrelated file
///   next to a settings file, an editor's temp file before it is renamed
///   over) are filtered out: they never call back.
/// - On a queue overflow (IN_Q_OVERFLOW) every watch is re-armed and every
///   watched file is reported once.
///
/// Callbacks run one at a time on the watch thread; they must be quick and
/// must not block (the intended use is an `anon_send` to an actor). An
/// exception escaping a callback is swallowed.
///
/// The destructor stops and joins the thread. (Should the last reference to
/// the owner be dropped from inside a callback, i.e. the destructor run on
/// the watch thread itself, the thread is detached instead and ends on its
/// own right after the callback: it shares no state with the destroyed
/// object.)
class inotify_watch {
public:
  using callback = std::function<void(const std::string& path)>;
  using error_callback = std::function<void(const std::string& message)>;

  /// Arms the watches and starts the thread. Relative paths are made
  /// absolute against the current directory. Throws inotify_error when
  /// inotify cannot be initialised or an initial watch cannot be added.
  /// Errors met later while re-arming (the watch limit reached when a new
  /// directory appears, say) go to `on_error` (on the watch thread; once
  /// while the same error persists) and to last_error(); the directory's
  /// nearest watchable ancestor is watched instead and the watch keeps
  /// running.
  inotify_watch(std::vector<std::filesystem::path> files, callback on_change, error_callback on_error = {});
  ~inotify_watch();

  inotify_watch(const inotify_watch&) = delete;
  inotify_watch& operator=(const inotify_watch&) = delete;

  /// The last error met while re-arming; empty when there was none.
  std::string last_error() const;

  /// The directories watched right now, sorted (for tests and diagnostics).
  std::vector<std::string> watched_directories() const;

private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace mcprt::io
