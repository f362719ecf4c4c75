// Remote hosts, black-box: a real `mcprt serve --caf-port`
// node with real test-server children, and hosts that reach it through
// CAF's middleman on loopback: this process (runtime::connect) and the
// embedding example in a process of its own. Every wait is on a condition
// with a deadline; the host's event log wakes the checks.

#include <gtest/gtest.h>

#include <future>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "core/server_config.hpp"
#include "mcprt/owner_tls.hpp"
#include "mcprt/runtime.hpp"
#include "messages/remote.hpp"
#include "tests/cli/daemon_test_util.hpp"
#include "tests/runtime/event_log.hpp"

using namespace mcprt_cli_test;
using namespace std::chrono_literals;

namespace {

/// A home of the host's own, made before the fixture's actor system (which
/// needs its identity when it starts, before SetUp): start_node gives the
/// node that identity, as one owner's host and node share it.
fs::path fresh_host_home() {
  std::string tmpl = (fs::temp_directory_path() / "mcprt-remote-host-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

/// The host's actor system: mcprt's types, the middleman over the owner's
/// TLS.
struct owner_host_config : caf::actor_system_config {
  explicit owner_host_config(const fs::path& home) {
    mcprt::add_mcprt_types(*this);
    if (auto err = mcprt::use_owner_tls(*this, home)) throw std::runtime_error(caf::to_string(err));
  }
};

bool is_errc(const caf::error& e, mcprt::errc code) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(code);
}

/// The node's published actor, reached as any peer of its port reaches it.
mcprt::workspace_node_actor raw_node(caf::actor_system& sys, uint16_t port) {
  auto mm = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  caf::scoped_actor self{sys};
  mcprt::workspace_node_actor node;
  self->request(mm, 10s, caf::connect_atom::value, std::string{"127.0.0.1"}, port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        node = caf::actor_cast<mcprt::workspace_node_actor>(std::move(ptr));
      },
      [](caf::error&) {});
  return node;
}

/// One host server: the test server, or a command that leaves `marker`.
mcprt::server_config host_server(const std::string& name, const json& spec) {
  auto parsed = mcprt::parse_server_config(name, spec, mcprt::config_scope::session);
  EXPECT_TRUE(parsed.config.has_value());
  return parsed.config.value_or(mcprt::server_config{});
}

class remote_test : public cli_test {
protected:
  ~remote_test() override {
    std::error_code ec;
    fs::remove_all(host_home_, ec);
  }

  void SetUp() override {
    cli_test::SetUp();
    write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}.dump(2));
  }

  void TearDown() override {
    if (rt_) rt_->shutdown();
    rt_.reset();
    // The host's actor system waits for its actors when it ends.
    if (sink_) caf::anon_send_exit(sink_, caf::exit_reason::user_shutdown);
    if (node_) {
      node_->signal(SIGTERM);
      EXPECT_TRUE(node_->wait_exit(30s).has_value()) << node_->err();
      auto err = node_->err();
      EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
      EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
    }
    node_.reset();
    cli_test::TearDown();
  }

  /// Starts the workspace node (on `caf_port` when given); false with a
  /// test failure when it does not say where it listens.
  bool start_node(int caf_port = 0, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"serve",         ws_.string(), "--home", home_.string(), "--debounce-ms", "50",
                                  "--caf-port", std::to_string(caf_port)};
    args.insert(args.begin() + 1, "--workspace");
    args.insert(args.end(), extra.begin(), extra.end());
    share_owner_identity(host_home_, home_);
    node_ = std::make_unique<spawned>(args, home_);
    auto http = node_->line(60s);
    auto caf = node_->line(10s);
    if (!http || http->rfind("listening on http://", 0) != 0 || !caf || caf->rfind("listening on caf", 0) != 0) {
      ADD_FAILURE() << "no 'listening on' lines: " << http.value_or("<none>") << " / " << caf.value_or("<none>")
                    << "\n"
                    << node_->err();
      return false;
    }
    http_port_ = std::stoi(http->substr(http->rfind(':') + 1));
    caf_port_ = static_cast<uint16_t>(std::stoi(caf->substr(caf->rfind(':') + 1)));
    return true;
  }

  bool connect() {
    auto r = mcprt::runtime::connect(host_, "127.0.0.1", caf_port_);
    if (!r) {
      ADD_FAILURE() << "connect: " << host_.render(r.error());
      return false;
    }
    rt_ = std::move(*r);
    if (!sink_) sink_ = host_.spawn(mcprt::test::collector, log_);
    return static_cast<bool>(rt_->subscribe(sink_));
  }

  /// A client of the node's HTTP API with the owner's token.
  std::unique_ptr<httplib::Client> owner_client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", http_port_);
    c->set_read_timeout(10, 0);
    std::ifstream token_file(home_ / ".mcprt" / "token");
    std::string token;
    std::getline(token_file, token);
    c->set_bearer_token_auth(token.c_str());
    return c;
  }

  /// The node's snapshot over its HTTP API.
  json node_snapshot() const {
    auto r = owner_client()->Get("/workspace/mcp");
    if (!r || r->status != 200) return json(nullptr);
    return json::parse(r->body, nullptr, false);
  }

  /// How many sessions hold the node's pool entry of `name` (-1: none).
  int pool_refs(const std::string& name) const {
    auto s = node_snapshot();
    if (!s.is_object() || !s["pool"].is_object()) return -1;
    for (auto& e : s["pool"]["entries"])
      if (e.value("name", "") == name) return e.value("refs", -1);
    return -1;
  }

  /// Checks `pred` again at every event of the host and at least every 100 ms.
  bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) {
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      if (pred()) return true;
      auto left = left_until(deadline);
      if (left <= 0ms) return false;
      log_->wait([](const mcprt::event&) { return true; }, log_->mark(), std::min<std::chrono::milliseconds>(left, 100ms));
    }
  }

  bool session_connected(const std::string& session, const std::string& server) {
    auto s = rt_->session_state(session);
    if (!s) return false;
    for (auto& srv : s->servers)
      if (srv.name == server && srv.status == mcprt::connection_status::connected) return true;
    return false;
  }

  fs::path host_home_ = fresh_host_home();
  owner_host_config cfg_{host_home_};
  caf::actor_system host_{cfg_};
  std::shared_ptr<mcprt::test::event_log> log_ = std::make_shared<mcprt::test::event_log>();
  mcprt::event_subscriber_actor sink_;
  std::unique_ptr<mcprt::runtime> rt_;
  std::unique_ptr<spawned> node_;
  int http_port_ = 0;
  uint16_t caf_port_ = 0;
};

} // namespace

TEST_F(remote_test, a_remote_host_opens_a_session_calls_a_tool_and_sees_the_events_of_a_settings_edit) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  EXPECT_TRUE(rt_->remote());
  EXPECT_TRUE(rt_->connected());
  EXPECT_EQ(rt_->options().workspace, ws_);
  auto session = rt_->open_session();
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "echo"); })) << node_->err();
  // The daemon's own session and this host's share the pool entry.
  EXPECT_EQ(pool_refs("echo"), 2) << node_snapshot().dump(2);

  auto r = rt_->call_tool(session, "echo", "echo", {{"text", "over the middleman"}}, 30s);
  ASSERT_TRUE(r) << host_.render(r.error());
  EXPECT_NE(r->dump().find("over the middleman"), std::string::npos) << r->dump();
  auto tools = rt_->tools(session, "echo");
  ASSERT_TRUE(tools);
  EXPECT_FALSE(tools->empty());

  // A settings edit on the node reaches the host as typed events.
  auto from = log_->mark();
  write_file(user_settings(), json{{"mcpServers",
                                    {{"echo", test_server_config({"--tools", "1"})},
                                     {"second", test_server_config({"--name-prefix", "second_"})}}}}
                                .dump(2));
  auto finished = log_->wait([](const mcprt::event& ev) { return ev.kind == mcprt::event_kind::reconcile_finished; },
                             from, 30s);
  ASSERT_TRUE(finished.has_value()) << node_->err();
  auto update = log_->wait(
    [](const mcprt::event& ev) {
      return ev.kind == mcprt::event_kind::client_update && ev.data.value.value("server", "") == "second"
             && ev.data.value.value("status", "") == "connected";
    },
    from, 30s);
  ASSERT_TRUE(update.has_value()) << node_->err();
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "second"); }));
  auto second = rt_->call_tool(session, "second", "second_echo", {{"text", "edited in"}}, 30s);
  ASSERT_TRUE(second) << host_.render(second.error());
  EXPECT_NE(second->dump().find("edited in"), std::string::npos);

  // The rest of the interface reaches the node too.
  auto snap = rt_->snapshot();
  ASSERT_TRUE(snap.contains("servers")) << snap.dump(2);
  EXPECT_EQ(snap["workspace"], ws_.string());
  EXPECT_EQ(snap["servers"].size(), 2u);
  auto gating = rt_->gating_state();
  ASSERT_TRUE(gating);
  EXPECT_EQ(gating->servers.size(), 2u);
  auto reloaded = rt_->reload();
  EXPECT_TRUE(static_cast<bool>(reloaded));

  // Closing the session lets go of its pool references on the node.
  rt_->close_session(session);
  EXPECT_TRUE(wait_until([&] { return pool_refs("echo") == 1; }, 10s)) << node_snapshot().dump(2);
  auto closed = rt_->tools(session, "echo");
  ASSERT_FALSE(closed);
  EXPECT_TRUE(is_errc(closed.error(), mcprt::errc::unknown_session));
}

TEST_F(remote_test, a_host_whose_node_is_killed_gets_disconnected_and_failing_calls_not_a_hang) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  auto session = rt_->open_session();
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "echo"); })) << node_->err();

  // A call the node never answers: its server sleeps 60 s.
  std::mutex mtx;
  std::condition_variable cv;
  std::optional<caf::expected<nlohmann::json>> answer;
  mcprt::call_options co;
  co.timeout = 120s;
  rt_->call_tool_async(
    session, "echo", "sleep", {{"ms", 60000}},
    [&](caf::expected<nlohmann::json> r) {
      std::lock_guard<std::mutex> guard{mtx};
      answer = std::move(r);
      cv.notify_all();
    },
    co);
  auto from = log_->mark();
  node_->signal(SIGKILL);
  ASSERT_TRUE(node_->wait_exit(10s).has_value());
  node_.reset();

  auto gone = log_->wait([](const mcprt::event& ev) { return ev.kind == mcprt::event_kind::disconnected; }, from, 10s);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->data.value.value("node", ""), "127.0.0.1:" + std::to_string(caf_port_));
  EXPECT_FALSE(rt_->connected());
  {
    std::unique_lock<std::mutex> lock{mtx};
    ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return answer.has_value(); }));
    ASSERT_FALSE(*answer);
    EXPECT_TRUE(is_errc(answer->error(), mcprt::errc::disconnected)) << host_.render(answer->error());
  }
  // Later calls fail at once, each naming the node.
  auto started = clock_type::now();
  auto r = rt_->call_tool(session, "echo", "echo", {{"text", "x"}}, 60s);
  ASSERT_FALSE(r);
  EXPECT_TRUE(is_errc(r.error(), mcprt::errc::disconnected)) << host_.render(r.error());
  EXPECT_NE(host_.render(r.error()).find("127.0.0.1:" + std::to_string(caf_port_)), std::string::npos);
  auto t = rt_->tools(session, "echo");
  ASSERT_FALSE(t);
  EXPECT_TRUE(is_errc(t.error(), mcprt::errc::disconnected));
  EXPECT_FALSE(rt_->gating_state());
  EXPECT_TRUE(rt_->open_session().empty());
  EXPECT_LT(clock_type::now() - started, 5s) << "a call to a gone node waited";
  rt_->shutdown();
  rt_.reset();

  // Nothing listens: connect says so. A node back on the port: connect
  // works again, over TLS only.
  auto refused = mcprt::runtime::connect(host_, "127.0.0.1", caf_port_, {5s});
  EXPECT_FALSE(refused);
  ASSERT_TRUE(start_node(caf_port_));
  EXPECT_FALSE(mcprt::runtime::connect(host_, "127.0.0.1", caf_port_, {5s, false})) << "a plain connect was let in";
  ASSERT_TRUE(connect());
  auto again = rt_->open_session();
  ASSERT_FALSE(again.empty());
  EXPECT_TRUE(wait_until([&] { return session_connected(again, "echo"); })) << node_->err();
}

TEST_F(remote_test, the_node_closes_the_sessions_of_a_host_that_went_away) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(wait_until([&] { return pool_refs("echo") == 1; })) << node_snapshot().dump(2);
  // The embedding example, unchanged but for --connect, in a process of
  // its own.
  spawned host({"--connect", "127.0.0.1:" + std::to_string(caf_port_), "--wait-connected", "0", "--run-ms", "600000"},
               home_, {}, MCPRT_EMBED_BIN);
  // Events may come first.
  std::optional<std::string> opened;
  auto deadline = clock_type::now() + 30s;
  while (!opened && left_until(deadline) > 0ms) {
    auto l = host.line(left_until(deadline));
    if (!l) break;
    if (l->rfind("session ", 0) == 0) opened = l;
  }
  ASSERT_TRUE(opened.has_value()) << host.err();
  EXPECT_EQ(opened->rfind("session s", 0), 0u) << *opened;
  ASSERT_TRUE(wait_until([&] { return pool_refs("echo") == 2; })) << node_snapshot().dump(2) << host.err();

  host.signal(SIGKILL);
  ASSERT_TRUE(host.wait_exit(10s).has_value());
  // The connection's end is the host's: its session closes and lets go.
  EXPECT_TRUE(wait_until([&] { return pool_refs("echo") == 1; }, 15s)) << node_snapshot().dump(2) << node_->err();
  EXPECT_NE(node_->err().find("went away"), std::string::npos) << node_->err();
}

namespace {

/// A host's actor system that speaks TLS with `who`'s certificate
/// (make_certificates), trusting the CA.
struct tls_host_config : caf::actor_system_config {
  tls_host_config(const fs::path& dir, const std::string& who) {
    mcprt::add_mcprt_types(*this);
    openssl_certificate = (dir / (who + ".pem")).string();
    openssl_key = (dir / (who + ".key")).string();
    openssl_cafile = (dir / "ca.pem").string();
    load<caf::io::middleman>();
    load<caf::openssl::manager>();
  }
};

} // namespace

TEST_F(remote_test, over_tls_only_a_host_whose_certificate_the_ca_signed_connects) {
  auto tls = root_ / "tls";
  ASSERT_TRUE(make_certificates(tls)) << "the openssl command failed (scripts/setup.sh installs it)";
  ASSERT_TRUE(start_node(0, tls_flags(tls, "server")));
  mcprt::connect_options co;
  co.timeout = 10s;
  co.tls = true;
  {
    tls_host_config good_cfg(tls, "node");
    caf::actor_system good(good_cfg);
    auto rt = mcprt::runtime::connect(good, "127.0.0.1", caf_port_, co);
    ASSERT_TRUE(rt) << good.render(rt.error());
    auto session = (*rt)->open_session();
    ASSERT_FALSE(session.empty());
    // Asked again on an actor timer while the server connects: no sleep.
    mcprt::call_options wait;
    wait.timeout = 30s;
    wait.wait_connecting = 20s;
    auto answer = std::make_shared<std::promise<caf::expected<nlohmann::json>>>();
    auto result = answer->get_future();
    (*rt)->call_tool_async(
      session, "echo", "echo", {{"text", "over tls"}},
      [answer](caf::expected<nlohmann::json> r) { answer->set_value(std::move(r)); }, wait);
    ASSERT_EQ(result.wait_for(40s), std::future_status::ready);
    auto r = result.get();
    ASSERT_TRUE(r) << good.render(r.error());
    EXPECT_NE(r->dump().find("over tls"), std::string::npos);
    (*rt)->shutdown();
  }
  {
    tls_host_config rogue_cfg(tls, "rogue");
    caf::actor_system rogue(rogue_cfg);
    auto started = clock_type::now();
    auto rt = mcprt::runtime::connect(rogue, "127.0.0.1", caf_port_, co);
    EXPECT_FALSE(rt) << "a host with another CA's certificate connected";
    EXPECT_LT(clock_type::now() - started, 15s);
  }
  // Plain BASP to a TLS port: refused as well.
  auto plain = mcprt::runtime::connect(host_, "127.0.0.1", caf_port_, {5s, false});
  EXPECT_FALSE(plain) << "a plain connect was let in";
  // The node lives on through both.
  EXPECT_TRUE(node_snapshot().is_object()) << node_->err();
}

TEST_F(remote_test, a_remote_host_approves_restarts_and_rejects_on_the_node) {
  // A project server: it waits for approval.
  write_file(project_file(), json{{"mcpServers", {{"proj", test_server_config({"--name-prefix", "proj_"})}}}}.dump(2));
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  auto session = rt_->open_session();
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "echo"); }));
  auto why = rt_->unavailable_reason("proj");
  ASSERT_TRUE(why) << host_.render(why.error());
  EXPECT_EQ(why->reason, "pending_approval");
  auto out = rt_->call_tool(session, "proj", "proj_echo", {{"text", "x"}}, 10s);
  ASSERT_FALSE(out);
  EXPECT_TRUE(is_errc(out.error(), mcprt::errc::unavailable)) << host_.render(out.error());

  auto from = log_->mark();
  auto approved = rt_->approve("proj");
  ASSERT_TRUE(approved) << host_.render(approved.error());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "proj"); })) << node_->err();
  EXPECT_TRUE(log_->wait([](const mcprt::event& ev) { return ev.kind == mcprt::event_kind::pending_approval_changed; },
                         from, 10s));
  auto info = rt_->server_info(session, "proj");
  ASSERT_TRUE(info) << host_.render(info.error());
  EXPECT_EQ(info->status, mcprt::connection_status::connected);
  EXPECT_FALSE(info->tools.empty());

  // A restart on the node, with the node's shown connection ids.
  auto restarted = rt_->restart("proj");
  ASSERT_TRUE(restarted) << host_.render(restarted.error());
  ASSERT_EQ(restarted->size(), 1u);
  EXPECT_TRUE((*restarted)[0].restarted) << (*restarted)[0].reason;
  EXPECT_EQ((*restarted)[0].id.rfind("proj::", 0), 0u) << (*restarted)[0].id;
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "proj"); }));

  auto rejected = rt_->reject("proj");
  ASSERT_TRUE(rejected) << host_.render(rejected.error());
  EXPECT_TRUE(wait_until([&] {
    auto s = rt_->session_state(session);
    if (!s) return false;
    for (auto& srv : s->servers)
      if (srv.name == "proj") return false;
    return true;
  })) << node_->err();
  auto after = rt_->unavailable_reason("proj");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->reason, "rejected");
}

TEST_F(remote_test, a_node_that_stops_while_a_host_asks_exits_cleanly) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  auto session = rt_->open_session();
  ASSERT_FALSE(session.empty());
  // Snapshots run on the node's worker threads; the daemon stops while
  // they keep coming, and none may reach a runtime that is going.
  std::atomic<bool> stop{false};
  std::mutex mtx;
  std::condition_variable cv;
  int answered = 0;
  std::thread asker([&] {
    while (!stop) {
      auto s = rt_->snapshot();
      if (s.contains("servers")) {
        std::lock_guard<std::mutex> guard{mtx};
        ++answered;
        cv.notify_all();
      }
      if (!rt_->connected()) return;
    }
  });
  {
    std::unique_lock<std::mutex> lock{mtx};
    EXPECT_TRUE(cv.wait_for(lock, 30s, [&] { return answered >= 5; }));
  }
  node_->signal(SIGTERM);
  auto code = node_->wait_exit(30s);
  stop = true;
  asker.join();
  ASSERT_TRUE(code.has_value()) << node_->err();
  EXPECT_EQ(*code, 0) << node_->err();
  auto err = node_->err();
  EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
  EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
  node_.reset();
}

TEST_F(remote_test, a_hosts_own_server_waits_for_the_owners_approval_and_never_shadows_a_settings_server) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  auto marker = ws_ / "host-command-ran";
  std::vector<mcprt::server_config> mine{
    host_server("mine", test_server_config({"--name-prefix", "mine_"})),
    // The settings name `echo` with a command of the host's: it must not run.
    host_server("echo", json{{"command", "/bin/sh"}, {"args", {"-c", "touch " + marker.string()}}}),
  };
  auto session = rt_->open_session(mine);
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "echo"); })) << node_->err();
  auto echo = rt_->call_tool(session, "echo", "echo", {{"text", "settings"}}, 10s);
  ASSERT_TRUE(echo) << host_.render(echo.error());
  EXPECT_NE(echo->dump().find("settings"), std::string::npos) << echo->dump();
  // Not top tier: what the host sent waits for the node owner's approval.
  auto out = rt_->call_tool(session, "mine", "mine_echo", {{"text", "x"}}, 10s);
  ASSERT_FALSE(out);
  EXPECT_TRUE(is_errc(out.error(), mcprt::errc::unavailable)) << host_.render(out.error());
  EXPECT_NE(host_.render(out.error()).find("approv"), std::string::npos) << host_.render(out.error());

  // The owner approves it on the node (through its HTTP API); then it runs.
  auto approved = owner_client()->Post("/workspace/mcp/mine/approve", "", "application/json");
  ASSERT_TRUE(approved);
  EXPECT_EQ(approved->status, 200) << approved->body;
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "mine"); })) << node_->err();
  auto called = rt_->call_tool(session, "mine", "mine_echo", {{"text", "approved"}}, 10s);
  ASSERT_TRUE(called) << host_.render(called.error());
  // The settings' echo stays the one in use, and the host's command never ran.
  auto info = rt_->server_info(session, "echo");
  ASSERT_TRUE(info) << host_.render(info.error());
  EXPECT_EQ(info->status, mcprt::connection_status::connected);
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(remote_test, a_host_reaches_only_its_own_sessions_and_no_internal_actor) {
  ASSERT_TRUE(start_node());
  ASSERT_TRUE(connect());
  auto session = rt_->open_session();
  ASSERT_FALSE(session.empty());
  ASSERT_TRUE(wait_until([&] { return session_connected(session, "echo"); }));

  // Another host of the owner's: its own actor system, so its own CAF node.
  owner_host_config other_cfg{host_home_};
  caf::actor_system other{other_cfg};
  auto node = raw_node(other, caf_port_);
  ASSERT_TRUE(node);
  {
    caf::scoped_actor self{other};
    caf::error tools_error;
    self->request(node, 10s, mcprt::atom::tools_v, session, std::string{"echo"})
      .receive([](std::vector<mcprt::tool_info>&) {}, [&](caf::error& e) { tools_error = std::move(e); });
    EXPECT_TRUE(is_errc(tools_error, mcprt::errc::unknown_session)) << other.render(tools_error);
    caf::error call_error;
    self->request(node, 10s, mcprt::atom::call_v, session, std::string{"echo"}, std::string{"echo"},
                  mcprt::json_value{json{{"text", "stolen"}}}, std::string{"c1"}, mcprt::progress_sink_actor{})
      .receive([](mcprt::json_value&) {}, [&](caf::error& e) { call_error = std::move(e); });
    EXPECT_TRUE(is_errc(call_error, mcprt::errc::unknown_session)) << other.render(call_error);
    bool closed = true;
    self->request(node, 10s, mcprt::atom::close_v, session).receive([&](bool b) { closed = b; }, [](caf::error&) {});
    EXPECT_FALSE(closed);
    // The gating actor's own messages find no one behind the facade.
    caf::error internal;
    self->request(caf::actor_cast<caf::actor>(node), 10s, mcprt::atom::config_v, std::string{"echo"})
      .receive([](mcprt::server_config&) {}, [&](caf::error& e) { internal = std::move(e); });
    EXPECT_TRUE(static_cast<bool>(internal));
  }
  // The owner's host still has its session.
  auto out = rt_->call_tool(session, "echo", "echo", {{"text", "still mine"}}, 10s);
  ASSERT_TRUE(out) << host_.render(out.error());
  EXPECT_TRUE(session_connected(session, "echo"));
}
