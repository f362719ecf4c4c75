// The budget server's actor on CAF's test coordinator. The leases' expiry
// runs on real time and is covered by core/fleet_ledger's tests and, across
// processes, by tests/cli/fleet_test.cpp.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/fleet_budget.hpp"
#include "actor_test_support.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

class FleetBudget : public actor_test {
protected:
  fleet_budget_actor spawn(std::size_t budget) {
    fleet_budget_options o;
    o.budget = budget;
    o.mode = budget_mode::enforce;
    o.claim_grace = 0ms;
    return track(spawn_fleet_budget(sys, o));
  }

  void TearDown() override {
    nodes.clear();
    actor_test::TearDown();
  }

  /// A node's link: an actor of its own, since the budget server knows a
  /// node by who sends, not by the name it gives.
  caf::scoped_actor& node(const std::string& name) {
    auto& n = nodes[name];
    if (!n) n = std::make_unique<caf::scoped_actor>(sys);
    return *n;
  }

  template <class R, class... Ts>
  std::optional<R> ask_as(caf::scoped_actor& who, const fleet_budget_actor& b, Ts&&... xs) {
    auto rh = who->request(b, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    if (!who->has_next_message()) return std::nullopt;
    std::optional<R> result;
    std::move(rh).receive([&](R& x) { result = std::move(x); }, [&](caf::error&) {});
    return result;
  }

  /// A reserve sent by node `sender`, naming itself `label` (itself when empty).
  fleet_grant reserve(const fleet_budget_actor& b, const std::string& sender, const std::string& name,
                      const std::string& label = {}) {
    return ask_as<fleet_grant>(node(sender), b, atom::reserve_v, label.empty() ? sender : label, name)
      .value_or(fleet_grant::unreachable);
  }

  std::map<std::string, std::unique_ptr<caf::scoped_actor>> nodes;
  const std::vector<std::string> no_names{};
};

} // namespace

TEST_F(FleetBudget, GrantsUpToTheBudgetAcrossNodesAndTellsTheLinksWhenASlotGoesBack) {
  auto b = spawn(2);
  auto me = caf::actor_cast<fleet_listener_actor>(self);
  auto info = ask_as<fleet_info>(node("c"), b, atom::renew_v, std::string{"c"}, std::vector<std::string>{}, no_names, me);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->budget, 2u);
  EXPECT_EQ(info->mode, "enforce");
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::reserved);
  EXPECT_EQ(reserve(b, "b", "fs"), fleet_grant::reserved);
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::already_held);
  EXPECT_EQ(reserve(b, "c", "fs"), fleet_grant::refused);
  EXPECT_TRUE(drain<atom::fleet_free>().empty());
  node("a")->send(b, atom::release_v, std::string{"a"}, std::string{"fs"});
  sched.run();
  EXPECT_EQ(drain<atom::fleet_free>().size(), 1u) << "c waits for room: its link is told";
  EXPECT_EQ(reserve(b, "c", "fs"), fleet_grant::reserved);
  auto snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 2);
  EXPECT_EQ(snap["nodes"]["c"]["held"], json::array({"fs"}));
}

TEST_F(FleetBudget, ARenewalSentBeforeAReservesAnswerNeitherGivesThatSlotBackNorClaimsIt) {
  auto b = spawn(1);
  auto me = caf::actor_cast<fleet_listener_actor>(self);
  auto& a = node("a");
  // A node's link sends reserve(x), then its timed renewal before x's
  // answer: the renewal cannot list x as held, and names it as asked.
  auto grant = a->request(b, caf::infinite, atom::reserve_v, std::string{"a"}, std::string{"x"});
  auto renewal = a->request(b, caf::infinite, atom::renew_v, std::string{"a"}, no_names,
                            std::vector<std::string>{"x"}, me);
  sched.run();
  fleet_grant g = fleet_grant::unreachable;
  std::move(grant).receive([&](fleet_grant x) { g = x; }, [](caf::error&) {});
  std::move(renewal).receive([](fleet_info&) {}, [](caf::error&) {});
  EXPECT_EQ(g, fleet_grant::reserved);
  auto snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 1) << "x still runs on a: its slot stays counted";
  EXPECT_TRUE(drain<atom::fleet_free>().empty()) << "no slot went back, so nobody is told of one";
  EXPECT_EQ(reserve(b, "b", "x"), fleet_grant::refused) << "the budget is full: no second x anywhere";
  // Refused while asked: a renewal naming y as asked does not claim it.
  EXPECT_EQ(reserve(b, "a", "y"), fleet_grant::refused);
  ask_as<fleet_info>(a, b, atom::renew_v, std::string{"a"}, std::vector<std::string>{"x"},
                     std::vector<std::string>{"y"}, me);
  snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 1) << snap.dump();
}

TEST_F(FleetBudget, RefusesWhatAPeerCouldUseToGrowTheBooksOrTakeAnotherNodesSlot) {
  auto b = spawn(5);
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::reserved);
  // With '@' in node ids, server "fs" of node "y@a" and server "fs@y" of
  // node "a" would share the key "fs@y@a": such a node id is refused.
  EXPECT_EQ(reserve(b, "y@a", "fs"), fleet_grant::refused);
  EXPECT_EQ(reserve(b, "", "fs"), fleet_grant::refused);
  EXPECT_EQ(reserve(b, "a", ""), fleet_grant::refused);
  EXPECT_EQ(reserve(b, "a", std::string(513, 'n')), fleet_grant::refused);
  EXPECT_EQ(reserve(b, std::string(513, 'n'), "fs"), fleet_grant::refused);
  auto me = caf::actor_cast<fleet_listener_actor>(self);
  auto info =
    ask_as<fleet_info>(node("z"), b, atom::renew_v, std::string{"z"}, std::vector<std::string>(100001, "s"), no_names,
                       me);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->reserved_count, 1u) << "an oversized holding is not adopted";
  // Invalid UTF-8 in a name still gives a JSON snapshot.
  EXPECT_EQ(reserve(b, "b", "\xff\xfe"), fleet_grant::reserved);
  auto text = ask<std::string>(b, atom::snapshot_v).value_or("");
  EXPECT_FALSE(json::parse(text, nullptr, false).is_discarded()) << text;
}

TEST_F(FleetBudget, ANodeIsWhoSendsNotTheNameItGivesSoNoNodeActsForAnother) {
  auto b = spawn(2);
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::reserved);
  EXPECT_EQ(reserve(b, "b", "fs"), fleet_grant::reserved);
  // Node "m" names itself "a": it releases, renews and reserves as "a".
  node("m")->send(b, atom::release_v, std::string{"a"}, std::string{"fs"});
  sched.run();
  auto me = caf::actor_cast<fleet_listener_actor>(self);
  ask_as<fleet_info>(node("m"), b, atom::renew_v, std::string{"a"}, std::vector<std::string>{}, no_names, me);
  EXPECT_EQ(reserve(b, "m", "fs", "a"), fleet_grant::refused) << "a's slot is still a's, and the budget is full";
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::already_held);
  auto snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 2) << snap.dump();
  EXPECT_EQ(snap["nodes"]["a"]["held"], json::array({"fs"})) << snap.dump();
  EXPECT_EQ(snap["nodes"]["b"]["held"], json::array({"fs"})) << snap.dump();
  // Its own releases still work.
  node("a")->send(b, atom::release_v, std::string{"whatever-it-calls-itself"}, std::string{"fs"});
  sched.run();
  EXPECT_EQ(reserve(b, "m", "fs", "a"), fleet_grant::reserved);
}

TEST_F(FleetBudget, AMessageWithNoSenderIsRefused) {
  auto b = spawn(2);
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::reserved);
  caf::anon_send(b, atom::release_v, std::string{"a"}, std::string{"fs"});
  sched.run();
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::already_held);
  auto snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 1);
}
