// Black-box: a fleet node is who its connection says, not the name it
// sends. A real `mcprt budget-server`, a real node holding the fleet's only
// slot, and a peer over the real middleman that names itself after that
// node: it can neither release nor renew away the node's slot, nor take it.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/remote_actor.hpp>

#include "messages/fleet.hpp"
#include "mcprt/owner_tls.hpp"
#include "mcprt/runtime.hpp"
#include "tests/cli/daemon_test_util.hpp"

using namespace mcprt_cli_test;
using namespace std::chrono_literals;

namespace {


class fleet_identity_test : public cli_test {
protected:
  void TearDown() override {
    for (auto* p : {node_.get(), budget_server_.get()})
      if (p) {
        p->signal(SIGTERM);
        EXPECT_TRUE(p->wait_exit(30s).has_value()) << p->err();
      }
    node_.reset();
    budget_server_.reset();
    cli_test::TearDown();
  }

  json node_snapshot() const {
    httplib::Client c("127.0.0.1", node_port_);
    c.set_read_timeout(10, 0);
    c.set_bearer_token_auth(daemon_token(node_port_).c_str());
    auto r = c.Get("/workspace/mcp");
    return r && r->status == 200 ? json::parse(r->body, nullptr, false) : json(nullptr);
  }

  std::unique_ptr<spawned> budget_server_, node_;
  int caf_port_ = 0, node_port_ = 0;
};

TEST_F(fleet_identity_test, a_peer_naming_itself_after_a_node_cannot_release_renew_or_take_its_slot) {
  budget_server_ = std::make_unique<spawned>(
    std::vector<std::string>{"budget-server", "--caf-port", "0", "--budget", "1", "--lease-ms", "60000"}, home_);
  auto first = budget_server_->line(30s);
  ASSERT_TRUE(first && first->rfind("listening on caf+tls://", 0) == 0) << budget_server_->err();
  auto address = first->substr(first->find("://") + 3);
  caf_port_ = std::stoi(address.substr(address.rfind(':') + 1));

  write_file(user_settings(), json{{"mcpServers", {{"s0", test_server_config({"--tools", "1"})}}}}.dump(2));
  node_ = std::make_unique<spawned>(std::vector<std::string>{"serve", "--workspace", ws_.string(), "--home",
                                                             home_.string(), "--fleet-budget", address},
                                    home_);
  auto line = node_->line(60s);
  ASSERT_TRUE(line && line->rfind("listening on http://", 0) == 0) << node_->err();
  node_port_ = std::stoi(line->substr(line->rfind(':') + 1));
  daemon_tokens()[node_port_] = slurp(home_ / ".mcprt" / "token").substr(0, 64);
  auto connected = [&] {
    auto s = node_snapshot();
    const json* x = s.is_object() ? find_server(s, "s0") : nullptr;
    return x && x->value("status", "") == "connected";
  };
  // Checked again at each of the node's events, until a deadline.
  {
    auto deadline = clock_type::now() + 60s;
    sse_stream events(node_port_);
    while (!connected() && clock_type::now() < deadline)
      events.next(std::min<std::chrono::milliseconds>(left_until(deadline), 250ms));
  }
  ASSERT_TRUE(connected()) << node_snapshot().dump(2) << node_->err();

  // The peer holds the owner's key, as any process of the owner can: the
  // port's TLS admits it, and only its connection tells it apart.
  caf::actor_system_config cfg;
  mcprt::add_mcprt_types(cfg);
  auto tls = mcprt::use_owner_tls(cfg, home_);
  ASSERT_FALSE(tls) << caf::to_string(tls);
  caf::actor_system sys{cfg};
  auto budget =
    caf::openssl::remote_actor<mcprt::fleet_budget_actor>(sys, "127.0.0.1", static_cast<uint16_t>(caf_port_));
  ASSERT_TRUE(budget) << sys.render(budget.error());
  caf::scoped_actor peer{sys};
  auto books = [&] {
    json out;
    peer->request(*budget, 10s, mcprt::atom::snapshot_v)
      .receive([&](const std::string& text) { out = json::parse(text, nullptr, false); },
               [&](const caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  };
  auto before = books();
  ASSERT_EQ(before.value("reserved_count", 0), 1) << before.dump();
  ASSERT_EQ(before["nodes"].size(), 1u) << before.dump();
  auto victim = before["nodes"].begin().key();
  auto victim_connection = before["nodes"][victim].value("connection", "");
  ASSERT_FALSE(victim_connection.empty()) << before.dump();

  // Everything the node's own link would send, under its name.
  peer->send(*budget, mcprt::atom::release_v, victim, std::string{"s0"});
  mcprt::fleet_listener_actor no_link;
  peer->request(*budget, 10s, mcprt::atom::renew_v, victim, std::vector<std::string>{}, std::vector<std::string>{},
                no_link)
    .receive([](const mcprt::fleet_info&) {}, [&](const caf::error& e) { ADD_FAILURE() << sys.render(e); });
  mcprt::fleet_grant grant = mcprt::fleet_grant::reserved;
  peer->request(*budget, 10s, mcprt::atom::reserve_v, victim, std::string{"s0"})
    .receive([&](mcprt::fleet_grant g) { grant = g; }, [&](const caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(grant, mcprt::fleet_grant::refused) << "the fleet's one slot is the node's";

  auto after = books();
  EXPECT_EQ(after.value("reserved_count", 0), 1) << after.dump();
  // The peer is a node of its own now (it renewed), shown apart from the
  // node it named; the node still holds its slot.
  json held_by_victim;
  for (auto& [shown, n] : after["nodes"].items())
    if (n.value("connection", "") == victim_connection) held_by_victim = n["held"];
  EXPECT_EQ(held_by_victim, json::array({"s0"})) << after.dump();
  // The node still runs its server.
  auto s = node_snapshot();
  const json* x = s.is_object() ? find_server(s, "s0") : nullptr;
  ASSERT_TRUE(x) << s.dump();
  EXPECT_EQ(x->value("status", ""), "connected");
}

} // namespace
