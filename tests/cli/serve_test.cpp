// Black-box tests of `mcprt serve` and the commands that talk to it: the
// real daemon binary on a temp workspace, real mcprt-test-server children,
// real HTTP on loopback. Every wait is on a condition (a stdout line, an SSE
// frame, a snapshot field, a process exit) with a deadline.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

class serve_test : public daemon_test {};

// -- the daemon and its snapshot ------------------------------------------------------------------

TEST_F(serve_test, prints_its_url_first_and_writes_daemon_json) {
  start();
  auto doc = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << slurp(ws_ / ".mcprt" / "daemon.json");
  EXPECT_EQ(doc["url"], url_);
  EXPECT_EQ(doc["pid"], daemon_->pid());
  EXPECT_EQ(url_.rfind("http://127.0.0.1:", 0), 0u) << url_;
  auto r = client().Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(body_of(r)["ok"], true);
}

// <ws>/.mcprt is the workspace's, so a cloned repository's: a link it
// planted at daemon.json or daemon.lock is replaced, never written through,
// and the file it points at is neither changed nor removed at exit.
TEST_F(serve_test, links_planted_at_its_files_are_replaced_not_followed) {
  auto victim = root_ / "victim";
  write_file(victim, "keep");
  fs::create_directories(ws_ / ".mcprt");
  for (auto* name : {"daemon.json", "daemon.lock"})
    fs::create_symlink(victim, ws_ / ".mcprt" / name);
  ASSERT_TRUE(start());
  EXPECT_EQ(slurp(victim), "keep");
  for (auto* name : {"daemon.json", "daemon.lock"})
    EXPECT_FALSE(fs::is_symlink(ws_ / ".mcprt" / name)) << name;
  auto doc = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["url"], url_);
  struct stat st {};
  ASSERT_EQ(::stat((ws_ / ".mcprt" / "daemon.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary file stays behind.
  for (auto& e : fs::directory_iterator(ws_ / ".mcprt"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  stop();
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
  EXPECT_EQ(slurp(victim), "keep");
}

TEST_F(serve_test, an_mcprt_directory_that_is_a_link_is_refused) {
  auto elsewhere = root_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, ws_ / ".mcprt");
  spawned serve({"serve", "--workspace", ws_.string(), "--home", home_.string()}, home_);
  auto code = serve.wait_exit(60s);
  ASSERT_TRUE(code) << serve.err();
  EXPECT_EQ(*code, 1) << serve.err();
  EXPECT_NE(serve.err().find(".mcprt is a symbolic link"), std::string::npos) << serve.err();
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

// Plain builds link the daemon with jemalloc (CMakeLists.txt, "The daemon and
// the benchmarks allocate with jemalloc"); a linker that dropped it would
// leave glibc's malloc in place without a word.
TEST_F(serve_test, the_daemon_runs_on_the_allocator_it_was_built_with) {
  start();
  auto maps = slurp(std::filesystem::path("/proc") / std::to_string(daemon_->pid()) / "maps");
  ASSERT_FALSE(maps.empty());
  bool on_jemalloc = maps.find("libjemalloc") != std::string::npos;
#if MCPRT_DAEMON_ON_JEMALLOC
  EXPECT_TRUE(on_jemalloc) << "the daemon was linked with jemalloc but does not map it";
#else
  EXPECT_FALSE(on_jemalloc) << "a sanitizer build must keep the sanitizer's allocator";
#endif
}

TEST_F(serve_test, snapshot_has_the_documented_shape) {
  start();
  ASSERT_TRUE(connected("echo")) << snapshot().dump(2);
  auto s = snapshot();
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["v"], 1);
  EXPECT_EQ(s["version"], MCPRT_PROJECT_VERSION);
  EXPECT_EQ(s["workspace"], ws_.string());
  EXPECT_EQ(s["trusted"], true);
  EXPECT_TRUE(s["capabilities"].is_array());
  ASSERT_TRUE(s["reconcile"].is_object());
  EXPECT_TRUE(s["reconcile"]["generation"].is_number_integer());
  EXPECT_TRUE(s["reconcile"]["in_progress"].is_boolean());
  EXPECT_TRUE(s["reconcile"]["last_error"].is_null() || s["reconcile"]["last_error"].is_string());
  ASSERT_TRUE(s["servers"].is_array());
  EXPECT_EQ(server_names(s), (std::vector<std::string>{"calc", "echo", "project-tools"}));
  const std::set<std::string> statuses{"connected", "connecting", "disconnected", "error"};
  for (auto& x : s["servers"]) {
    for (auto key : {"name", "scope", "transport", "status", "reason", "approval", "fingerprint", "pid", "tools",
                     "prompts", "restarts", "last_error"})
      EXPECT_TRUE(x.contains(key)) << key << " missing in " << x.dump();
    EXPECT_TRUE(statuses.count(x["status"].get<std::string>())) << x.dump();
    EXPECT_TRUE(x["pid"].is_null() || x["pid"].is_number_integer());
    EXPECT_TRUE(x["tools"].is_number_integer());
    EXPECT_TRUE(x["restarts"].is_number_integer());
  }
  auto echo = *find_server(s, "echo");
  EXPECT_EQ(echo["scope"], "user");
  EXPECT_EQ(echo["transport"], "stdio");
  EXPECT_TRUE(echo["pid"].is_number_integer());
  EXPECT_EQ(echo["tools"], 5); // echo, add, sleep, pid + one numbered tool
  EXPECT_TRUE(echo["reason"].is_null());
  EXPECT_TRUE(echo["approval"].is_null());
  auto pt = *find_server(s, "project-tools");
  EXPECT_EQ(pt["scope"], "project");
  EXPECT_EQ(pt["reason"], "pending_approval");
  EXPECT_EQ(pt["approval"], "pending");
  EXPECT_EQ(pt["status"], "disconnected");
  EXPECT_TRUE(pt["pid"].is_null());
  ASSERT_TRUE(s["pool"].is_object());
  EXPECT_TRUE(s["pool"]["entries"].is_array());
  EXPECT_TRUE(s["pool"]["subprocess_count"].is_number_integer());
  for (auto& e : s["pool"]["entries"])
    for (auto key : {"id", "name", "refs", "status", "pid"})
      EXPECT_TRUE(e.contains(key)) << e.dump();
  EXPECT_EQ(s["budgets"], json::array()); // off mode
  // Secrets never appear.
  EXPECT_EQ(s.dump().find(secret_value), std::string::npos);
}

TEST_F(serve_test, budget_cells_and_no_pool) {
  start({"--budget", "5"});
  auto s = snapshot();
  ASSERT_EQ(s["budgets"].size(), 1u) << s.dump(2);
  auto& b = s["budgets"][0];
  EXPECT_EQ(b["scope"], "workspace");
  EXPECT_EQ(b["budget"], 5);
  EXPECT_EQ(b["mode"], "warn");
  for (auto key : {"reserved", "reserved_count", "live_count", "refused", "status"})
    EXPECT_TRUE(b.contains(key)) << b.dump();
  EXPECT_TRUE(b["status"] == "ok" || b["status"] == "warning") << b.dump();
  daemon_.reset();

  start({"--no-pool"});
  s = snapshot();
  EXPECT_TRUE(s["pool"].is_null()) << s.dump(2);
  EXPECT_EQ(s["budgets"], json::array());
}

// -- events -----------------------------------------------------------------------------------------

TEST_F(serve_test, events_arrive_in_order_and_replay_from_last_event_id) {
  start();
  ASSERT_TRUE(connected("echo"));
  sse_stream live(port_);
  ASSERT_EQ(live.status(), 200);
  // An edit of the user settings: settings_changed, then a reconcile pass.
  json settings = json::parse(slurp(user_settings()));
  settings["mcpServers"]["extra"] = test_server_config({"--name-prefix", "extra_"});
  write_file(user_settings(), settings.dump(2));
  ASSERT_TRUE(live.wait_for("settings_changed")) << "events so far: " << live.log.size();
  ASSERT_TRUE(live.wait_for("reconcile_started"));
  ASSERT_TRUE(live.wait_for("reconcile_finished"));
  // The new server's connection is reported during or after the pass.
  auto extra_connected = [](const json& d) {
    return d.value("server", "") == "extra" && d.value("status", "") == "connected";
  };
  bool seen = false;
  for (auto& ev : live.log)
    seen = seen || (ev.kind == "client_update" && extra_connected(ev.j()));
  if (!seen) {
    ASSERT_TRUE(live.wait_for("client_update", extra_connected));
  }
  uint64_t prev = 0;
  for (auto& ev : live.log) {
    auto id = std::stoull(ev.id);
    EXPECT_GT(id, prev) << "ids must increase";
    prev = id;
    EXPECT_TRUE(ev.j().is_object()) << ev.data;
  }

  // From the start: the ring holds everything so far, in order, from id 1.
  sse_stream replay(port_, {{"Last-Event-ID", "0"}});
  ASSERT_EQ(replay.status(), 200);
  std::vector<sse_event> got;
  while (got.empty() || std::stoull(got.back().id) < prev) {
    auto ev = replay.next(10s);
    ASSERT_TRUE(ev) << "replay stopped at " << (got.empty() ? "nothing" : got.back().id);
    if (!ev->kind.empty()) got.push_back(*ev);
  }
  EXPECT_EQ(got.front().id, "1");
  for (std::size_t i = 1; i < got.size(); ++i)
    EXPECT_EQ(std::stoull(got[i].id), std::stoull(got[i - 1].id) + 1) << "the replay has a gap";
  std::map<std::string, std::string> kinds;
  for (auto& ev : got)
    kinds[ev.id] = ev.kind;
  for (auto& ev : live.log)
    EXPECT_EQ(kinds[ev.id], ev.kind) << "id " << ev.id;

  // From the last seen id: nothing old, then the next event.
  sse_stream resume(port_, {{"Last-Event-ID", std::to_string(prev)}});
  ASSERT_EQ(resume.status(), 200);
  ASSERT_EQ(post("/workspace/mcp/project-tools/approve")->status, 200);
  auto ev = resume.wait_for("reconcile_started");
  ASSERT_TRUE(ev);
  for (auto& e : resume.log)
    EXPECT_GT(std::stoull(e.id), prev);
}

TEST_F(serve_test, many_streams_keepalives_and_a_stalled_reader_blocks_nobody) {
  start({"--sse-keepalive-ms", "200"});
  ASSERT_TRUE(connected("echo"));
  // One stream that never reads, with a tiny receive buffer.
  sse_stream stalled(port_, {}, 1024);
  std::vector<std::unique_ptr<sse_stream>> streams;
  for (int i = 0; i < 8; ++i) {
    streams.push_back(std::make_unique<sse_stream>(port_));
    ASSERT_EQ(streams.back()->status(), 200);
  }
  // Keep-alive comments on an idle stream.
  bool keepalive = false;
  for (int i = 0; i < 5 && !keepalive; ++i) {
    auto ev = streams[0]->next(5s);
    ASSERT_TRUE(ev);
    keepalive = ev->comment.find("keep-alive") != std::string::npos;
  }
  EXPECT_TRUE(keepalive);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(post("/workspace/mcp/echo/restart")->status, 200);
    for (auto& s : streams)
      ASSERT_TRUE(s->wait_for("pool_entry_restarted")) << "round " << round;
  }
  auto r = client().Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(serve_test, a_reader_that_falls_behind_is_dropped) {
  // Disabled servers (no process) make settings_changed events of several
  // kilobytes each: enough to fill the socket buffers of a reader that does
  // not read, once the daemon's send buffers are small (on loopback Linux
  // grows them to megabytes otherwise). Not thousands: under TSan every
  // config string handed between actors (through uninstrumented CAF) is a
  // suppressed report, and TSan's search of those grows with their number.
  json servers = {{"echo", test_server_config({})}};
  auto with_args = [&](const std::string& arg) {
    for (int i = 0; i < 300; ++i) {
      auto cfg = test_server_config({arg});
      cfg["disabled"] = true;
      servers["disabled-server-" + std::to_string(i)] = cfg;
    }
    write_file(user_settings(), json{{"mcpServers", servers}}.dump());
  };
  with_args("a");
  // A queue of 16: short enough for the stalled reader to overflow with the
  // events below, long enough that a burst of small events (a restart
  // publishes several at once) never overflows the live reader's queue
  // before its writer thread runs; with 4 that happened now and then.
  start({"--sse-queue", "16", "--sndbuf", "8192"});
  ASSERT_TRUE(connected("echo"));
  sse_stream stalled(port_, {}, 1024);
  ASSERT_EQ(stalled.status(), 200);
  sse_stream live(port_);
  ASSERT_EQ(live.status(), 200);
  for (auto arg : {"b", "c", "d"}) {
    with_args(arg);
    ASSERT_TRUE(live.wait_for("settings_changed")) << daemon_->err();
  }
  for (int i = 0; i < 10; ++i) {
    auto t0 = clock_type::now();
    ASSERT_EQ(post("/workspace/mcp/echo/restart")->status, 200);
    EXPECT_LT(clock_type::now() - t0, 5s) << "a stalled reader slowed the runtime down";
    ASSERT_TRUE(live.wait_for("pool_entry_restarted"));
  }
  EXPECT_TRUE(stalled.closed_within(20s)) << "the stalled stream was not dropped\n" << daemon_->err();
  auto h = client().Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST_F(serve_test, a_bad_last_event_id_is_a_400) {
  start();
  sse_stream s(port_, {{"Last-Event-ID", "abc"}});
  EXPECT_EQ(s.status(), 400);
}

TEST_F(serve_test, a_replay_past_the_history_starts_with_a_gap_marker) {
  start({"--event-history", "4"});
  ASSERT_TRUE(connected("echo"));
  sse_stream live(port_);
  ASSERT_EQ(live.status(), 200);
  // Restarts until the history of 4 has dropped events.
  uint64_t newest = 0;
  for (int i = 0; i < 5 && newest <= 4; ++i) {
    ASSERT_EQ(post("/workspace/mcp/echo/restart")->status, 200);
    auto restarted = live.wait_for("pool_entry_restarted");
    ASSERT_TRUE(restarted);
    newest = std::stoull(restarted->id);
  }
  ASSERT_GT(newest, 4u);
  auto next_frame = [](sse_stream& s) {
    for (;;) {
      auto ev = s.next(10s);
      if (!ev || !ev->kind.empty()) return ev;
    }
  };

  // From the start: the marker names what is left, then the events from there.
  sse_stream from_start(port_, {{"Last-Event-ID", "0"}});
  ASSERT_EQ(from_start.status(), 200);
  auto gap = next_frame(from_start);
  ASSERT_TRUE(gap);
  EXPECT_EQ(gap->kind, "gap");
  EXPECT_EQ(gap->id, "") << "the marker must not move the client's Last-Event-ID";
  EXPECT_EQ(gap->j()["reason"], "evicted");
  EXPECT_EQ(gap->j()["last_event_id"], 0);
  auto next_id = gap->j()["next_id"].get<uint64_t>();
  EXPECT_GT(next_id, 1u);
  auto first = next_frame(from_start);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, std::to_string(next_id));

  // An id this daemon never sent (from an earlier run): the marker, then the whole history.
  auto future = std::to_string(newest + 1000);
  sse_stream stale(port_, {{"Last-Event-ID", future}});
  ASSERT_EQ(stale.status(), 200);
  gap = next_frame(stale);
  ASSERT_TRUE(gap);
  EXPECT_EQ(gap->kind, "gap");
  EXPECT_EQ(gap->j()["reason"], "unknown_id");
  EXPECT_EQ(gap->j()["last_event_id"].get<uint64_t>(), newest + 1000);
  first = next_frame(stale);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, std::to_string(gap->j()["next_id"].get<uint64_t>()));
}

// -- approvals, restart, reload, tools --------------------------------------------------------------

TEST_F(serve_test, approve_and_reject) {
  start();
  auto r = post("/workspace/mcp/project-tools/approve");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_of(r)["approval"], "approved");
  ASSERT_TRUE(connected("project-tools")) << snapshot().dump(2);
  EXPECT_EQ(server("project-tools")["approval"], "approved");

  r = post("/workspace/mcp/project-tools/reject");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(wait_until([&] {
    auto s = server("project-tools");
    return s["reason"] == "rejected" && s["status"] == "disconnected";
  })) << snapshot().dump(2);

  r = post("/workspace/mcp/nope/approve");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(is_json_error(r)) << r->body;
  r = post("/workspace/mcp/echo/reject");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_TRUE(is_json_error(r)) << r->body;
}

TEST_F(serve_test, restart_gives_a_new_process) {
  start();
  ASSERT_TRUE(connected("echo"));
  auto pid = server("echo")["pid"];
  auto r = post("/workspace/mcp/echo/restart");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = body_of(r);
  ASSERT_EQ(j["results"].size(), 1u) << j.dump();
  EXPECT_EQ(j["results"][0]["restarted"], true) << j.dump();
  EXPECT_TRUE(j["results"][0]["id"].is_string());
  EXPECT_TRUE(wait_until([&] {
    auto s = server("echo");
    return s["status"] == "connected" && s["pid"] != pid;
  })) << snapshot().dump(2);
  r = post("/workspace/mcp/nope/restart");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_TRUE(is_json_error(r));
}

TEST_F(serve_test, reload_and_healthz) {
  start();
  auto r = post("/workspace/mcp/reload");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
  auto h = client().Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST_F(serve_test, an_unavailable_answer_reads_reason_and_remedy_from_the_error_not_its_text) {
  // The API parsed "NAME is unavailable (REASON): REMEDY" back: a name that
  // holds that very text gave reason "fake" and a remedy starting "lie".
  const std::string name = "evil is unavailable (fake): lie";
  write_file(user_settings(), json{{"mcp", {{"excluded", {"evil*"}}}},
                                   {"mcpServers", {{"echo", test_server_config({"--tools", "1"})},
                                                   {name, test_server_config({})}}}}
                                .dump(2));
  start();
  ASSERT_TRUE(connected("echo")) << snapshot().dump(2);
  auto r = post("/workspace/mcp/tools/call", json{{"server", name}, {"tool", "echo"}, {"arguments", json::object()}}.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  auto j = body_of(r);
  EXPECT_EQ(j["error"], "unavailable") << j.dump();
  EXPECT_EQ(j["reason"], "excluded") << j.dump();
  EXPECT_EQ(j["remedy"], "it matches mcp.excluded; remove it from that list") << j.dump();
  // The text for humans is as before.
  EXPECT_EQ(j["message"], name + " is unavailable (excluded): it matches mcp.excluded; remove it from that list")
    << j.dump();
}

TEST_F(serve_test, tools_call_results_and_errors) {
  start();
  ASSERT_TRUE(connected("echo"));
  auto r = post("/workspace/mcp/tools/call", R"({"server": "echo", "tool": "echo", "arguments": {"text": "hi"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = body_of(r);
  EXPECT_EQ(j["content"][0]["text"], "hi") << j.dump();

  r = post("/workspace/mcp/tools/call", R"({"server": "project-tools", "tool": "project_echo", "arguments": {}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409) << r->body;
  j = body_of(r);
  EXPECT_EQ(j["reason"], "pending_approval") << j.dump();
  EXPECT_NE(j.value("remedy", "").find("mcprt approve project-tools"), std::string::npos) << j.dump();

  // Right after an approval the server is still connecting: the call waits for it.
  ASSERT_EQ(post("/workspace/mcp/project-tools/approve")->status, 200);
  r = post("/workspace/mcp/tools/call", R"({"server": "project-tools", "tool": "project_echo", "arguments": {"text": "now"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_of(r)["content"][0]["text"], "now");

  r = post("/workspace/mcp/tools/call", R"({"server": "echo", "tool": "no_such_tool"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_TRUE(is_json_error(r));

  r = post("/workspace/mcp/tools/call", R"({"server": "nope", "tool": "echo"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
}

TEST_F(serve_test, bad_requests_get_4xx_json_and_nothing_crashes) {
  start();
  struct bad {
    std::string body;
    int status;
  };
  for (auto& b : std::vector<bad>{{"{not json", 400},
                                  {"[1, 2]", 400},
                                  {"", 400},
                                  {R"({"server": 5, "tool": "echo"})", 400},
                                  {R"({"server": "echo"})", 400},
                                  {R"({"server": "echo", "tool": ["x"]})", 400},
                                  {R"({"server": "echo", "tool": "echo", "arguments": [1]})", 400},
                                  {R"({"server": "echo", "tool": "echo", "arguments": "x"})", 400}}) {
    auto r = post("/workspace/mcp/tools/call", b.body);
    ASSERT_TRUE(r) << b.body;
    EXPECT_EQ(r->status, b.status) << b.body << " -> " << r->body;
    EXPECT_TRUE(is_json_error(r)) << b.body << " -> " << r->body;
  }
  std::string huge = R"({"server": "echo", "tool": "echo", "arguments": {"text": ")" + std::string(3 << 20, 'x') + "\"}}";
  auto r = post("/workspace/mcp/tools/call", huge);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(is_json_error(r)) << r->body.substr(0, 200);

  r = client().Get("/no/such/route");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(is_json_error(r)) << r->body;
  r = client().Get("/workspace/mcp/reload"); // wrong method
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_TRUE(is_json_error(r)) << r->body;
  r = client().Post("/workspace/mcp", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  EXPECT_TRUE(is_json_error(r)) << r->body;
  r = client().Get("/workspace/mcp/echo/restart");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  r = client().Get("/workspace/mcp/echo/nonsense");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);

  auto h = client().Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_FALSE(daemon_->wait_exit(0ms)) << "the daemon died";
}

TEST_F(serve_test, launch_flags_reach_the_runtime) {
  start({"--allowed-mcp-server-names", "echo,top"});
  EXPECT_EQ(server("calc")["reason"], "not_allowed") << snapshot().dump(2);
  daemon_.reset();

  start({"--untrusted"});
  auto s = snapshot();
  EXPECT_EQ(s["trusted"], false);
  EXPECT_EQ(server("echo")["reason"], "untrusted") << s.dump(2);
  daemon_.reset();

  write_file(root_ / "top.json", json{{"mcpServers", {{"top", test_server_config({"--name-prefix", "top_"})}}}}.dump());
  start({"--mcp-config", (root_ / "top.json").string()});
  EXPECT_TRUE(connected("top")) << snapshot().dump(2);
  daemon_.reset();

  write_file(home_ / ".qwen" / "settings.json",
             json{{"mcpServers", {{"qwen-only", test_server_config({})}}}}.dump());
  start({"--profile", "qwen"});
  s = snapshot();
  // .mcp.json is the same file whatever the profile.
  EXPECT_EQ(server_names(s), (std::vector<std::string>{"project-tools", "qwen-only"})) << s.dump(2);
  daemon_.reset();

  // One scheduler worker is enough to serve (the default is one per core).
  start({"--threads", "1"});
  EXPECT_TRUE(connected("echo")) << snapshot().dump(2);
  daemon_.reset();
  // CAF's own scheduler stays available.
  start({"--scheduler", "caf"});
  EXPECT_TRUE(connected("echo")) << snapshot().dump(2);
  daemon_.reset();
  // An I/O thread that sleeps at once still answers.
  start({"--io-poll-us", "0"});
  EXPECT_TRUE(connected("echo")) << snapshot().dump(2);
  daemon_.reset();

  auto r = mcprt({"serve", "--workspace", (root_ / "missing").string(), "--home", home_.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--threads", "-1"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--threads"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--scheduler", "lifo"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--scheduler"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--io-poll-us", "-1"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--io-poll-us"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--debounce-ms", "-5"});
  EXPECT_EQ(r.code, 2) << describe(r);
  r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--log-format", "xml"});
  EXPECT_EQ(r.code, 2) << describe(r);
}

TEST_F(serve_test, one_daemon_per_workspace) {
  start();
  auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("already serves"), std::string::npos) << r.err;
  // The running daemon's file is untouched.
  auto doc = json::parse(slurp(ws_ / ".mcprt" / "daemon.json"), nullptr, false);
  EXPECT_EQ(doc["pid"], daemon_->pid());
}

// A daemon that is still starting has no daemon.json yet: its lock keeps a
// second one out all the same (here the test holds the lock).
TEST_F(serve_test, one_daemon_per_workspace_also_while_one_is_starting) {
  fs::create_directories(ws_ / ".mcprt");
  auto lock_path = ws_ / ".mcprt" / "daemon.lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("starting or running"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
  ::close(fd);
  // Let go, the next one starts.
  ASSERT_TRUE(start());
  EXPECT_TRUE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
}

// -- tokens and addresses ---------------------------------------------------------------------------

TEST_F(serve_test, a_token_is_required_on_every_request) {
  write_file(root_ / "token", "s3cret-token-8d41c7e09b2a\n");
  fs::permissions(root_ / "token", fs::perms::owner_read | fs::perms::owner_write);
  start({"--token-file", (root_ / "token").string()});
  for (auto path : {"/healthz", "/workspace/mcp"}) {
    auto r = client().Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_TRUE(is_json_error(r)) << r->body;
    r = client("wrong").Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    r = client("s3cret-token-8d41c7e09b2a").Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path;
  }
  auto r = post("/workspace/mcp/reload");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  sse_stream s(port_);
  EXPECT_EQ(s.status(), 401);
  sse_stream s2(port_, {{"Authorization", "Bearer s3cret-token-8d41c7e09b2a"}});
  EXPECT_EQ(s2.status(), 200);

  // The owner's commands read the token from the file daemon.json names.
  auto st = cli({"status"});
  EXPECT_EQ(st.code, 0) << describe(st);
  st = cli({"status", "--url", url_});
  EXPECT_EQ(st.code, 1) << describe(st);
  EXPECT_NE(st.err.find("401"), std::string::npos) << st.err;
  st = cli({"status", "--url", url_, "--token-file", (root_ / "token").string()});
  EXPECT_EQ(st.code, 0) << describe(st);
  EXPECT_EQ((daemon_->err() + st.err + st.out).find("s3cret-token-8d41c7e09b2a"), std::string::npos) << "the token was printed";
}

TEST_F(serve_test, a_non_loopback_address_needs_a_token_file) {
  auto r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--listen", "0.0.0.0:0"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("token"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
  // With a token it listens there.
  write_file(root_ / "token", "tok-6a1f0c9e2d4b8a7c5e3f01\n");
  fs::permissions(root_ / "token", fs::perms::owner_read | fs::perms::owner_write);
  start({"--listen", "0.0.0.0:0", "--token-file", (root_ / "token").string()});
  EXPECT_EQ(url_.rfind("http://0.0.0.0:", 0), 0u) << url_;
  httplib::Client c("127.0.0.1", port_);
  c.set_bearer_token_auth("tok-6a1f0c9e2d4b8a7c5e3f01");
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  daemon_.reset();
  for (auto bad : {"127.0.0.1", "127.0.0.1:99999", ":80", "127.0.0.1:x"}) {
    r = mcprt({"serve", "--workspace", ws_.string(), "--home", home_.string(), "--listen", bad});
    EXPECT_EQ(r.code, 2) << bad << "\n" << describe(r);
    EXPECT_NE(r.err.find("--listen"), std::string::npos) << r.err;
  }
}

// -- signals --------------------------------------------------------------------------------------------

std::vector<pid_t> server_pids(const json& snap) {
  std::vector<pid_t> out;
  if (snap.is_object())
    for (auto& s : snap["servers"])
      if (s["pid"].is_number_integer()) out.push_back(s["pid"].get<pid_t>());
  return out;
}

TEST_F(serve_test, sigterm_stops_every_child_and_removes_daemon_json) {
  for (int sig : {SIGTERM, SIGINT}) {
    start();
    ASSERT_TRUE(connected("echo") && connected("calc"));
    auto pids = server_pids(snapshot());
    ASSERT_EQ(pids.size(), 2u);
    ASSERT_TRUE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
    daemon_->signal(sig);
    auto code = daemon_->wait_exit(30s);
    ASSERT_TRUE(code) << "the daemon did not exit after signal " << sig;
    EXPECT_EQ(*code, 0) << daemon_->err();
    EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
    for (auto pid : pids)
      EXPECT_TRUE(gone_within(pid, 10s)) << "server " << pid << " outlived the daemon";
    daemon_.reset();
  }
}

TEST_F(serve_test, a_second_signal_forces_the_exit) {
  // A server that ignores SIGTERM and stdin EOF holds a clean stop for
  // seconds; the second signal must not wait for it.
  write_file(user_settings(),
             json{{"mcpServers", {{"stubborn", test_server_config({"--ignore-sigterm"})}}}}.dump(2));
  start();
  ASSERT_TRUE(connected("stubborn"));
  auto pids = server_pids(snapshot());
  ASSERT_EQ(pids.size(), 1u);
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->err_contains("stopping"));
  auto t0 = clock_type::now();
  daemon_->signal(SIGTERM);
  auto code = daemon_->wait_exit(10s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_LT(clock_type::now() - t0, 1500ms) << "the second signal did not force";
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
  EXPECT_TRUE(gone_within(pids[0], 10s)) << "the server outlived the daemon";
}

TEST_F(serve_test, sigkill_of_the_daemon_leaves_no_child) {
  start();
  ASSERT_TRUE(connected("echo") && connected("calc"));
  auto pids = server_pids(snapshot());
  ASSERT_EQ(pids.size(), 2u);
  daemon_->signal(SIGKILL);
  ASSERT_TRUE(daemon_->wait_exit(10s));
  for (auto pid : pids)
    EXPECT_TRUE(gone_within(pid, 10s)) << "server " << pid << " outlived the daemon";
  // A stale daemon.json: client commands say nobody answers; approve falls
  // back to the store.
  auto st = cli({"status"});
  EXPECT_EQ(st.code, 1);
  auto a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(a.code, 0) << describe(a);
  EXPECT_EQ(a.out.find("daemon"), std::string::npos) << a.out;
}

// -- flags ---------------------------------------------------------------------------------------------------

TEST_F(serve_test, bad_budget_flags_are_refused_before_anything_starts) {
  auto serve = [&](std::vector<std::string> extra, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args{"serve", "--workspace", ws_.string(), "--home", home_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    spawned p(args, home_, env);
    auto code = p.wait_exit(20s);
    auto out = p.line(1s);
    return std::make_tuple(code ? *code : -1, p.err(), out ? *out : std::string{});
  };
  for (auto bad : {"0x10", "1e2", "0", "-1", "ten", ""}) {
    auto [code, err, out] = serve({"--budget", bad});
    EXPECT_EQ(code, 2) << "--budget '" << bad << "': " << err;
    EXPECT_NE(err.find("--budget"), std::string::npos) << err;
    EXPECT_TRUE(out.empty()) << out;
  }
  for (auto bad : {"0x10", "1e2", "0", "-1", "ten"}) {
    auto [code, err, out] = serve({}, {{"MCPRT_BUDGET", bad}});
    EXPECT_EQ(code, 2) << "MCPRT_BUDGET=" << bad << ": " << err;
    EXPECT_NE(err.find("MCPRT_BUDGET"), std::string::npos) << err;
  }
  {
    auto [code, err, out] = serve({"--budget-mode", "enforce"});
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("enforce needs a budget"), std::string::npos) << err;
  }
  {
    auto [code, err, out] = serve({}, {{"MCPRT_BUDGET_MODE", "enforce"}});
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find("MCPRT_BUDGET_MODE"), std::string::npos) << err;
  }
  {
    auto [code, err, out] = serve({"--budget-mode", "loud", "--budget", "3"});
    EXPECT_EQ(code, 2) << err;
  }
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));
}

// Every command resolves the home directory the same way: with $HOME unset
// or empty and no --home there is none (serve used to fall back to "/",
// explain refused), and with --home both read that home's user settings.
TEST_F(serve_test, every_command_resolves_the_home_alike_when_HOME_is_unset) {
  // `env` runs mcprt with the environment the test asks for; spawned sets HOME first.
  auto run = [&](std::vector<std::string> env_args, std::vector<std::string> args) {
    env_args.push_back(MCPRT_BIN);
    env_args.insert(env_args.end(), args.begin(), args.end());
    return std::make_unique<spawned>(env_args, home_, std::map<std::string, std::string>{}, "/usr/bin/env");
  };
  const std::string no_home = "no home directory: set $HOME or pass --home";
  for (std::vector<std::string> env_args : {std::vector<std::string>{"-u", "HOME"}, {"HOME="}}) {
    for (std::vector<std::string> cmd : {std::vector<std::string>{"explain", "--workspace", ws_.string()},
                                         {"explain", "--json", "--workspace", ws_.string()},
                                         {"serve", "--workspace", ws_.string()}}) {
      auto p = run(env_args, cmd);
      auto code = p->wait_exit(30s);
      EXPECT_EQ(code, std::optional<int>(2)) << cmd[0] << " with " << env_args[0] << ": " << p->err();
      EXPECT_NE(p->err().find(no_home), std::string::npos) << cmd[0] << ": " << p->err();
    }
  }
  EXPECT_FALSE(fs::exists(ws_ / ".mcprt" / "daemon.json"));

  // With --home, both read its user settings.
  auto explained = run({"-u", "HOME"}, {"explain", "--json", "--workspace", ws_.string(), "--home", home_.string()});
  std::string text;
  while (auto l = explained->line(30s)) text += *l + "\n";
  ASSERT_EQ(explained->wait_exit(30s), std::optional<int>(0)) << explained->err();
  auto doc = json::parse(text, nullptr, false);
  ASSERT_TRUE(find_server(doc, "echo")) << text;
  EXPECT_EQ((*find_server(doc, "echo"))["scope"], "user");

  daemon_ = run({"-u", "HOME"}, {"serve", "--workspace", ws_.string(), "--home", home_.string()});
  auto first = daemon_->line(60s);
  ASSERT_TRUE(first && first->rfind("listening on http://", 0) == 0) << first.value_or("") << daemon_->err();
  url_ = first->substr(std::string("listening on ").size());
  port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
  token_ = slurp(home_ / ".mcprt" / "token").substr(0, 64);
  daemon_tokens()[port_] = token_;
  ASSERT_TRUE(connected("echo")) << snapshot().dump(2);
  EXPECT_EQ((*find_server(snapshot(), "echo"))["scope"], "user");
}

TEST_F(serve_test, budget_from_the_environment_and_enforce) {
  start({"--budget-mode", "enforce"}, {{"MCPRT_BUDGET", "1"}});
  ASSERT_TRUE(wait_until([&] {
    auto s = snapshot();
    return s["budgets"].size() == 1 && s["budgets"][0]["reserved_count"] == 1 && !s["budgets"][0]["refused"].empty();
  })) << snapshot().dump(2);
  auto b = snapshot()["budgets"][0];
  EXPECT_EQ(b["budget"], 1);
  EXPECT_EQ(b["mode"], "enforce");
  EXPECT_EQ(b["status"], "error");
}

TEST_F(serve_test, json_logs_one_object_per_line_without_secrets) {
  start({"--log-format", "json", "--log-level", "debug"});
  ASSERT_TRUE(connected("calc"));
  ASSERT_EQ(post("/workspace/mcp/calc/restart")->status, 200);
  ASSERT_TRUE(connected("calc"));
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  auto err = daemon_->err();
  std::istringstream in(err);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto j = json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("level") && j.contains("msg") && j.contains("ts")) << line;
    ++n;
  }
  EXPECT_GT(n, 2) << err;
  EXPECT_EQ(err.find(secret_value), std::string::npos) << "a secret was logged";
}

// -- client commands ----------------------------------------------------------------------------------------

TEST_F(serve_test, status_table_and_json) {
  start();
  ASSERT_TRUE(connected("echo") && connected("calc"));
  auto r = cli({"status"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("NAME"), std::string::npos) << r.out;
  for (auto col : {"STATUS", "TOOLS", "SCOPE", "REASON"})
    EXPECT_NE(r.out.find(col), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pending_approval"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("budget:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pool:"), std::string::npos) << r.out;
  bool echo_line = false;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line))
    echo_line = echo_line || (line.rfind("echo ", 0) == 0 && line.find("connected") != std::string::npos
                              && line.find(" 5 ") != std::string::npos && line.find("user") != std::string::npos);
  EXPECT_TRUE(echo_line) << r.out;

  r = cli({"status", "--json"});
  ASSERT_EQ(r.code, 0) << describe(r);
  ASSERT_TRUE(r.has_json()) << r.out;
  EXPECT_EQ(r.j["v"], 1);
  EXPECT_EQ(server_names(r.j).size(), 3u);

  r = cli({"status", "--url", url_, "--token-file", (home_ / ".mcprt" / "token").string()});
  EXPECT_EQ(r.code, 0) << describe(r);
}

TEST_F(serve_test, client_commands_without_a_daemon_say_so) {
  for (auto args : std::vector<std::vector<std::string>>{{"status"}, {"events"}, {"restart", "echo"}, {"call", "echo", "echo"}}) {
    auto r = cli(args);
    EXPECT_EQ(r.code, 1) << args[0] << "\n" << describe(r);
    EXPECT_NE(r.err.find("mcprt serve"), std::string::npos) << r.err;
  }
}

TEST_F(serve_test, events_command_prints_one_line_per_event) {
  start();
  ASSERT_TRUE(connected("echo"));
  spawned ev({"events", "--workspace", ws_.string(), "--since", "0"}, home_);
  ASSERT_TRUE(ev.line_containing("reconcile_finished")) << ev.err();
  for (auto& l : ev.seen)
    EXPECT_EQ(l[0], '#') << l;
  // Live events follow.
  ASSERT_EQ(post("/workspace/mcp/echo/restart")->status, 200);
  ASSERT_TRUE(ev.line_containing("pool_entry_restarted")) << ev.err();
  // The stream ends with the daemon; the command then exits 0.
  daemon_->signal(SIGTERM);
  ASSERT_TRUE(daemon_->wait_exit(30s));
  auto code = ev.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0) << ev.err();
}

TEST_F(serve_test, approve_with_another_home_writes_that_store_not_the_daemons) {
  start();
  ASSERT_TRUE(connected("echo"));
  auto other = root_ / "other-home";
  fs::create_directories(other);
  auto a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", other.string()});
  ASSERT_EQ(a.code, 0) << describe(a);
  EXPECT_EQ(a.out.find("through the daemon"), std::string::npos) << a.out;
  EXPECT_NE(a.err.find("does not read"), std::string::npos) << a.err;
  auto store = json::parse(slurp(other / ".mcprt" / "mcp-approvals.json"), nullptr, false);
  EXPECT_NE(store.dump().find("project-tools"), std::string::npos) << store.dump();
  EXPECT_FALSE(fs::exists(home_ / ".mcprt" / "mcp-approvals.json")) << "the daemon's store was written";
  EXPECT_EQ(server("project-tools")["approval"], "pending");

  // The daemon's own home, given explicitly, still goes through the daemon.
  a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(a.code, 0) << describe(a);
  EXPECT_NE(a.out.find("through the daemon"), std::string::npos) << a.out;
  EXPECT_TRUE(connected("project-tools")) << snapshot().dump(2);
}

TEST_F(serve_test, approve_reject_restart_and_call_through_the_daemon) {
  start();
  ASSERT_TRUE(connected("echo"));
  auto a = mcprt({"approve", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(a.code, 0) << describe(a);
  EXPECT_NE(a.out.find("through the daemon"), std::string::npos) << a.out;
  ASSERT_TRUE(connected("project-tools")) << snapshot().dump(2);

  auto c = cli({"call", "project-tools", "project_echo", R"({"text": "from the project"})"});
  ASSERT_EQ(c.code, 0) << describe(c);
  EXPECT_EQ(c.out, "from the project\n");

  auto rj = mcprt({"reject", "project-tools", "--workspace", ws_.string(), "--home", home_.string()});
  ASSERT_EQ(rj.code, 0) << describe(rj);
  EXPECT_TRUE(wait_until([&] { return server("project-tools")["reason"] == "rejected"; }));
  c = cli({"call", "project-tools", "project_echo", R"({"text": "x"})"});
  EXPECT_EQ(c.code, 1) << describe(c);
  EXPECT_NE(c.err.find("rejected"), std::string::npos) << c.err;

  auto u = mcprt({"approve", "nope", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(u.code, 2) << describe(u);
  u = mcprt({"approve", "echo", "--workspace", ws_.string(), "--home", home_.string()});
  EXPECT_EQ(u.code, 2) << describe(u);

  auto pid = server("echo")["pid"];
  auto r = cli({"restart", "echo"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("restarted"), std::string::npos) << r.out;
  EXPECT_TRUE(wait_until([&] {
    auto s = server("echo");
    return s["status"] == "connected" && s["pid"] != pid;
  })) << snapshot().dump(2);
  r = cli({"restart", "nope"});
  EXPECT_EQ(r.code, 2) << describe(r);

  c = cli({"call", "echo", "echo", R"({"text":"hi"})"});
  ASSERT_EQ(c.code, 0) << describe(c);
  EXPECT_EQ(c.out, "hi\n");
  c = cli({"call", "echo", "echo", R"({"text":"hi"})", "--json"});
  ASSERT_EQ(c.code, 0) << describe(c);
  EXPECT_EQ(c.j["content"][0]["text"], "hi");
  c = cli({"call", "echo", "echo", "not json"});
  EXPECT_EQ(c.code, 2) << describe(c);
  c = cli({"call", "echo", "no_such_tool"});
  EXPECT_EQ(c.code, 1) << describe(c);
  EXPECT_NE(c.err.find("404"), std::string::npos) << c.err;
}

} // namespace
} // namespace mcprt_cli_test
