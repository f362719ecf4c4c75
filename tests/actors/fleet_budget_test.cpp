// The budget server's actor on CAF's test coordinator. The leases' expiry
// runs on real time and is covered by core/fleet_ledger's tests and, across
// processes, by tests/cli/fleet_test.cpp.

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

  fleet_grant reserve(const fleet_budget_actor& b, const std::string& node, const std::string& name) {
    return ask<fleet_grant>(b, atom::reserve_v, node, name).value_or(fleet_grant::unreachable);
  }
};

} // namespace

TEST_F(FleetBudget, GrantsUpToTheBudgetAcrossNodesAndTellsTheLinksWhenASlotGoesBack) {
  auto b = spawn(2);
  auto me = caf::actor_cast<fleet_listener_actor>(self);
  auto info = ask<fleet_info>(b, atom::renew_v, std::string{"c"}, std::vector<std::string>{}, me);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->budget, 2u);
  EXPECT_EQ(info->mode, "enforce");
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::reserved);
  EXPECT_EQ(reserve(b, "b", "fs"), fleet_grant::reserved);
  EXPECT_EQ(reserve(b, "a", "fs"), fleet_grant::already_held);
  EXPECT_EQ(reserve(b, "c", "fs"), fleet_grant::refused);
  EXPECT_TRUE(drain<atom::fleet_free>().empty());
  self->send(b, atom::release_v, std::string{"a"}, std::string{"fs"});
  sched.run();
  EXPECT_EQ(drain<atom::fleet_free>().size(), 1u) << "c waits for room: its link is told";
  EXPECT_EQ(reserve(b, "c", "fs"), fleet_grant::reserved);
  auto snap = json::parse(ask<std::string>(b, atom::snapshot_v).value_or("{}"));
  EXPECT_EQ(snap["reserved_count"], 2);
  EXPECT_EQ(snap["nodes"]["c"]["held"], json::array({"fs"}));
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
  auto info = ask<fleet_info>(b, atom::renew_v, std::string{"z"}, std::vector<std::string>(100001, "s"), me);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->reserved_count, 1u) << "an oversized holding is not adopted";
  // Invalid UTF-8 in a name still gives a JSON snapshot.
  EXPECT_EQ(reserve(b, "b", "\xff\xfe"), fleet_grant::reserved);
  auto text = ask<std::string>(b, atom::snapshot_v).value_or("");
  EXPECT_FALSE(json::parse(text, nullptr, false).is_discarded()) << text;
}
