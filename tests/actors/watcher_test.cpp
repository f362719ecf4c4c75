// The settings watcher: debounced, semantic, restart-required keys
// suppressed, a broken file keeping the last good content. Most tests run
// on CAF's test coordinator with real temporary files: events are injected, the clock is
// advanced by hand, nothing waits on real time. The last test goes through
// the real watcher: a threaded actor system, inotify and rename saves.

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/event_bus.hpp"
#include "actors/watcher.hpp"
#include "actor_test_support.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;
using keys = std::vector<std::string>;

namespace {

// -- helpers ------------------------------------------------------------------------

class temp_dir {
public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "mcprt-watcher-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

/// An editor's save: a temp file next to the target, renamed over it.
void rename_save(const fs::path& p, const std::string& text) {
  auto tmp = p;
  tmp += ".swp";
  write_text(tmp, text);
  fs::rename(tmp, p);
}

/// What the fake gating actor and the bus subscriber saw. Shared with the
/// actors; the condition serves the threaded test.
struct recording {
  std::mutex m;
  std::condition_variable cv;
  std::vector<settings_update> updates;
  std::vector<event> events;

  template <class Pred>
  bool wait(Pred pred, std::chrono::seconds deadline = 10s) {
    std::unique_lock<std::mutex> lk(m);
    return cv.wait_for(lk, deadline, [&] { return pred(*this); });
  }
};

using recording_ptr = std::shared_ptr<recording>;

/// A gating actor that records the updates it receives.
gating_actor::behavior_type recording_gate(gating_actor::pointer, recording_ptr rec) {
  return {
    [rec](settings_update& u) {
      std::lock_guard<std::mutex> lk(rec->m);
      rec->updates.push_back(std::move(u));
      rec->cv.notify_all();
    },
    [](atom::approve, const std::string&) { return true; },
    [](atom::reject, const std::string&) { return true; },
    [](atom::reason, const std::string& name) { return unavailability{name, "", ""}; },
    [](atom::config, const std::string& name) -> caf::result<server_config> {
      return make_error(errc::unknown_server, name);
    },
    [](atom::attach, const reconciler_actor&, const std::vector<server_config>&) {},
    [](atom::detach, const reconciler_actor&) {},
    [](atom::start) {},
    [](atom::snapshot) { return gating_snapshot{}; },
    [](atom::fs_event, const std::string&) {},
    [](atom::debounce, uint64_t) {},
    [](const definitions_offered&) {},
  };
}

/// A bus subscriber that records the events it receives.
event_subscriber_actor::behavior_type recording_sink(event_subscriber_actor::pointer, recording_ptr rec) {
  return {
    [rec](event& ev) {
      std::lock_guard<std::mutex> lk(rec->m);
      rec->events.push_back(std::move(ev));
      rec->cv.notify_all();
    },
  };
}

const settings_file* find_file(const settings_update& u, const fs::path& p) {
  for (auto& f : u.files)
    if (f.path == p.string()) return &f;
  return nullptr;
}

std::string servers_json(const std::vector<std::string>& names, const std::string& extra = "") {
  std::string out = R"({"mcpServers": {)";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += "\"" + names[i] + R"(": {"command": "srv-)" + names[i] + "\"}";
  }
  out += "}" + extra + "}";
  return out;
}

// -- deterministic fixture ----------------------------------------------------------

class Watcher : public actor_test {
protected:
  temp_dir dir;
  fs::path user = dir.path() / "home" / ".mcprt" / "settings.json";
  fs::path project = dir.path() / "ws" / ".mcp.json";
  fs::path workspace = dir.path() / "ws" / ".mcprt" / "settings.json";
  recording_ptr rec = std::make_shared<recording>();
  event_bus_actor bus;
  gating_actor gate;
  watcher_actor w;

  void SetUp() override {
    bus = track(spawn_event_bus(sys));
    gate = track(sys.spawn(recording_gate, rec));
    auto sink = track(sys.spawn(recording_sink, rec));
    ASSERT_TRUE(ask<uint64_t>(bus, atom::subscribe_v, sink, std::vector<event_kind>{}));
  }

  void start(std::chrono::milliseconds debounce = 300ms) {
    watcher_options opts;
    opts.files = {{config_scope::user, user}, {config_scope::project, project},
                  {config_scope::workspace, workspace}};
    opts.debounce = debounce;
    opts.use_inotify = false;
    w = track(spawn_watcher(sys, std::move(opts), gate, bus));
    sched.run();
  }

  void fs_event(const fs::path& p) {
    self->send(w, atom::fs_event_v, p.string());
    sched.run();
  }

  void advance(std::chrono::milliseconds d) {
    sched.clock().advance_time(d);
    sched.run();
  }

  /// An event for `p`, and the debounce running out.
  void saved(const fs::path& p) {
    fs_event(p);
    advance(300ms);
  }

  /// Updates and events recorded since the last call.
  std::vector<settings_update> updates() {
    sched.run();
    return std::exchange(rec->updates, {});
  }
  std::vector<event> events() {
    sched.run();
    return std::exchange(rec->events, {});
  }
  std::vector<event> events_of(event_kind k) {
    std::vector<event> out;
    for (auto& e : events())
      if (e.kind == k) out.push_back(std::move(e));
    return out;
  }
};

} // namespace

// -- start ----------------------------------------------------------------------------

TEST_F(Watcher, StartSendsOneForcedUpdateWithEveryFile) {
  write_text(workspace, servers_json({"a"}));
  start();
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].batch, 0u);
  EXPECT_TRUE(ups[0].forced);
  EXPECT_TRUE(ups[0].changes.empty());
  ASSERT_EQ(ups[0].files.size(), 3u);
  auto* ws = find_file(ups[0], workspace);
  ASSERT_NE(ws, nullptr);
  EXPECT_TRUE(ws->exists);
  EXPECT_EQ(ws->scope, "workspace");
  EXPECT_EQ(ws->content.value, json::parse(servers_json({"a"})));
  auto* u = find_file(ups[0], user);
  ASSERT_NE(u, nullptr);
  EXPECT_FALSE(u->exists);
  EXPECT_EQ(u->scope, "user");
  EXPECT_EQ(u->content.value, json::object());
  EXPECT_EQ(find_file(ups[0], project)->scope, "project");
  EXPECT_TRUE(events().empty());
  // Nothing more without events, however long we wait.
  advance(10s);
  EXPECT_TRUE(updates().empty());
}

TEST_F(Watcher, AFileBrokenAtStartIsReportedAndCountsAsAbsent) {
  write_text(workspace, "{\n  \"mcpServers\": {\n    \"a\": \n");
  start();
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].data.value.at("path"), workspace.string());
  EXPECT_EQ(errs[0].data.value.at("scope"), "workspace");
  EXPECT_GT(errs[0].data.value.at("line").get<int>(), 0);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_FALSE(find_file(ups[0], workspace)->exists);
  EXPECT_EQ(find_file(ups[0], workspace)->content.value, json::object());
  // Fixed: it appears.
  write_text(workspace, servers_json({"a"}));
  saved(workspace);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].change, file_change::created);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcpServers.a.command"});
}

// -- debounce -------------------------------------------------------------------------

TEST_F(Watcher, ABurstOfEventsGivesOneUpdateAfterTheDebounce) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  write_text(workspace, servers_json({"a", "b"}));
  for (int i = 0; i < 5; ++i) {
    fs_event(workspace);
    advance(100ms); // within the debounce: the timer starts again each time
  }
  EXPECT_TRUE(updates().empty()) << "no update before the debounce ran out";
  advance(199ms); // 299 ms after the last event
  EXPECT_TRUE(updates().empty());
  advance(1ms);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].batch, 1u);
  EXPECT_FALSE(ups[0].forced);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].path, workspace.string());
  EXPECT_EQ(ups[0].changes[0].scope, "workspace");
  EXPECT_EQ(ups[0].changes[0].change, file_change::modified);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcpServers.b.command"});
  EXPECT_EQ(find_file(ups[0], workspace)->content.value, json::parse(servers_json({"a", "b"})));
  auto changed = events_of(event_kind::settings_changed);
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].data.value,
            (json{{"batch", 1},
                  {"changes", json::array({{{"path", workspace.string()},
                                            {"scope", "workspace"},
                                            {"change", "modified"},
                                            {"keys", {"mcpServers.b.command"}}}})}}));
  // The stale timers of the burst did nothing, and nothing is left pending.
  advance(10s);
  EXPECT_TRUE(updates().empty());
}

TEST_F(Watcher, AnEventForAnUnrelatedPathOnlyRereads) {
  start();
  updates();
  saved(dir.path() / "ws" / "README.md");
  EXPECT_TRUE(updates().empty());
  EXPECT_TRUE(events().empty());
}

// -- semantic diff ----------------------------------------------------------------------

TEST_F(Watcher, IdenticalSaveAndFormattingOnlyChangeEmitNothing) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  saved(workspace); // identical save (a self-write looks the same)
  EXPECT_TRUE(updates().empty());
  write_text(workspace,
             "// reformatted\n{\n    \"mcpServers\" : {\n        \"a\" : { \"command\" : \"srv-a\" }\n    }\n}\n");
  saved(workspace);
  EXPECT_TRUE(updates().empty());
  EXPECT_TRUE(events().empty());
}

TEST_F(Watcher, HalfWrittenFileKeepsTheLastGoodContentAndReportsWhere) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  write_text(workspace, "{\n  \"mcpServers\": {\n    \"b\": {\"comm");
  saved(workspace);
  EXPECT_TRUE(updates().empty());
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  auto& d = errs[0].data.value;
  EXPECT_EQ(d.at("path"), workspace.string());
  EXPECT_EQ(d.at("scope"), "workspace");
  EXPECT_EQ(d.at("line"), 3);
  EXPECT_GT(d.at("column").get<int>(), 0);
  EXPECT_FALSE(d.at("message").get<std::string>().empty());
  // Still broken, same error: not reported again.
  saved(workspace);
  EXPECT_TRUE(events().empty());
  // The snapshot still holds the last good content.
  auto snap = ask<std::vector<settings_file>>(w, atom::snapshot_v);
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 3u);
  EXPECT_EQ((*snap)[2].content.value, json::parse(servers_json({"a"})));
  // Another file changes meanwhile: its update carries the OLD workspace content.
  write_text(user, servers_json({"u"}));
  saved(user);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].path, user.string());
  EXPECT_EQ(ups[0].changes[0].change, file_change::created);
  EXPECT_TRUE(find_file(ups[0], workspace)->exists);
  EXPECT_EQ(find_file(ups[0], workspace)->content.value, json::parse(servers_json({"a"})));
  // Fixed: the difference to the last good content is reported.
  write_text(workspace, servers_json({"a", "b"}));
  saved(workspace);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].change, file_change::modified);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcpServers.b.command"});
  EXPECT_EQ(find_file(ups[0], workspace)->content.value, json::parse(servers_json({"a", "b"})));
  // Broken the same way again after a fix: reported again.
  write_text(workspace, "{\n  \"mcpServers\": {\n    \"b\": {\"comm");
  saved(workspace);
  EXPECT_EQ(events_of(event_kind::settings_error).size(), 1u);
}

TEST_F(Watcher, WrongTypesAreErrorsToo) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  write_text(workspace, "{\n  \"mcpServers\": {\"a\": {\"command\": 42}}\n}\n");
  saved(workspace);
  EXPECT_TRUE(updates().empty());
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].data.value.at("line"), 2);
}

// -- hostile files: an error keeps the last good content -------------------------

TEST_F(Watcher, ALatin1ByteOnAHotEditIsAnErrorWithItsPositionAndTheLastGoodStays) {
  write_text(project, servers_json({"a"}));
  start();
  updates();
  write_text(project, "{\n  \"mcpServers\": {\"a\": {\"command\": \"srv-a\"}, \"caf\xE9\": {\"command\": \"x\"}}\n}\n");
  saved(project);
  EXPECT_TRUE(updates().empty());
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  auto& d = errs[0].data.value;
  EXPECT_EQ(d.at("path"), project.string());
  EXPECT_EQ(d.at("scope"), "project");
  EXPECT_EQ(d.at("line"), 2);
  EXPECT_EQ(d.at("column"), 49);
  EXPECT_NE(d.at("message").get<std::string>().find("UTF-8"), std::string::npos) << d.dump();
  auto snap = ask<std::vector<settings_file>>(w, atom::snapshot_v);
  ASSERT_TRUE(snap);
  EXPECT_EQ((*snap)[1].content.value, json::parse(servers_json({"a"})));
  // A later good save applies.
  write_text(project, servers_json({"a", "b"}));
  saved(project);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].changes.at(0).keys, keys{"mcpServers.b.command"});
}

TEST_F(Watcher, ALatin1ByteAtStartIsReportedAndTheWatcherRuns) {
  write_text(project, "{\"mcpServers\": {\"caf\xE9\": {\"command\": \"x\"}}}");
  start();
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].data.value.at("line"), 1);
  EXPECT_EQ(errs[0].data.value.at("column"), 21);
  ASSERT_EQ(updates().size(), 1u);
  write_text(project, servers_json({"p"}));
  saved(project);
  EXPECT_EQ(updates().size(), 1u);
}

TEST_F(Watcher, ASymlinkLoopOnAHotEditIsAnErrorNotADeletion) {
  write_text(project, servers_json({"p"}));
  start();
  updates();
  auto other = project.parent_path() / "loop.json";
  fs::remove(project);
  fs::create_symlink(other, project);
  fs::create_symlink(project, other);
  saved(project);
  EXPECT_TRUE(updates().empty()) << "the loop must not take p away";
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].data.value.at("message").get<std::string>().find("symbolic links"), std::string::npos);
  auto snap = ask<std::vector<settings_file>>(w, atom::snapshot_v);
  ASSERT_TRUE(snap);
  EXPECT_TRUE((*snap)[1].exists);
  EXPECT_EQ((*snap)[1].content.value, json::parse(servers_json({"p"})));
  // A dangling symlink is a file that does not exist: its servers go.
  fs::remove(other);
  saved(project);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].changes.at(0).change, file_change::deleted);
}

TEST_F(Watcher, AFifoNeverBlocksTheWatcherAtStartOrOnAHotEdit) {
  fs::create_directories(project.parent_path());
  ASSERT_EQ(::mkfifo(project.c_str(), 0600), 0);
  start(); // a blocking open would hang here: nobody ever writes the FIFO
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].data.value.at("message").get<std::string>().find("FIFO"), std::string::npos);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_FALSE(find_file(ups[0], project)->exists);
  fs::remove(project);
  write_text(project, servers_json({"p"}));
  saved(project);
  ASSERT_EQ(updates().size(), 1u);
  // A FIFO renamed over the good file: an error, and p stays.
  auto fifo = project.parent_path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::rename(fifo, project);
  saved(project);
  EXPECT_TRUE(updates().empty());
  EXPECT_EQ(events_of(event_kind::settings_error).size(), 1u);
  EXPECT_EQ(ask<bool>(w, atom::reload_v), true);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(find_file(ups[0], project)->content.value, json::parse(servers_json({"p"})));
}

TEST_F(Watcher, ASymlinkToADeviceIsNotRead) {
  write_text(project, servers_json({"p"}));
  start();
  updates();
  fs::remove(project);
  fs::create_symlink("/dev/zero", project);
  saved(project); // reading /dev/zero would never end
  EXPECT_TRUE(updates().empty());
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_NE(errs[0].data.value.at("message").get<std::string>().find("character device"), std::string::npos);
}

TEST_F(Watcher, ErrorPayloadsNeverQuoteASecret) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  write_text(workspace, "{\"mcpServers\": {\"a\": {\"command\": \"srv-a\", \"env\": {\"TOKEN\": \"hunter2\n");
  saved(workspace);
  auto errs = events_of(event_kind::settings_error);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].data.value.dump().find("hunter2"), std::string::npos) << errs[0].data.value.dump();
}

TEST_F(Watcher, ChangedEventsStaySmallWhateverTheFileHolds) {
  start();
  updates();
  std::vector<std::string> names;
  for (int i = 0; i < 150; ++i)
    names.push_back("s" + std::to_string(1000 + i));
  auto long_key = std::string(1000, 'k');
  write_text(workspace, servers_json(names, ", \"" + long_key + "\": 1"));
  saved(workspace);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].changes.at(0).keys.size(), 151u); // the gating actor gets them all
  auto changed = events_of(event_kind::settings_changed);
  ASSERT_EQ(changed.size(), 1u);
  auto& c = changed[0].data.value.at("changes").at(0);
  EXPECT_EQ(c.at("keys").size(), 100u);
  EXPECT_EQ(c.at("keys_omitted"), 51);
  EXPECT_EQ(c.at("keys").at(0), std::string(256, 'k') + "..."); // sorted first, cut
  EXPECT_LT(changed[0].data.value.dump().size(), 100u * 300u);
}

// -- restart-required keys: when every changed key needs a restart, nothing is sent --------

TEST_F(Watcher, OnlyServerCommandChangedEmitsNothingButIsRecorded) {
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "old"})"));
  start();
  updates();
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "new"})"));
  saved(workspace);
  EXPECT_TRUE(updates().empty());
  EXPECT_TRUE(events().empty());
  auto snap = ask<std::vector<settings_file>>(w, atom::snapshot_v);
  ASSERT_TRUE(snap);
  EXPECT_EQ((*snap)[2].content.value.at("mcp").at("serverCommand"), "new");
  // The next hot change does not carry the restart-only key again.
  write_text(workspace, servers_json({"a", "x"}, R"(, "mcp": {"serverCommand": "new"})"));
  saved(workspace);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcpServers.x.command"});
}

TEST_F(Watcher, McpServersChangeIsForwardedWithItsKeys) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  write_text(workspace, R"({"mcpServers": {"a": {"command": "srv-a"}, "x": {"command": "y", "args": ["1"]}}})");
  saved(workspace);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].keys, (keys{"mcpServers.x.args", "mcpServers.x.command"}));
}

TEST_F(Watcher, McpAllowedAndExcludedChangesAreForwarded) {
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "s"})"));
  start();
  updates();
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "s", "allowed": ["a"]})"));
  saved(workspace);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcp.allowed"});
  write_text(workspace,
             servers_json({"a"}, R"(, "mcp": {"serverCommand": "s", "allowed": ["a"], "excluded": ["t*"]})"));
  saved(workspace);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].changes.at(0).keys, keys{"mcp.excluded"});
  // Mixed with a restart-only key: forwarded, with every changed key.
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "t", "allowed": []})"));
  saved(workspace);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].changes.at(0).keys, (keys{"mcp.allowed", "mcp.excluded", "mcp.serverCommand"}));
}

// -- change types -------------------------------------------------------------------------

TEST_F(Watcher, CreatedAndDeletedFiles) {
  start();
  updates();
  write_text(project, servers_json({"p"}));
  saved(project);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].change, file_change::created);
  EXPECT_EQ(ups[0].changes[0].scope, "project");
  EXPECT_TRUE(find_file(ups[0], project)->exists);
  fs::remove(project);
  saved(project);
  ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].change, file_change::deleted);
  EXPECT_EQ(ups[0].changes[0].keys, keys{"mcpServers.p.command"});
  EXPECT_FALSE(find_file(ups[0], project)->exists);
  EXPECT_EQ(find_file(ups[0], project)->content.value, json::object());
  auto changed = events_of(event_kind::settings_changed);
  ASSERT_EQ(changed.size(), 2u);
  EXPECT_EQ(changed[0].data.value.at("changes").at(0).at("change"), "created");
  EXPECT_EQ(changed[1].data.value.at("changes").at(0).at("change"), "deleted");
}

TEST_F(Watcher, SeveralFilesChangedInOneBurstGiveOneBatch) {
  start();
  updates();
  write_text(user, servers_json({"u"}));
  fs_event(user);
  write_text(workspace, servers_json({"w"}));
  fs_event(workspace);
  advance(300ms);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  ASSERT_EQ(ups[0].changes.size(), 2u);
  EXPECT_EQ(ups[0].changes[0].path, user.string());
  EXPECT_EQ(ups[0].changes[1].path, workspace.string());
}

// -- reload / snapshot ------------------------------------------------------------------------

TEST_F(Watcher, ReloadIsForcedEvenWithoutChanges) {
  write_text(workspace, servers_json({"a"}));
  start();
  updates();
  EXPECT_EQ(ask<bool>(w, atom::reload_v), true);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(ups[0].batch, 1u);
  EXPECT_TRUE(ups[0].forced);
  EXPECT_TRUE(ups[0].changes.empty());
  EXPECT_EQ(find_file(ups[0], workspace)->content.value, json::parse(servers_json({"a"})));
  EXPECT_TRUE(events().empty());
}

TEST_F(Watcher, ReloadCancelsThePendingDebounceAndCarriesTheChanges) {
  start();
  updates();
  write_text(workspace, servers_json({"a"}));
  fs_event(workspace);
  EXPECT_EQ(ask<bool>(w, atom::reload_v), true);
  auto ups = updates();
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_TRUE(ups[0].forced);
  ASSERT_EQ(ups[0].changes.size(), 1u);
  EXPECT_EQ(ups[0].changes[0].change, file_change::created);
  EXPECT_EQ(events_of(event_kind::settings_changed).size(), 1u);
  advance(1s); // the cancelled timer does nothing
  EXPECT_TRUE(updates().empty());
}

TEST_F(Watcher, SnapshotIsTheLastGoodContentInOrder) {
  write_text(user, servers_json({"u"}));
  start();
  auto snap = ask<std::vector<settings_file>>(w, atom::snapshot_v);
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->size(), 3u);
  EXPECT_EQ((*snap)[0].path, user.string());
  EXPECT_EQ((*snap)[0].scope, "user");
  EXPECT_TRUE((*snap)[0].exists);
  EXPECT_EQ((*snap)[1].path, project.string());
  EXPECT_FALSE((*snap)[1].exists);
  EXPECT_EQ((*snap)[2].scope, "workspace");
}

// -- through the real watcher: threads, inotify, rename saves ----------------------------------

namespace {

struct threaded_config : caf::actor_system_config {
  threaded_config() { add_mcprt_types(*this); }
};

} // namespace

TEST(WatcherLive, McpOnlyEditsReachTheTargetAndServerCommandOnlyEditsDoNot) {
  temp_dir dir;
  auto user = dir.path() / "home" / ".mcprt" / "settings.json";
  auto workspace = dir.path() / "ws" / ".mcprt" / "settings.json";
  // The user's directory does not exist yet: the watch must follow it.
  write_text(workspace, servers_json({"a"}, R"(, "mcp": {"serverCommand": "one"})"));
  threaded_config cfg;
  caf::actor_system sys{cfg};
  auto rec = std::make_shared<recording>();
  auto gate = sys.spawn(recording_gate, rec);
  auto bus = spawn_event_bus(sys);
  watcher_options opts;
  opts.files = {{config_scope::user, user}, {config_scope::workspace, workspace}};
  opts.debounce = 30ms;
  auto w = spawn_watcher(sys, opts, gate, bus);
  auto count_is = [](std::size_t n) { return [n](recording& r) { return r.updates.size() >= n; }; };
  // The initial update comes after the watch is armed.
  ASSERT_TRUE(rec->wait(count_is(1)));

  // 1. An MCP-only edit reaches the target.
  rename_save(workspace, servers_json({"a", "b"}, R"(, "mcp": {"serverCommand": "one"})"));
  ASSERT_TRUE(rec->wait(count_is(2)));

  // 2. An edit of only mcp.serverCommand ...
  rename_save(workspace, servers_json({"a", "b"}, R"(, "mcp": {"serverCommand": "two"})"));
  // 3. ... then an MCP edit in another file, in a directory created now.
  rename_save(user, servers_json({"u"}));
  ASSERT_TRUE(rec->wait(count_is(3)));

  auto ups = [&] {
    std::lock_guard<std::mutex> lk(rec->m);
    return rec->updates;
  }();
  for (auto a : {caf::actor_cast<caf::actor>(w), caf::actor_cast<caf::actor>(gate),
                 caf::actor_cast<caf::actor>(bus)})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  ASSERT_EQ(ups.size(), 3u);
  auto& first = ups[1];
  EXPECT_FALSE(first.forced);
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].path, workspace.string());
  EXPECT_EQ(first.changes[0].keys, keys{"mcpServers.b.command"});
  // The serverCommand edit produced no update of its own (the next one is
  // the user file's) and no change in any batch, although the watcher had
  // read it: the update carries it as the workspace file's content.
  auto& last = ups[2];
  EXPECT_EQ(last.batch, first.batch + 1);
  ASSERT_EQ(last.changes.size(), 1u);
  EXPECT_EQ(last.changes[0].path, user.string());
  EXPECT_EQ(last.changes[0].change, file_change::created);
  EXPECT_EQ(last.changes[0].keys, keys{"mcpServers.u.command"});
  auto* ws = find_file(last, workspace);
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(ws->content.value.at("mcp").at("serverCommand"), "two");
  EXPECT_EQ(ws->content.value.at("mcpServers").size(), 2u);
}
