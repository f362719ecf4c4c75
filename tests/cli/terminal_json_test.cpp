// Black-box: what a command prints as JSON is JSON a terminal cannot be
// steered by. A server's stderr, its tool names and results, and a gateway
// client's name carry C1 controls (a raw CSI), a right-to-left override and
// ESC; every command's --json output holds them only as \uXXXX escapes,
// and parses back to the very text that was sent.

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

// CSI as one C1 byte pair, U+202E, and ESC.
const std::string hostile = "\xc2\x9b" "31m C1 \xe2\x80\xae bidi \x1b[2J esc";

/// Whether a string in `j`, or a key, holds `text`.
bool holds_text(const json& j, const std::string& text) {
  if (j.is_string()) return j.get<std::string>().find(text) != std::string::npos;
  if (j.is_object())
    for (auto& [k, v] : j.items())
      if (k.find(text) != std::string::npos || holds_text(v, text)) return true;
  if (j.is_array())
    for (auto& v : j)
      if (holds_text(v, text)) return true;
  return false;
}

/// `out` holds none of the raw sequences, parses as JSON, and holds
/// `hostile` somewhere once parsed (so the field was printed at all).
void expect_terminal_safe(const run_result& r, const std::string& what) {
  EXPECT_EQ(r.code, 0) << what << ": " << describe(r);
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << what << ": a raw C1 CSI";
  EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << what << ": a raw right-to-left override";
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << what << ": a raw ESC";
  ASSERT_TRUE(r.has_json()) << what << ": " << r.out;
  EXPECT_TRUE(holds_text(r.j, hostile)) << what << ": the text is not in the output:\n" << r.out;
  EXPECT_NE(r.out.find("\\u009b"), std::string::npos) << what << ":\n" << r.out;
  EXPECT_NE(r.out.find("\\u202e"), std::string::npos) << what << ":\n" << r.out;
}

/// A shell command line that writes `hostile` to stderr.
std::string print_hostile_to_stderr() { return "printf '\\302\\233' >&2; printf '31m C1 \\342\\200\\256 bidi \\033[2J esc\\n' >&2"; }

class terminal_json : public graceful_daemon_test {
protected:
  void SetUp() override {
    graceful_daemon_test::SetUp();
    marker_ = root_ / "started-once";
    json loud{{"command", "sh"},
              {"args", {"-c", print_hostile_to_stderr() + "; exec " + test_server + " --tools 1"}}};
    // Starts once; every start after that fails, quoting its stderr.
    json flaky{{"command", "sh"},
               {"args",
                {"-c", "if [ -e '" + marker_.string() + "' ]; then " + print_hostile_to_stderr() + "; exit 1; fi; touch '"
                         + marker_.string() + "'; exec " + test_server + " --tools 1"}}};
    write_file(user_settings(), json{{"mcpServers", {{"loud", loud}, {"flaky", flaky}}}}.dump(2));
  }
  fs::path marker_;
};

TEST_F(terminal_json, status_json_escapes_what_servers_and_gateway_clients_wrote) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("loud"));
  // A gateway client names itself.
  json init{{"jsonrpc", "2.0"},
            {"id", 1},
            {"method", "initialize"},
            {"params",
             {{"protocolVersion", "2025-06-18"},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", hostile}, {"version", hostile}}}}}};
  auto r = client().Post("/mcp", httplib::Headers{{"Accept", "application/json, text/event-stream"}}, init.dump(),
                         "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto st = cli({"status", "--json"});
  expect_terminal_safe(st, "status --json");
  bool client_named = false;
  for (auto& s : st.j["gateway"]["sessions"])
    client_named = client_named || s["client"].value("name", "") == hostile;
  EXPECT_TRUE(client_named) << st.out;
  // The table escapes the same text its own way.
  auto table = cli({"status"});
  EXPECT_EQ(table.out.find("\xc2\x9b"), std::string::npos) << table.out;
}

TEST_F(terminal_json, restart_json_escapes_a_failed_starts_stderr) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("flaky"));
  expect_terminal_safe(cli({"restart", "flaky", "--json"}), "restart --json");
}

TEST_F(terminal_json, call_json_escapes_a_tools_result) {
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("loud"));
  expect_terminal_safe(cli({"call", "loud", "echo", json{{"text", hostile}}.dump(), "--json"}), "call --json");
}

TEST_F(terminal_json, inspect_json_escapes_a_servers_tool_names) {
  expect_terminal_safe(mcprt({"inspect", "--json", "--", test_server, "--tools", "1", "--name-prefix", hostile}),
                       "inspect --json");
}

} // namespace
} // namespace mcprt_cli_test
