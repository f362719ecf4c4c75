// Settings files are input from whoever wrote the repository (the hardening
// threat model). Black-box tests against the real daemon: `mcprt serve` on a
// temp workspace, real mcprt-test-server children, inotify on real files,
// events read over HTTP. Every wait is on a condition (a stdout line, an
// event, a snapshot field, a process exit) with a deadline.

#include <map>

#include <sys/stat.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

const std::string api_token = "sekrit-7c1f-hunter2";

/// Sent on a stream, replays the daemon's events from its start on.
const std::map<std::string, std::string> from_start{{"Last-Event-ID", "0"}};

json prefixed_server(const std::string& prefix) {
  return test_server_config({"--name-prefix", prefix});
}

class hostile_settings_test : public bare_daemon_test {
protected:
  void SetUp() override {
    bare_daemon_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", prefixed_server("echo_")}}}}.dump(2));
  }

  bool healthy() const {
    auto h = get_json("/healthz");
    return h.is_object() && h.value("ok", false);
  }

  bool pending(const std::string& name) const {
    return wait_until([&] { return server(name).value("reason", "") == "pending_approval"; });
  }

  /// The next settings_error for `file` (events from the daemon's start on).
  std::optional<json> settings_error_for(const fs::path& file, std::chrono::milliseconds timeout = 30s) {
    sse_stream events(port_, from_start);
    auto ev = events.wait_for("settings_error", [&](const json& d) { return d.value("path", "") == file.string(); },
                              timeout);
    if (!ev) return std::nullopt;
    return ev->j();
  }

  /// Edits user settings (adding a server named `marker`) and waits for its
  /// settings_changed: every event of earlier saves has been seen by then,
  /// in order, in `events.log`.
  bool mark(sse_stream& events, const std::string& marker) {
    auto settings = json::parse(slurp(user_settings()));
    settings["mcpServers"][marker] = prefixed_server(marker + "_");
    write_file(user_settings(), settings.dump(2));
    return events
      .wait_for("settings_changed",
                [&](const json& d) {
                  for (auto& c : d.value("changes", json::array()))
                    for (auto& k : c.value("keys", json::array()))
                      if (k.get<std::string>().find(marker) != std::string::npos) return true;
                  return false;
                })
      .has_value();
  }

  /// SIGTERM, then the daemon must be gone within `within`.
  void expect_prompt_stop(std::chrono::milliseconds within = 20s) {
    daemon_->signal(SIGTERM);
    auto code = daemon_->wait_exit(within);
    ASSERT_TRUE(code) << "SIGTERM did not stop the daemon; stderr:\n" << daemon_->err();
    EXPECT_EQ(*code, 0) << daemon_->err();
  }
};

/// A save as editors do it: a temp file renamed over the target.
void rename_save(const fs::path& p, const std::string& text) {
  auto tmp = p;
  tmp += ".tmp";
  write_file(tmp, text);
  fs::rename(tmp, p);
}

// -- invalid UTF-8 ------------------------------------------------------------------------------

TEST_F(hostile_settings_test, a_latin1_byte_at_start_is_an_error_with_its_position) {
  write_file(project_file(), "{\n  \"mcpServers\": {\"caf\xE9\": {\"command\": \"x\"}}\n}\n");
  ASSERT_TRUE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_EQ((*err)["line"], 2);
  EXPECT_EQ((*err)["column"], 22);
  EXPECT_NE(err->value("message", "").find("UTF-8"), std::string::npos) << err->dump();
  EXPECT_TRUE(connected("echo")) << get_json("/workspace/mcp").dump(2);
  // explain reads the same file: an error with its position, not an abort.
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json()) << describe(r);
  ASSERT_EQ(r.j["errors"].size(), 1u);
  EXPECT_EQ(r.j["errors"][0]["line"], 2);
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_NE(table.out.find(".mcp.json:2:22: "), std::string::npos) << table.out;
}

TEST_F(hostile_settings_test, a_latin1_byte_on_a_hot_edit_keeps_the_daemon_and_a_later_save_applies) {
  write_file(project_file(), json{{"mcpServers", {{"p1", prefixed_server("p1_")}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));
  ASSERT_TRUE(pending("p1")) << get_json("/workspace/mcp").dump(2);
  rename_save(project_file(), "{\"mcpServers\": {\"p1\": {\"command\": \"x\"}, \"caf\xE9\": {}}}");
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_EQ((*err)["line"], 1);
  EXPECT_EQ((*err)["column"], 45);
  EXPECT_TRUE(healthy());
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval"); // the last good config
  // The watcher is alive: a good save applies.
  rename_save(project_file(),
              json{{"mcpServers", {{"p1", prefixed_server("p1_")}, {"p2", prefixed_server("p2_")}}}}.dump(2));
  EXPECT_TRUE(pending("p2")) << get_json("/workspace/mcp").dump(2);
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

// -- depth ------------------------------------------------------------------------------------------

TEST_F(hostile_settings_test, deep_nesting_at_start_is_an_error_not_a_stack_overflow) {
  write_file(project_file(), "{\"mcpServers\": {\"p\": {\"x\": " + std::string(2'000'000, '[')
                               + std::string(2'000'000, ']') + "}}}");
  ASSERT_TRUE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_NE(err->value("message", "").find("nested deeper than 64"), std::string::npos) << err->dump();
  EXPECT_EQ((*err)["line"], 1);
  EXPECT_TRUE(connected("echo"));
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_TRUE(r.has_json());
  EXPECT_EQ(server_names(r.j), std::vector<std::string>{"echo"});
}

// -- what a path can point at ---------------------------------------------------------------------

TEST_F(hostile_settings_test, a_fifo_at_start_neither_blocks_the_start_nor_the_stop) {
  ASSERT_EQ(::mkfifo(project_file().c_str(), 0600), 0);
  ASSERT_TRUE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_NE(err->value("message", "").find("FIFO"), std::string::npos) << err->dump();
  EXPECT_EQ((*err)["line"], 0);
  EXPECT_TRUE(connected("echo"));
  auto r = explain();
  EXPECT_EQ(r.code, 2) << describe(r);
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_fifo_on_a_hot_edit_keeps_the_daemon_responsive_and_stoppable) {
  write_file(project_file(), json{{"mcpServers", {{"p1", prefixed_server("p1_")}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));
  auto fifo = ws_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::rename(fifo, project_file());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_NE(err->value("message", "").find("FIFO"), std::string::npos);
  EXPECT_TRUE(healthy());
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval"); // the last good config
  {
    // The watcher still reads the other files.
    sse_stream events(port_, from_start);
    EXPECT_TRUE(mark(events, "after_fifo"));
  }
  EXPECT_TRUE(connected("after_fifo"));
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_symlink_to_dev_zero_is_not_read) {
  fs::create_symlink("/dev/zero", project_file());
  ASSERT_TRUE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_NE(err->value("message", "").find("character device"), std::string::npos) << err->dump();
  EXPECT_TRUE(connected("echo"));
  // On a hot edit as well: a good file, then the device again.
  fs::remove(project_file());
  write_file(project_file(), json{{"mcpServers", {{"p1", prefixed_server("p1_")}}}}.dump(2));
  ASSERT_TRUE(pending("p1"));
  auto tmp = ws_ / "zero";
  fs::create_symlink("/dev/zero", tmp);
  fs::rename(tmp, project_file());
  {
    sse_stream events(port_, from_start);
    ASSERT_TRUE(mark(events, "after_zero"));
    int errors = 0;
    for (auto& ev : events.log)
      errors += ev.kind == "settings_error" && ev.j().value("path", "") == project_file().string();
    EXPECT_EQ(errors, 2);
  }
  EXPECT_EQ(server("p1").value("reason", ""), "pending_approval");
  ASSERT_NO_FATAL_FAILURE(expect_prompt_stop());
}

TEST_F(hostile_settings_test, a_symlink_loop_on_a_hot_edit_keeps_the_servers_of_that_file_running) {
  write_file(project_file(), json{{"mcpServers", {{"project-tools", prefixed_server("project_")}}}}.dump(2));
  auto approved = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(approved.code, 0) << describe(approved);
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("project-tools")) << get_json("/workspace/mcp").dump(2);
  auto pid = server("project-tools")["pid"];
  ASSERT_TRUE(pid.is_number_integer());
  // .mcp.json -> loop.json -> .mcp.json
  auto loop = ws_ / "loop.json";
  fs::create_symlink(project_file(), loop);
  auto tmp = ws_ / "link.tmp";
  fs::create_symlink(loop, tmp);
  fs::rename(tmp, project_file());
  sse_stream events(port_, from_start);
  ASSERT_TRUE(mark(events, "after_loop"));
  bool reported = false;
  for (auto& ev : events.log) {
    auto d = ev.j();
    if (ev.kind == "settings_error" && d.value("path", "") == project_file().string())
      reported = d.value("message", "").find("symbolic links") != std::string::npos;
    if (ev.kind == "settings_changed") {
      for (auto& c : d.value("changes", json::array()))
        EXPECT_NE(c.value("path", ""), project_file().string()) << "the loop changed .mcp.json's servers: " << d;
    }
  }
  EXPECT_TRUE(reported);
  ASSERT_TRUE(connected("after_loop"));
  auto still = server("project-tools");
  EXPECT_EQ(still.value("status", ""), "connected") << still;
  EXPECT_EQ(still["pid"], pid) << "project-tools was restarted or stopped";
}

// -- what is shown -------------------------------------------------------------------------------

TEST_F(hostile_settings_test, a_half_typed_secret_never_reaches_events_explain_or_the_log) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("echo"));
  auto half_typed = "{\n  \"mcpServers\": {\n    \"echo\": {\"command\": \"" + test_server
                    + "\", \"env\": {\"API_TOKEN\": \"" + api_token + "\n";
  write_file(user_settings(), half_typed);
  auto err = settings_error_for(user_settings());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_EQ((*err)["line"], 3);
  EXPECT_EQ(err->dump().find("hunter2"), std::string::npos) << err->dump();
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_EQ(table.out.find("hunter2"), std::string::npos) << table.out;
  EXPECT_EQ(table.err.find("hunter2"), std::string::npos) << table.err;
  auto js = explain();
  EXPECT_EQ(js.code, 2);
  EXPECT_EQ(js.out.find("hunter2"), std::string::npos) << js.out;
  // The whole event history and the daemon's log.
  sse_stream events(port_, from_start);
  ASSERT_TRUE(events.wait_for("settings_error"));
  for (auto& ev : events.log)
    EXPECT_EQ(ev.data.find("hunter2"), std::string::npos) << ev.data;
  EXPECT_EQ(get_json("/workspace/mcp").dump().find("hunter2"), std::string::npos);
  EXPECT_EQ(daemon_->err().find("hunter2"), std::string::npos) << daemon_->err();
  EXPECT_TRUE(connected("echo")); // the last good config stays
}

TEST_F(hostile_settings_test, control_characters_in_server_names_are_refused_and_never_shown_raw) {
  // Valid JSON: the escapes are decoded into ESC and a line break.
  write_file(project_file(), R"({
  "mcpServers": {
    "\u001b[2J\u001b[H": {"command": "x"},
    "a\nINFO forged line": {"command": "x"}
  }
})");
  write_file(workspace_settings(), R"({"mcp": {"excluded": ["\u001b]0;title\u0007", "b\nWARN forged"]}})");
  ASSERT_TRUE(start());
  auto err = settings_error_for(project_file());
  ASSERT_TRUE(err) << daemon_->err();
  EXPECT_EQ((*err)["line"], 3);
  auto message = err->value("message", "");
  EXPECT_NE(message.find("printable"), std::string::npos) << message;
  for (char c : message)
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << message;
  EXPECT_TRUE(connected("echo"));
  auto snapshot = get_json("/workspace/mcp");
  EXPECT_EQ(server_names(snapshot), std::vector<std::string>{"echo"});
  auto table = mcprt({"explain", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(table.code, 2) << describe(table);
  EXPECT_EQ(table.out.find('\x1b'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find('\x07'), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\nINFO forged"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("\nWARN forged"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\\x1b]0;title\\x07"), std::string::npos) << table.out; // shown, escaped
  auto js = explain();
  ASSERT_TRUE(js.has_json()) << describe(js);
  EXPECT_EQ(js.j["gating"]["excluded"][1], "b\nWARN forged"); // JSON carries it exactly
  auto log = daemon_->err();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(log.find("\nINFO forged"), std::string::npos) << log;
}

} // namespace
} // namespace mcprt_cli_test
