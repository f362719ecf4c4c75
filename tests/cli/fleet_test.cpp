// The fleet budget, black-box: a real `mcprt budget-server` and
// real `mcprt serve` nodes with real test-server children, over CAF's
// middleman and HTTP on loopback. Every wait is on a condition with a
// deadline; the node's event stream wakes the checks.

#include <gtest/gtest.h>

#include "tests/cli/daemon_test_util.hpp"

using namespace mcprt_cli_test;

namespace {

/// One workspace daemon with its own home and workspace, and `servers`
/// user servers (s0, s1, ...: need no approval).
struct fleet_node {
  fleet_node(const fs::path& root, const std::string& name, int servers, const std::string& fleet,
             const std::vector<std::string>& extra = {}) {
    home = root / (name + "-home");
    ws = root / (name + "-ws");
    fs::create_directories(home);
    fs::create_directories(ws);
    json all = json::object();
    for (int i = 0; i < servers; ++i)
      all["s" + std::to_string(i)] = test_server_config({"--tools", "1"});
    write_file(home / ".mcprt" / "settings.json", json{{"mcpServers", all}}.dump(2));
    std::vector<std::string> args{"serve",         ws.string(), "--home", home.string(), "--debounce-ms", "50",
                                  "--fleet-budget", fleet};
    args.insert(args.begin() + 1, "--workspace");
    args.insert(args.end(), extra.begin(), extra.end());
    daemon = std::make_unique<spawned>(args, home);
    auto first = daemon->line(60s);
    if (!first || first->rfind("listening on http://", 0) != 0) {
      ADD_FAILURE() << name << ": no 'listening on' line\nstderr:\n" << daemon->err();
      return;
    }
    port = std::stoi(first->substr(first->rfind(':') + 1));
    daemon_tokens()[port] = slurp(home / ".mcprt" / "token").substr(0, 64);
  }

  json snapshot() const {
    if (port == 0) return json(nullptr);
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    c.set_bearer_token_auth(daemon_token(port).c_str());
    auto r = c.Get("/workspace/mcp");
    if (!r || r->status != 200) return json(nullptr);
    return json::parse(r->body, nullptr, false);
  }

  /// Servers connected now (0 when the node does not answer).
  int connected() const {
    auto s = snapshot();
    int n = 0;
    if (s.is_object())
      for (auto& srv : s["servers"])
        if (srv.value("status", "") == "connected") ++n;
    return n;
  }

  json fleet() const {
    auto s = snapshot();
    return s.is_object() ? s.value("fleet", json(nullptr)) : json(nullptr);
  }

  fs::path home, ws;
  std::unique_ptr<spawned> daemon;
  int port = 0;
};

class fleet_test : public cli_test {
protected:
  void TearDown() override {
    // Stopped, not killed: what a sanitizer reports on the way out (leaks
    // too) fails the test. Nodes first, so they hand their slots back.
    auto stop = [](spawned& p) {
      p.signal(SIGTERM);
      EXPECT_TRUE(p.wait_exit(30s).has_value()) << p.err();
      auto err = p.err();
      EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
      EXPECT_EQ(err.find("runtime error:"), std::string::npos) << err;
    };
    for (auto& n : nodes_)
      if (n->daemon) stop(*n->daemon);
    if (budget_server_) stop(*budget_server_);
    nodes_.clear();
    budget_server_.reset();
    cli_test::TearDown();
  }

  /// Starts the budget server (again on `port` when given); false with a
  /// test failure when it does not say where it listens.
  bool start_budget_server(int budget, int port = 0, int lease_ms = 2000, int grace_ms = 0,
                           const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"budget-server", "--caf-port", std::to_string(port), "--budget", std::to_string(budget),
                                  "--lease-ms", std::to_string(lease_ms), "--claim-grace-ms", std::to_string(grace_ms)};
    args.insert(args.end(), extra.begin(), extra.end());
    budget_server_ = std::make_unique<spawned>(args, home_);
    auto first = budget_server_->line(30s);
    if (!first || first->rfind("listening on caf", 0) != 0) {
      ADD_FAILURE() << "no 'listening on' line: " << first.value_or("<none>") << "\n" << budget_server_->err();
      return false;
    }
    fleet_address_ = first->substr(first->find("://") + 3);
    caf_port_ = std::stoi(fleet_address_.substr(fleet_address_.rfind(':') + 1));
    return true;
  }

  /// A node in a home of its own. Without --caf-tls-* flags it is the
  /// budget server's owner: it gets the owner's identity the budget server
  /// made in the fixture's home, unless `own_identity` (then it makes one
  /// of its own, which the budget server does not trust).
  fleet_node& add_node(const std::string& name, int servers, const std::vector<std::string>& extra = {},
                       bool own_identity = false) {
    bool flags = std::find(extra.begin(), extra.end(), "--caf-tls-cert") != extra.end();
    if (!flags && !own_identity) share_owner_identity(home_, root_ / (name + "-home"));
    nodes_.push_back(std::make_unique<fleet_node>(root_, name, servers, fleet_address_, extra));
    return *nodes_.back();
  }

  int connected_in_fleet() const {
    int n = 0;
    for (auto& node : nodes_)
      if (node->daemon) n += node->connected();
    return n;
  }

  /// Checks `pred` again at every event of `node` and at least every 250 ms.
  bool wait_until(const fleet_node& node, const std::function<bool()>& pred,
                  std::chrono::milliseconds timeout = 30s) const {
    auto deadline = clock_type::now() + timeout;
    auto events = std::make_unique<sse_stream>(node.port);
    for (;;) {
      if (pred()) return true;
      auto left = left_until(deadline);
      if (left <= 0ms) return false;
      auto step = std::min<std::chrono::milliseconds>(left, 250ms);
      if (events->status(step) == 200 && !events->ended()) {
        events->next(step);
      } else {
        // The node's stream is gone (it is stopping): wait the step out.
        ::poll(nullptr, 0, static_cast<int>(step.count()));
        events = std::make_unique<sse_stream>(node.port);
      }
    }
  }

  std::unique_ptr<spawned> budget_server_;
  std::string fleet_address_;
  int caf_port_ = 0;
  std::vector<std::unique_ptr<fleet_node>> nodes_;
};

/// The sizes of the refusal batches a node published, from its event ring.
std::vector<std::size_t> refusal_batches(const fleet_node& node) {
  std::vector<std::size_t> sizes;
  sse_stream replay(node.port, {{"Last-Event-ID", "0"}});
  if (replay.status() != 200) return sizes;
  while (auto ev = replay.next(500ms)) {
    if (ev->kind != "mcp_child_refused_batch") continue;
    auto j = ev->j();
    const json* refused = j.contains("refused") ? &j["refused"] : nullptr;
    if (!refused && j.contains("payload")) refused = &j["payload"]["refused"];
    sizes.push_back(refused && refused->is_array() ? refused->size() : 0);
  }
  return sizes;
}

} // namespace

TEST_F(fleet_test, three_nodes_share_a_budget_of_five_and_a_killed_node_gives_its_slots_back) {
  ASSERT_TRUE(start_budget_server(5, 0, 3000));
  // One after the other, so that who gets what is known: 4, then 1 of 4,
  // then none of 4.
  auto& a = add_node("a", 4);
  ASSERT_TRUE(wait_until(a, [&] { return a.connected() == 4; })) << a.snapshot().dump(2) << a.daemon->err();
  auto& b = add_node("b", 4);
  ASSERT_TRUE(wait_until(b, [&] {
    auto s = b.snapshot();
    return b.connected() == 1 && s.is_object() && s["budgets"].size() == 1 && s["budgets"][0]["refused"].size() == 3;
  })) << b.snapshot().dump(2) << b.daemon->err();
  auto& c = add_node("c", 4);
  ASSERT_TRUE(wait_until(c, [&] {
    auto s = c.snapshot();
    return s.is_object() && s["budgets"].size() == 1 && s["budgets"][0]["refused"].size() == 4;
  })) << c.snapshot().dump(2) << c.daemon->err();
  EXPECT_EQ(c.connected(), 0);
  EXPECT_EQ(connected_in_fleet(), 5);

  // The refusals arrived as one batch per pass.
  EXPECT_EQ(refusal_batches(b), std::vector<std::size_t>{3});
  EXPECT_EQ(refusal_batches(c), std::vector<std::size_t>{4});
  for (auto* n : {&a, &b, &c}) {
    auto s = n->snapshot();
    for (auto& srv : s["servers"])
      if (srv["status"] != "connected") {
        EXPECT_EQ(srv["reason"], "budget_exhausted") << srv.dump();
      }
  }

  // What the nodes hold adds up to what the fleet counts, in every node's
  // snapshot once its next renewal came back.
  ASSERT_TRUE(wait_until(c, [&] {
    uint64_t held = 0;
    for (auto* n : {&a, &b, &c}) {
      auto f = n->fleet();
      if (!f.is_object() || f["state"] != "connected" || f["reserved_count"] != 5 || f["budget"] != 5) return false;
      held += f["held"].get<uint64_t>();
    }
    return held == 5;
  })) << a.fleet().dump() << b.fleet().dump() << c.fleet().dump();
  auto status = run_mcprt({"status", "--workspace", b.ws.string()}, b.home);
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find("fleet: " + fleet_address_ + " connected, held here 1, fleet 5/5 over "),
            std::string::npos)
    << status.out;

  // SIGKILL a: its 4 slots return when its lease (3 s) runs out, and the
  // servers refused on b and c connect by themselves.
  a.daemon->signal(SIGKILL);
  ASSERT_TRUE(a.daemon->wait_exit(10s));
  a.daemon.reset();
  ASSERT_TRUE(wait_until(c, [&] { return connected_in_fleet() == 5; }, 20s))
    << b.snapshot().dump(2) << c.snapshot().dump(2) << budget_server_->err();
  EXPECT_EQ(b.connected() + c.connected(), 5);
}

TEST_F(fleet_test, a_budget_server_that_was_not_running_for_longer_than_a_lease_takes_no_live_nodes_slots) {
  ASSERT_TRUE(start_budget_server(2, 0, 2000, 0));
  auto& a = add_node("a", 2);
  ASSERT_TRUE(wait_until(a, [&] { return a.connected() == 2; })) << a.snapshot().dump(2) << a.daemon->err();
  auto& b = add_node("b", 1);
  ASSERT_TRUE(wait_until(b, [&] {
    auto s = b.snapshot();
    return s.is_object() && s["budgets"].size() == 1 && s["budgets"][0]["refused"].size() == 1;
  })) << b.snapshot().dump(2) << b.daemon->err();

  // The budget server is stopped for one and a half leases (the stimulus,
  // not a wait): a's renewals sent meanwhile sit unread. When it runs
  // again, its overdue lease check must not take a's slots, or b's server
  // would get one and the fleet would run 3 once a's renewal is read.
  budget_server_->signal(SIGSTOP);
  ::poll(nullptr, 0, 3000);
  budget_server_->signal(SIGCONT);
  ASSERT_TRUE(budget_server_->err_contains("ms late; every lease is moved on", 10s)) << budget_server_->err();
  bool overshoot = false;
  ASSERT_TRUE(wait_until(a, [&] {
    if (connected_in_fleet() > 2) overshoot = true;
    auto f = a.fleet();
    return overshoot || (f.value("state", "") == "connected" && f.value("reserved_count", 0) == 2 &&
                         f.value("nodes", 0) >= 1 && a.connected() == 2);
  })) << a.fleet().dump() << budget_server_->err();
  EXPECT_FALSE(overshoot);
  EXPECT_EQ(budget_server_->err().find("did not renew its lease"), std::string::npos) << budget_server_->err();
  EXPECT_EQ(b.connected(), 0);
}

TEST_F(fleet_test, nodes_keep_their_servers_while_the_budget_server_is_down_and_it_recovers_without_overshoot) {
  ASSERT_TRUE(start_budget_server(3, 0, 2000, 1000));
  auto& a = add_node("a", 2);
  ASSERT_TRUE(wait_until(a, [&] { return a.connected() == 2; })) << a.snapshot().dump(2) << a.daemon->err();
  auto& b = add_node("b", 2);
  ASSERT_TRUE(wait_until(b, [&] { return b.connected() == 1; })) << b.snapshot().dump(2) << b.daemon->err();

  // The budget server dies: connections stay, the snapshot says so, and a
  // server added now is refused.
  budget_server_->signal(SIGKILL);
  ASSERT_TRUE(budget_server_->wait_exit(10s));
  ASSERT_TRUE(wait_until(a, [&] { return a.fleet().value("status", json(nullptr)) == "fleet_unreachable"; }))
    << a.fleet().dump();
  EXPECT_EQ(a.connected(), 2);
  EXPECT_EQ(b.connected(), 1);
  json more = json::object();
  for (int i = 0; i < 3; ++i)
    more["s" + std::to_string(i)] = test_server_config({"--tools", "1"});
  write_file(a.home / ".mcprt" / "settings.json", json{{"mcpServers", more}}.dump(2));
  ASSERT_TRUE(wait_until(a, [&] {
    auto s = a.snapshot();
    auto* s2 = s.is_object() ? find_server(s, "s2") : nullptr;
    return s2 && (*s2)["reason"] == "budget_exhausted";
  })) << a.snapshot().dump(2);
  EXPECT_EQ(a.connected(), 2);

  // Back on the same port: the nodes claim what they run (3 of 3) before
  // anything new is granted, so the new server stays out and the fleet
  // never runs more than 3, at any sample.
  ASSERT_TRUE(start_budget_server(3, caf_port_, 2000, 1000));
  bool overshoot = false;
  ASSERT_TRUE(wait_until(a, [&] {
    int n = connected_in_fleet();
    if (n > 3) overshoot = true;
    auto fa = a.fleet(), fb = b.fleet();
    return fa.value("state", "") == "connected" && fb.value("state", "") == "connected" &&
           fa.value("reserved_count", 0) == 3 && fb.value("reserved_count", 0) == 3;
  })) << a.fleet().dump() << b.fleet().dump() << budget_server_->err();
  // Past the claim grace: s2 is still refused, since the fleet is full.
  auto past_grace = clock_type::now() + 1500ms;
  ASSERT_FALSE(wait_until(a, [&] {
    if (connected_in_fleet() > 3) overshoot = true;
    auto s = a.snapshot();
    auto* s2 = s.is_object() ? find_server(s, "s2") : nullptr;
    return overshoot || (clock_type::now() > past_grace && s2 && (*s2)["status"] == "connected");
  }, 3s));
  EXPECT_FALSE(overshoot);
  EXPECT_EQ(connected_in_fleet(), 3);
}

TEST_F(fleet_test, over_tls_only_a_node_whose_certificate_the_ca_signed_gets_a_slot) {
  auto tls = root_ / "tls";
  ASSERT_TRUE(make_certificates(tls)) << "the openssl command failed (scripts/setup.sh installs it)";
  ASSERT_TRUE(start_budget_server(2, 0, 2000, 0, tls_flags(tls, "server")));
  auto& good = add_node("good", 1, tls_flags(tls, "node"));
  ASSERT_TRUE(wait_until(good, [&] { return good.connected() == 1; })) << good.snapshot().dump(2) << good.daemon->err();
  EXPECT_EQ(good.fleet().value("state", ""), "connected");
  // Signed by another CA: the handshake fails, the node cannot reach the
  // fleet, and its server is refused.
  auto& rogue = add_node("rogue", 1, tls_flags(tls, "rogue"));
  ASSERT_TRUE(wait_until(rogue, [&] {
    auto fl = rogue.fleet();
    auto s = rogue.snapshot();
    auto* s0 = s.is_object() ? find_server(s, "s0") : nullptr;
    return fl.value("status", json(nullptr)) == "fleet_unreachable" && s0 && (*s0)["reason"] == "budget_exhausted";
  })) << rogue.snapshot().dump(2) << rogue.daemon->err();
  EXPECT_NE(rogue.fleet().value("error", json("")).get<std::string>().find("cannot connect"), std::string::npos);
  EXPECT_EQ(rogue.connected(), 0);
  // A node with no flags uses its owner's own identity, which the fleet's
  // CA did not sign: it cannot reach the budget server either.
  auto& stranger = add_node("stranger", 1, {}, true);
  ASSERT_TRUE(wait_until(stranger, [&] { return stranger.fleet().value("status", json(nullptr)) == "fleet_unreachable"; }))
    << stranger.fleet().dump();
  EXPECT_EQ(stranger.connected(), 0);
  EXPECT_FALSE(budget_server_->wait_exit(0ms).has_value()) << "the budget server lives on\n" << budget_server_->err();
  EXPECT_EQ(good.connected(), 1);
  EXPECT_EQ(good.fleet().value("state", ""), "connected");
}

/// Opens a TCP connection to 127.0.0.1:`port`, writes `bytes` and closes.
void send_and_close(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
    (void)!::write(fd, bytes.data(), bytes.size());
  ::close(fd);
}

// A failed handshake left OpenSSL's per-thread error queue full, and CAF's
// next read on an established connection of that thread took the stale
// error for its own: anyone who could reach the port could cut every node
// off, once per renewal.
TEST_F(fleet_test, over_tls_failed_handshakes_of_strangers_do_not_cut_off_a_connected_node) {
  auto tls = root_ / "tls";
  ASSERT_TRUE(make_certificates(tls)) << "the openssl command failed (scripts/setup.sh installs it)";
  ASSERT_TRUE(start_budget_server(2, 0, 300, 0, tls_flags(tls, "server")));
  auto& good = add_node("good", 1, tls_flags(tls, "node"));
  ASSERT_TRUE(wait_until(good, [&] { return good.connected() == 1 && good.fleet().value("state", "") == "connected"; }))
    << good.snapshot().dump(2) << good.daemon->err();
  // Garbage where a ClientHello belongs, every 20 ms for 3 s: about 30
  // renewals of the good node fall between a failure and the next stranger.
  auto until = clock_type::now() + 3s;
  int strangers = 0;
  while (clock_type::now() < until) {
    send_and_close(caf_port_, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    ++strangers;
    ::poll(nullptr, 0, 20);
  }
  EXPECT_GT(strangers, 50);
  EXPECT_EQ(good.fleet().value("state", ""), "connected");
  EXPECT_EQ(good.daemon->err().find("unreachable"), std::string::npos) << good.daemon->err();
  EXPECT_EQ(good.connected(), 1);
  EXPECT_FALSE(budget_server_->wait_exit(0ms).has_value()) << budget_server_->err();
}

TEST_F(fleet_test, bad_fleet_flags_are_refused_before_anything_starts) {
  auto r = mcprt({"serve", "--workspace", ws_.string(), "--fleet-budget", "nohost"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--fleet-budget"), std::string::npos) << r.err;
  r = mcprt({"budget-server", "--mode", "enforce"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  r = mcprt({"budget-server", "--budget", "3", "--caf-host", "0.0.0.0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("loopback"), std::string::npos) << r.err;
  r = mcprt({"budget-server", "--budget", "3", "--caf-tls-cert", "/nonexistent.pem"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("all three"), std::string::npos) << r.err;
  r = mcprt({"budget-server", "--budget", "3", "--caf-tls-cert", "/nonexistent.pem", "--caf-tls-key", "/x.key",
             "--caf-tls-ca", "/ca.pem"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a file"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--caf-tls-cert", "/a", "--caf-tls-key", "/b", "--caf-tls-ca", "/c"});
  EXPECT_EQ(r.code, 2);
  // Remote hosts: the node's port, and loopback only with the owner's own
  // identity.
  r = mcprt({"serve", "--workspace", ws_.string(), "--caf-port", "70000"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--caf-port"), std::string::npos) << r.err;
  r = mcprt({"serve", "--workspace", ws_.string(), "--caf-port", "0", "--caf-host", "0.0.0.0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("owner's own identity"), std::string::npos) << r.err;
}
