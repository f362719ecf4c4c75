#include "actors/watcher.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "core/settings_schema.hpp"
#include "core/untrusted_text.hpp"
#include "io/inotify_watch.hpp"

namespace mcprt {

namespace {

/// One watched file: where it is, its last good content, and the error last
/// published for it (so a file that stays broken is reported once).
struct file_slot {
  watched_file file;
  settings_file last_good;
  std::string published_error; // empty while the file parses
};

struct watcher_state {
  static inline const char* name = "mcprt.watcher";

  std::vector<file_slot> slots;
  gating_actor target;
  event_bus_actor bus;
  std::chrono::milliseconds debounce{300};
  // The debounce timer of the current burst; older timers carry an older
  // token and do nothing.
  uint64_t token = 0;
  bool pending = false;
  uint64_t batch = 0;
  // Last member: destroyed first, so no callback outlives the rest.
  std::unique_ptr<io::inotify_watch> watch;
};

using watcher_self = watcher_actor::stateful_pointer<watcher_state>;

/// What one re-read of all files found.
struct scan_result {
  std::vector<settings_change> kept;   // changes worth telling
  std::vector<events::settings_error> errors; // new ones
};

std::vector<settings_file> files_of(const std::vector<file_slot>& slots) {
  std::vector<settings_file> out;
  out.reserve(slots.size());
  for (auto& s : slots) out.push_back(s.last_good);
  return out;
}

file_change change_of(bool existed, bool exists) {
  if (!existed && exists) return file_change::created;
  if (existed && !exists) return file_change::deleted;
  return file_change::modified;
}

/// Records a parse error; returns its event when it differs from the one
/// last published for this file (and logs it then).
std::optional<events::settings_error> note_error(file_slot& slot, const settings_error& e) {
  auto shown = e;
  shown.path = slot.last_good.path;
  auto payload = settings_error_event(shown, slot.file.scope);
  auto key = dump_json(nlohmann::json(payload));
  if (key == slot.published_error) return std::nullopt;
  slot.published_error = std::move(key);
  // The message is printable by contract; the path is the host's, not
  // necessarily printable.
  spdlog::warn("settings file {}:{}:{}: {}", escape_for_display(shown.path), shown.line, shown.column,
               shown.message);
  return payload;
}

/// Reads the file of `slot` at start: its content, or empty on an error.
std::optional<events::settings_error> load_initial(file_slot& slot) {
  slot.last_good.path = slot.file.path.string();
  slot.last_good.scope = to_string(slot.file.scope);
  auto doc = load_settings_file(slot.file.path, slot.file.scope, slot.file.format);
  if (!doc.ok()) {
    slot.last_good.exists = false;
    slot.last_good.content.value = nlohmann::json::object();
    return note_error(slot, *doc.error);
  }
  slot.last_good.exists = doc.exists;
  slot.last_good.content.value = std::move(doc.content);
  return std::nullopt;
}

/// Re-reads one file against its last good content (SPEC 3.3 – 3.5).
void rescan_one(file_slot& slot, scan_result& out) {
  auto doc = load_settings_file(slot.file.path, slot.file.scope, slot.file.format);
  if (!doc.ok()) {
    if (auto payload = note_error(slot, *doc.error)) out.errors.push_back(std::move(*payload));
    return; // the last good content stays in force
  }
  slot.published_error.clear();
  auto& good = slot.last_good;
  auto keys = changed_keys(good.content.value, doc.content);
  bool existed = good.exists;
  good.exists = doc.exists;
  if (keys.empty()) return; // identical or formatting-only
  good.content.value = std::move(doc.content);
  if (!should_notify(keys)) return; // restart-required keys only
  out.kept.push_back(settings_change{good.path, good.scope, change_of(existed, good.exists), std::move(keys)});
}

scan_result rescan(std::vector<file_slot>& slots) {
  scan_result out;
  for (auto& s : slots) rescan_one(s, out);
  return out;
}

/// An event goes to every subscriber and stays in the replay ring: a file
/// with half a million keys, or one key of a megabyte, must not make one of
/// that size. The gating actor still gets every key (settings_update).
constexpr std::size_t max_event_keys = 100;
constexpr std::size_t max_event_key_bytes = 256;

std::vector<std::string> event_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < keys.size() && i < max_event_keys; ++i) {
    auto k = keys[i];
    if (k.size() > max_event_key_bytes) {
      std::size_t cut = max_event_key_bytes;
      while (cut > 0 && (static_cast<unsigned char>(k[cut]) & 0xC0) == 0x80)
        --cut; // on a character boundary
      k.resize(cut);
      k += "...";
    }
    out.push_back(std::move(k));
  }
  return out;
}

events::settings_changed changed_event(uint64_t batch, const std::vector<settings_change>& changes) {
  events::settings_changed out{batch, {}};
  for (auto& c : changes) {
    events::settings_file_change one{replace_invalid_utf8(c.path), c.scope, to_string(c.change), event_keys(c.keys),
                                     std::nullopt};
    if (c.keys.size() > max_event_keys) one.keys_omitted = c.keys.size() - max_event_keys;
    out.changes.push_back(std::move(one));
  }
  return out;
}

void send_update(watcher_self self, std::vector<settings_change> changes, bool forced) {
  auto& st = self->state;
  if (st.target)
    self->send(st.target, settings_update{st.batch, std::move(changes), files_of(st.slots), forced});
}

/// Re-reads everything now and tells what changed (always, when forced).
void drain_watcher(watcher_self self, bool forced) {
  auto& st = self->state;
  auto found = rescan(st.slots);
  for (auto& e : found.errors) publish(self, st.bus, std::move(e));
  if (found.kept.empty() && !forced) return;
  ++st.batch;
  // Published before the gating actor has the update: what it sets off
  // (reconcile_started, client_update) reaches the bus after this, so the
  // stream of events tells cause before effect.
  if (!found.kept.empty()) publish(self, st.bus, changed_event(st.batch, found.kept));
  send_update(self, std::move(found.kept), forced);
}

/// Starts the inotify adapter; its callbacks only send messages. The actor
/// is held weakly: the watch lives in the actor's state.
void start_inotify(watcher_self self) {
  std::vector<std::filesystem::path> paths;
  for (auto& s : self->state.slots) paths.push_back(s.file.path);
  caf::actor_addr me = self->address();
  auto bus = self->state.bus;
  auto on_change = [me](const std::string& path) {
    if (auto a = caf::actor_cast<caf::actor>(me)) caf::anon_send(a, atom::fs_event_v, path);
  };
  auto on_error = [bus](const std::string& raw) {
    // It names directories, which may hold any bytes.
    auto message = escape_for_display(raw);
    spdlog::warn("settings watcher: {}", message);
    if (bus) caf::anon_send(bus, atom::publish_v, event_payload{events::settings_error{"", "", 0, 0, message}});
  };
  try {
    self->state.watch = std::make_unique<io::inotify_watch>(std::move(paths), on_change, on_error);
  } catch (const std::exception& e) {
    on_error(std::string("settings files are not watched: ") + e.what());
  }
}

watcher_actor::behavior_type watcher(watcher_self self, watcher_options opts, gating_actor target,
                                     event_bus_actor bus) {
  auto& st = self->state;
  st.target = std::move(target);
  st.bus = std::move(bus);
  st.debounce = opts.debounce;
  for (auto& f : opts.files) st.slots.push_back(file_slot{std::move(f), {}, {}});
  // Watch first, read second: an edit in between is then seen as an event.
  if (opts.use_inotify) start_inotify(self);
  for (auto& s : st.slots)
    if (auto err = load_initial(s)) publish(self, st.bus, std::move(*err));
  send_update(self, {}, true);
  return {
    [self](atom::fs_event, const std::string&) {
      auto& st = self->state;
      st.pending = true;
      self->delayed_send(self, st.debounce, atom::debounce_v, ++st.token);
    },
    [self](atom::debounce, uint64_t token) {
      auto& st = self->state;
      if (!st.pending || token != st.token) return; // superseded
      st.pending = false;
      drain_watcher(self, false);
    },
    [self](atom::reload) {
      auto& st = self->state;
      ++st.token; // cancels the pending timer
      st.pending = false;
      drain_watcher(self, true);
      return true;
    },
    [self](atom::snapshot) { return files_of(self->state.slots); },
  };
}

} // namespace

events::settings_error settings_error_event(const settings_error& e, config_scope scope) {
  // A path that is not UTF-8 would make every later dump of the event throw.
  return {replace_invalid_utf8(e.path), to_string(scope), e.line, e.column, e.message};
}

watcher_actor spawn_watcher(caf::actor_system& sys, watcher_options opts, gating_actor target,
                            event_bus_actor bus) {
  return sys.spawn(watcher, std::move(opts), std::move(target), std::move(bus));
}

} // namespace mcprt
