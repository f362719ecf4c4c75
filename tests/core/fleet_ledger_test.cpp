#include "core/fleet_ledger.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <variant>
#include <vector>

using namespace mcprt;
using namespace std::chrono_literals;

namespace {

using events = std::vector<budget_event>;
using result = fleet_reserve_result;

fleet_ledger enforce(std::size_t budget, int64_t now = 0) {
  return fleet_ledger(budget, budget_mode::enforce, 10000ms, 0ms, now);
}

} // namespace

TEST(FleetLedger, CountsOneSlotPerNodeAndServerName) {
  auto l = enforce(3);
  events out;
  EXPECT_EQ(l.reserve("a", "fs", 0, out), result::reserved);
  EXPECT_EQ(l.reserve("b", "fs", 0, out), result::reserved);
  EXPECT_EQ(l.reserve("a", "fs", 0, out), result::already_held);
  EXPECT_EQ(l.reserve("c", "fs", 0, out), result::reserved);
  EXPECT_EQ(l.reserve("c", "git", 0, out), result::refused);
  EXPECT_EQ(l.reserved_count(), 3u);
  EXPECT_EQ(l.node_count(), 3u);
  EXPECT_TRUE(l.has_refusals());
  EXPECT_TRUE(l.release("b", "fs"));
  EXPECT_FALSE(l.release("b", "fs"));
  EXPECT_FALSE(l.release("nobody", "fs"));
  EXPECT_EQ(l.reserve("c", "git", 0, out), result::reserved);
  EXPECT_EQ(l.reserved_count(), 3u);
}

TEST(FleetLedger, WarnsAtThreeQuartersAndBatchesRefusalsLikeTheWorkspaceBudget) {
  auto l = enforce(4);
  events out;
  l.reserve("a", "s1", 0, out);
  l.reserve("a", "s2", 0, out);
  EXPECT_TRUE(out.empty());
  l.reserve("b", "s1", 0, out);
  ASSERT_EQ(out.size(), 1u);
  auto& w = std::get<budget_warning_event>(out[0]);
  EXPECT_EQ(w.scope, "fleet");
  EXPECT_EQ(w.reserved_count, 3u);
  out.clear();
  l.reserve("b", "s2", 0, out);
  EXPECT_EQ(l.reserve("c", "s1", 0, out), result::refused);
  ASSERT_EQ(out.size(), 1u);
  auto& batch = std::get<refused_batch_event>(out[0]);
  ASSERT_EQ(batch.refused.size(), 1u);
  EXPECT_EQ(batch.refused[0].name, "s1@c");
  EXPECT_EQ(batch.budget, 4u);
}

TEST(FleetLedger, ANodeThatStopsRenewingLosesItsSlotsWhenTheLeaseEnds) {
  auto l = enforce(2);
  events out;
  l.reserve("a", "fs", 1000, out);
  l.reserve("b", "fs", 1000, out);
  EXPECT_EQ(l.reserve("c", "fs", 1000, out), result::refused);
  EXPECT_EQ(l.next_expiry(), 11000);
  l.renew("a", {"fs"}, {}, 6000, out); // a renews, b does not
  EXPECT_TRUE(l.expire(10999).empty());
  EXPECT_EQ(l.expire(11000), std::vector<std::string>{"b"});
  EXPECT_EQ(l.reserved_count(), 1u);
  EXPECT_EQ(l.reserve("c", "fs", 11000, out), result::reserved);
  EXPECT_EQ(l.expire(16000), std::vector<std::string>{"a"});
  EXPECT_EQ(l.reserved_count(), 1u);
}

TEST(FleetLedger, ALateCheckMeansTheServerStalledSoLeasesMoveOnOncePerLease) {
  auto l = enforce(2); // lease 10 s
  events out;
  l.reserve("a", "fs", 1000, out);
  l.reserve("b", "fs", 5000, out);
  // Due at 11000, run at 14000: the server was not running (more than a
  // tenth of the lease late), and the renewals sent meanwhile are still
  // unread. Nobody expires; every lease runs at least half a lease more.
  EXPECT_TRUE(l.pardons(11000, 14000));
  EXPECT_TRUE(l.expire_due(11000, 14000).empty());
  EXPECT_EQ(l.reserved_count(), 2u);
  EXPECT_EQ(l.nodes().at("a").lease_end_ms, 19000);
  EXPECT_EQ(l.nodes().at("b").lease_end_ms, 19000);
  l.renew("b", {"fs"}, {}, 16000, out); // its renewal, read at last
  // Late again within the same lease: no second pardon, a expires.
  EXPECT_FALSE(l.pardons(19001, 20100));
  EXPECT_EQ(l.expire_due(19001, 20100), std::vector<std::string>{"a"});
  EXPECT_EQ(l.reserved_count(), 1u);
  // On time (a tenth of the lease late or less): the usual expiry.
  EXPECT_FALSE(l.pardons(26001, 26900));
  EXPECT_EQ(l.expire_due(26001, 26900), std::vector<std::string>{"b"});
  // A lease after the last pardon, a late check is pardoned again; a lease
  // that would run longer anyway is moved on by the delay.
  l.reserve("c", "fs", 30000, out);
  l.reserve("d", "fs", 39000, out);
  EXPECT_TRUE(l.pardons(40001, 43100));
  EXPECT_TRUE(l.expire_due(40001, 43100).empty());
  EXPECT_EQ(l.nodes().at("c").lease_end_ms, 48100);
  EXPECT_EQ(l.nodes().at("d").lease_end_ms, 52099);
}

TEST(FleetLedger, ARenewalLeavesTheReservesItsNodeStillWaitsForAsTheyAre) {
  auto l = enforce(1);
  events out;
  // The node sent reserve(x), then a renewal before x's answer came: the
  // reserve is decided here first, and the renewal, which could not list
  // x yet, names it as asked. x stays held.
  EXPECT_EQ(l.reserve("a", "x", 100, out), result::reserved);
  EXPECT_EQ(l.renew("a", {}, {"x"}, 150, out), 0u);
  EXPECT_EQ(l.reserved_count(), 1u);
  // y was refused before the renewal: being asked, it is not adopted past
  // the budget either.
  EXPECT_EQ(l.reserve("a", "y", 160, out), result::refused);
  EXPECT_EQ(l.renew("a", {"x"}, {"y"}, 170, out), 0u);
  EXPECT_EQ(l.reserved_count(), 1u);
  EXPECT_EQ(l.nodes().at("a").held, std::set<std::string>{"x"});
  // Listed by no one: x goes back.
  EXPECT_EQ(l.renew("a", {}, {}, 180, out), 1u);
  EXPECT_EQ(l.reserved_count(), 0u);
}

TEST(FleetLedger, ARenewalStatesTheWholeHolding) {
  auto l = enforce(3);
  events out;
  l.reserve("a", "x", 0, out);
  l.reserve("a", "y", 0, out);
  // y went away on the node (its release was lost), z is a claim.
  EXPECT_EQ(l.renew("a", {"x", "z"}, {}, 100, out), 1u);
  ASSERT_EQ(l.nodes().at("a").held, (std::set<std::string>{"x", "z"}));
  EXPECT_EQ(l.reserved_count(), 2u);
  EXPECT_EQ(l.renew("a", {"x", "z"}, {}, 200, out), 0u);
  EXPECT_EQ(l.nodes().at("a").lease_end_ms, 10200);
}

TEST(FleetLedger, AfterARestartItAdoptsClaimsAndGrantsNothingNewDuringTheGrace) {
  fleet_ledger l(2, budget_mode::enforce, 10000ms, 1500ms, 5000);
  events out;
  EXPECT_TRUE(l.recovering(5000));
  EXPECT_EQ(l.reserve("a", "new", 5000, out), result::recovering);
  EXPECT_EQ(l.node_count(), 0u);
  // Claims are what already runs: adopted even past the budget.
  l.renew("a", {"x", "y"}, {}, 5100, out);
  l.renew("b", {"x"}, {}, 5200, out);
  EXPECT_EQ(l.reserved_count(), 3u);
  EXPECT_FALSE(l.recovering(6500));
  EXPECT_EQ(l.reserve("b", "y", 6500, out), result::refused);
  l.release("a", "y");
  EXPECT_EQ(l.reserve("b", "y", 6500, out), result::refused); // still full: 2 of 2
  l.release("a", "x");
  EXPECT_EQ(l.reserve("b", "y", 6500, out), result::reserved);
  EXPECT_EQ(l.reserved_count(), 2u);
}

TEST(FleetLedger, WarnModeNeverRefuses) {
  fleet_ledger l(1, budget_mode::warn, 10000ms, 0ms, 0);
  events out;
  EXPECT_EQ(l.reserve("a", "x", 0, out), result::reserved);
  EXPECT_EQ(l.reserve("b", "x", 0, out), result::reserved);
  EXPECT_EQ(l.reserved_count(), 2u);
}
