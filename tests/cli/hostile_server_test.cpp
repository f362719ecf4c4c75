// Servers are untrusted processes (issue #13, section 3), black-box against
// the real daemon: real mcprt-test-server children that write bytes which
// are not UTF-8 into stderr, a tool result, tool descriptions, serverInfo and
// a raw stdout line, over stdio and over streamable HTTP. The snapshot keeps
// answering 200 with valid UTF-8, the event stream keeps going, tool calls
// answer, and log lines stay lines.
//
// Also here: the fingerprint the daemon shows (a keyed digest, never the
// hash over env and headers values) and that `explain` shows the same one.

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <sys/stat.h>

#include "core/fingerprint.hpp"
#include "core/server_config.hpp"
#include "core/untrusted_text.hpp"
#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

// What the test server's --invalid-utf8 turns into after replacement.
const std::string replacement = "\xEF\xBF\xBD";

bool valid_utf8(const std::string& s) {
  return !mcprt::first_invalid_utf8(s).has_value();
}

/// Control characters a log line must never carry raw (ESC clears a
/// terminal, CR overwrites a line); newlines only end lines.
bool has_raw_control(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\n') || u == 0x7f;
  });
}

class hostile_server_test : public graceful_daemon_test {
protected:
  /// 200, valid UTF-8, parses: what the issue's \xff broke.
  void expect_snapshot_answers() {
    auto r = get("/workspace/mcp");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_TRUE(valid_utf8(r->body)) << r->body;
    EXPECT_FALSE(json::parse(r->body, nullptr, false).is_discarded()) << r->body;
  }

  httplib::Result call(const std::string& server, const std::string& tool, const json& args) {
    return post("/workspace/mcp/tools/call", json{{"server", server}, {"tool", tool}, {"arguments", args}}.dump());
  }
};

TEST_F(hostile_server_test, invalid_utf8_from_a_stdio_server_breaks_neither_snapshot_nor_events_nor_calls) {
  write_file(user_settings(),
             json{{"mcpServers",
                   {{"bad", test_server_config({"--invalid-utf8", "stdout,result,description,server-info,stderr"})},
                    {"crashy", test_server_config({"--invalid-utf8", "stderr", "--crash-after-ms", "1500"})},
                    {"good", test_server_config({})}}}}
               .dump(2));
  ASSERT_TRUE(start());
  sse_stream events(port_);
  ASSERT_EQ(events.status(), 200);
  ASSERT_TRUE(status_is("bad", "connected")) << snapshot().dump(2);
  ASSERT_TRUE(status_is("good", "connected")) << snapshot().dump(2);
  expect_snapshot_answers();

  // A Latin-1 byte in the result costs a character, not the call.
  auto r = call("bad", "echo", {{"text", "hi"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(valid_utf8(r->body)) << r->body;
  auto result = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(result.is_object()) << r->body;
  EXPECT_EQ(result["content"][0]["text"], "hi caf" + replacement + " " + replacement + replacement + " " + replacement)
      << r->body;

  // The crash report quotes the server's stderr: the event carries it,
  // replaced, and the stream goes on.
  auto crash = events.wait_for(
      "client_update",
      [](const json& d) {
        return d.value("server", "") == "crashy" && d.value("error", "").find("last stderr") != std::string::npos;
      },
      60s);
  ASSERT_TRUE(crash) << "no crash event; seen " << events.log.size() << " events";
  EXPECT_NE(crash->data.find("caf" + replacement), std::string::npos) << crash->data;
  for (auto& frame : events.raw_frames) EXPECT_TRUE(valid_utf8(frame)) << frame;
  expect_snapshot_answers();

  auto restarted = post("/workspace/mcp/good/restart", "{}");
  ASSERT_TRUE(restarted);
  EXPECT_EQ(restarted->status, 200) << restarted->body;
  auto after = events.wait_for("client_update", [](const json& d) {
    return d.value("server", "") == "good" && d.value("status", "") == "connected";
  });
  EXPECT_TRUE(after) << "the event stream stopped after the bad output";
  EXPECT_FALSE(events.ended());

  // The replay of everything so far is valid too.
  sse_stream replay(port_, {{"Last-Event-ID", "0"}});
  ASSERT_EQ(replay.status(), 200);
  ASSERT_TRUE(replay.wait_for("client_update", [](const json& d) {
    return d.value("server", "") == "crashy" && d.value("error", "").find("last stderr") != std::string::npos;
  }));
  for (auto& frame : replay.raw_frames) EXPECT_TRUE(valid_utf8(frame)) << frame;
  expect_snapshot_answers();

  // The daemon's log lines quote the same stderr: escaped, one per line.
  ASSERT_TRUE(daemon_->err_contains("last stderr"));
  stop();
}

TEST_F(hostile_server_test, daemon_log_lines_quote_server_output_escaped) {
  write_file(user_settings(),
             json{{"mcpServers",
                   {{"crashy", test_server_config({"--invalid-utf8", "stderr", "--crash-after-ms", "500"})}}}}
               .dump(2));
  ASSERT_TRUE(start({"--log-level", "debug"}));
  ASSERT_TRUE(daemon_->err_contains("last stderr", 60s)) << daemon_->err();
  auto log = daemon_->err();
  EXPECT_TRUE(valid_utf8(log)) << log;
  EXPECT_FALSE(has_raw_control(log)) << log;
  // Escaped once here; the daemon's own log sink may escape the backslash
  // again, so only the escape's tail is certain.
  EXPECT_NE(log.find("xe9"), std::string::npos) << log;
}

TEST_F(hostile_server_test, invalid_utf8_over_streamable_http_with_sse_responses) {
  spawned http_server({"--http", "0", "--sse-responses", "--invalid-utf8", "result,description,server-info"}, home_,
                      {}, test_server);
  auto first = http_server.line(30s);
  ASSERT_TRUE(first && first->rfind("listening on ", 0) == 0) << first.value_or("<none>") << http_server.err();
  auto url = first->substr(std::string("listening on ").size());
  write_file(user_settings(), json{{"mcpServers", {{"remote", {{"httpUrl", url}}}}}}.dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(status_is("remote", "connected")) << snapshot().dump(2);
  expect_snapshot_answers();
  auto r = call("remote", "echo", {{"text", "over http"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(valid_utf8(r->body)) << r->body;
  EXPECT_NE(r->body.find("over http caf" + replacement), std::string::npos) << r->body;
  stop();
  http_server.signal(SIGTERM);
  http_server.wait_exit(20s);
}

// -- the fingerprint the daemon shows ------------------------------------------

class shown_fingerprint_test : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    server_ = test_server_config({"--tools", "1"});
    server_["env"] = {{"PIN", "4711"}};
    write_file(user_settings(), json{{"mcpServers", {{"echo", server_}}}}.dump(2));
  }

  /// The id mcprt uses inside (pool keys): SHA-256 over env values too.
  std::string internal_id() const {
    auto r = mcprt::parse_server_config("echo", server_, mcprt::config_scope::user);
    return mcprt::connection_id(*r.config);
  }

  std::string snapshot_fingerprint() const { return server("echo").value("fingerprint", ""); }

  std::string explain_fingerprint() const {
    auto r = explain();
    EXPECT_EQ(r.code, 0) << describe(r);
    const json* s = find_server(r.j, "echo");
    return s ? s->value("fingerprint", "") : "";
  }

  fs::path key_file() const { return home_ / ".mcprt" / "fingerprint.key"; }

  json server_;
};

TEST_F(shown_fingerprint_test, is_a_keyed_digest_that_events_snapshot_and_explain_agree_on) {
  ASSERT_TRUE(start());
  sse_stream events(port_, {{"Last-Event-ID", "0"}});
  ASSERT_EQ(events.status(), 200);
  ASSERT_TRUE(status_is("echo", "connected"));
  auto shown = snapshot_fingerprint();
  EXPECT_TRUE(std::regex_match(shown, std::regex("^echo::[0-9a-f]{16}$"))) << shown;
  EXPECT_NE(shown, internal_id()) << "the snapshot shows the unkeyed hash over env values";
  // The key: created on first use, private.
  struct stat st {};
  ASSERT_EQ(::stat(key_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 32);

  auto ev = events.wait_for("client_update", [](const json& d) { return d.value("status", "") == "connected"; });
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->j()["connection_id"], shown);
  auto pool = snapshot()["pool"]["entries"];
  ASSERT_EQ(pool.size(), 1u) << pool.dump();
  EXPECT_EQ(pool[0]["id"], shown);
  auto restarted = post("/workspace/mcp/echo/restart", "{}");
  ASSERT_TRUE(restarted && restarted->status == 200);
  EXPECT_EQ(json::parse(restarted->body)["results"][0]["id"], shown) << restarted->body;
  EXPECT_EQ(explain_fingerprint(), shown);
  // Nothing the daemon answered or logged holds the internal id.
  for (auto& frame : events.raw_frames) EXPECT_EQ(frame.find(internal_id()), std::string::npos) << frame;
  EXPECT_EQ(get("/workspace/mcp")->body.find(internal_id()), std::string::npos);
  stop();
}

TEST_F(shown_fingerprint_test, is_stable_across_restarts_and_changes_with_the_key) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(status_is("echo", "connected"));
  auto first = snapshot_fingerprint();
  stop();
  ASSERT_TRUE(start());
  ASSERT_TRUE(status_is("echo", "connected"));
  EXPECT_EQ(snapshot_fingerprint(), first);
  stop();
  // Another installation (another key), another digest for the same config.
  fs::remove(key_file());
  ASSERT_TRUE(start());
  ASSERT_TRUE(status_is("echo", "connected"));
  auto other = snapshot_fingerprint();
  EXPECT_NE(other, first);
  EXPECT_EQ(explain_fingerprint(), other);
  stop();
}

TEST_F(shown_fingerprint_test, a_key_readable_by_others_stops_the_daemon_with_the_fix) {
  ASSERT_TRUE(start());
  stop();
  ASSERT_EQ(::chmod(key_file().c_str(), 0644), 0);
  daemon_ = std::make_unique<spawned>(
      std::vector<std::string>{"serve", "--workspace", ws_.string(), "--home", home_.string()}, home_);
  auto code = daemon_->wait_exit(60s);
  ASSERT_TRUE(code);
  EXPECT_NE(*code, 0);
  EXPECT_NE(daemon_->err().find("chmod 600"), std::string::npos) << daemon_->err();
  daemon_.reset();
  // explain still explains, without fingerprints.
  auto r = explain();
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(find_server(r.j, "echo")->at("fingerprint"), json(nullptr));
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
}

TEST_F(shown_fingerprint_test, a_symlinked_key_is_refused_and_its_target_untouched) {
  fs::create_directories(key_file().parent_path());
  auto target = root_ / "not-a-key";
  write_file(target, "planted");
  fs::create_symlink(target, key_file());
  auto r = explain();
  EXPECT_EQ(find_server(r.j, "echo")->at("fingerprint"), json(nullptr));
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(target), "planted");
}

} // namespace
} // namespace mcprt_cli_test
