#pragma once

#include <chrono>
#include <filesystem>
#include <vector>

#include <caf/fwd.hpp>

#include "core/server_config.hpp"
#include "core/settings.hpp"
#include "messages/hot_reload.hpp"

namespace mcprt {

/// One settings file the watcher keeps in step, and its scope.
struct watched_file {
  config_scope scope = config_scope::user;
  std::filesystem::path path;
  settings_format format = settings_format::settings;
};

struct watcher_options {
  std::vector<watched_file> files;
  /// Trailing debounce: a burst of events is read once, this long after the
  /// last event of the burst.
  std::chrono::milliseconds debounce{300};
  /// Watch the files' directories with io::inotify_watch. Off in
  /// deterministic tests, which inject `fs_event` themselves.
  bool use_inotify = true;
};

/// Spawns the settings watcher: it watches each settings file's directory
/// (editors save by renaming a temp file over it), debounces a burst of
/// saves into one update, and sends only semantic changes.
///
/// - At start it reads every file as its last good content and sends
///   `target` one `settings_update{batch 0, no changes, all files, forced}`.
///   A file that does not parse at start publishes `settings_error` and
///   counts as absent (empty) until it is fixed.
/// - `fs_event(path)` restarts the debounce timer (any path: an unrelated one
///   merely causes a re-read that finds nothing). When the timer runs out,
///   every file is re-read and compared with its last good content by
///   `changed_keys`:
///   - a parse error keeps the last good content and publishes
///     `settings_error` once per distinct error of that file;
///   - a change becomes `created` / `modified` / `deleted` and is kept only
///     if `should_notify(keys)`; a change of restart-required keys only is
///     recorded silently (the host must restart);
///   - if any change is kept, `target` gets `settings_update{++batch,
///     changes, last good of all files, forced=false}` and the bus gets
///     `settings_changed`. Identical, formatting-only and self-written saves
///     emit nothing.
/// - `reload` cancels a pending debounce, re-reads now and always sends
///   `target` an update with `forced=true` (its changes may be empty);
///   answers true. `snapshot` answers the last good content of every file.
///
/// With `use_inotify` the actor owns an io::inotify_watch (destroyed with
/// it) whose callback sends it `fs_event`. If inotify cannot be set up, the
/// watcher still runs (reload works) and publishes a `settings_error` with
/// an empty path and the reason; so does a later watch error.
///
/// Payloads:
///   settings_changed: {"batch", "changes": [{"path", "scope", "change",
///                      "keys"[, "keys_omitted"]}]} (at most 100 keys of at
///                      most 256 bytes each; `keys_omitted` counts the rest)
///   settings_error:   {"path", "scope", "line", "column", "message"}
///
/// Invalid `target` or `bus` handles are allowed (the messages are dropped).
watcher_actor spawn_watcher(caf::actor_system& sys, watcher_options opts, gating_actor target,
                            event_bus_actor bus);

/// The bus event of a settings error (exposed for tests and the CLI).
events::settings_error settings_error_event(const settings_error& e, config_scope scope);

} // namespace mcprt
