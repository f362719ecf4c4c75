#include "core/budget_ledger.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <variant>
#include <vector>

using namespace mcprt;

namespace {

using events = std::vector<budget_event>;
using names = std::vector<std::string>;

// std::get and at() throw on a wrong kind or a missing event, which GoogleTest
// reports as a failure of the calling test.
const budget_warning_event& warning_at(const events& out, std::size_t i) {
  return std::get<budget_warning_event>(out.at(i));
}

const refused_batch_event& batch_at(const events& out, std::size_t i) {
  return std::get<refused_batch_event>(out.at(i));
}

names refused_names(const refused_batch_event& e) {
  names result;
  for (auto& r : e.refused)
    result.push_back(r.name);
  return result;
}

void reserve_all(budget_ledger& l, const names& xs, events& out) {
  for (auto& x : xs)
    l.reserve(x, out);
}

} // namespace

// -- reserve ------------------------------------------------------------------

TEST(BudgetLedgerReserve, ReturnsReservedOnFirstAcquireOfAName) {
  budget_ledger l{3, budget_mode::enforce};
  events out;
  EXPECT_EQ(l.reserve("foo", out), reserve_result::reserved);
  EXPECT_EQ(l.reserved_count(), 1u);
  EXPECT_TRUE(l.is_held("foo"));
}

TEST(BudgetLedgerReserve, ReturnsAlreadyHeldOnSecondAcquireOfSameName) {
  budget_ledger l{3, budget_mode::enforce};
  events out;
  l.reserve("foo", out);
  EXPECT_EQ(l.reserve("foo", out), reserve_result::already_held);
  EXPECT_EQ(l.reserved_count(), 1u);
}

TEST(BudgetLedgerReserve, AlreadyHeldWinsEvenWhenTheBudgetIsFull) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.reserve("a", out);
  out.clear();
  EXPECT_EQ(l.reserve("a", out), reserve_result::already_held);
  EXPECT_TRUE(out.empty());
}

TEST(BudgetLedgerReserve, ReturnsRefusedUnderEnforceModeWhenCapIsFull) {
  budget_ledger l{2, budget_mode::enforce};
  events out;
  EXPECT_EQ(l.reserve("a", out), reserve_result::reserved);
  EXPECT_EQ(l.reserve("b", out), reserve_result::reserved);
  out.clear();
  EXPECT_EQ(l.reserve("c", out), reserve_result::refused);
  EXPECT_EQ(l.reserved_count(), 2u);
  // A refusal is only recorded by record_refusal.
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(l.last_refused().empty());
}

TEST(BudgetLedgerReserve, StillReservesUnderWarnModePastCapMeasureOnly) {
  budget_ledger l{2, budget_mode::warn};
  events out;
  reserve_all(l, {"a", "b"}, out);
  EXPECT_EQ(l.reserve("c", out), reserve_result::reserved);
  EXPECT_EQ(l.reserved_count(), 3u);
}

TEST(BudgetLedgerReserve, OffModeIsANoOpNoSlotTracked) {
  budget_ledger l{1, budget_mode::off};
  events out;
  EXPECT_EQ(l.reserve("a", out), reserve_result::reserved);
  EXPECT_EQ(l.reserve("a", out), reserve_result::reserved);
  EXPECT_EQ(l.reserved_count(), 0u);
  EXPECT_FALSE(l.is_held("a"));
}

TEST(BudgetLedgerReserve, UnlimitedBudgetTracksNothingInAnyMode) {
  for (auto mode : {budget_mode::warn, budget_mode::enforce}) {
    budget_ledger l{std::nullopt, mode};
    events out;
    reserve_all(l, {"a", "b", "c"}, out);
    l.record_refusal("d", "stdio", out);
    EXPECT_EQ(l.reserved_count(), 0u) << to_string(mode);
    EXPECT_TRUE(out.empty()) << to_string(mode);
    EXPECT_TRUE(l.last_refused().empty()) << to_string(mode);
  }
}

// -- release ------------------------------------------------------------------

TEST(BudgetLedgerRelease, ClearsTheSlotAndReturnsTrueIfHeld) {
  budget_ledger l{2, budget_mode::enforce};
  events out;
  l.reserve("foo", out);
  EXPECT_TRUE(l.release("foo"));
  EXPECT_EQ(l.reserved_count(), 0u);
  EXPECT_FALSE(l.is_held("foo"));
}

TEST(BudgetLedgerRelease, ReturnsFalseIfNotHeldIdempotent) {
  budget_ledger l{2, budget_mode::enforce};
  events out;
  EXPECT_FALSE(l.release("never-reserved"));
  l.reserve("foo", out);
  EXPECT_TRUE(l.release("foo"));
  EXPECT_FALSE(l.release("foo"));
}

TEST(BudgetLedgerRelease, FreesCapacityForAFreshReservation) {
  budget_ledger l{2, budget_mode::enforce};
  events out;
  reserve_all(l, {"a", "b"}, out);
  EXPECT_EQ(l.reserve("c", out), reserve_result::refused);
  l.release("a");
  EXPECT_EQ(l.reserve("c", out), reserve_result::reserved);
  EXPECT_EQ(l.reserved(), (names{"b", "c"}));
}

// -- warning hysteresis -------------------------------------------------------

TEST(BudgetLedgerWarning, FiresOnceOnUpward75PercentCrossing) {
  budget_ledger l{4, budget_mode::enforce};
  events out;
  reserve_all(l, {"a", "b"}, out);
  EXPECT_TRUE(out.empty());
  l.reserve("c", out);
  ASSERT_EQ(out.size(), 1u);
  auto& w = warning_at(out, 0);
  EXPECT_EQ(w.scope, "workspace");
  EXPECT_EQ(w.budget, 4u);
  EXPECT_EQ(w.mode, budget_mode::enforce);
  EXPECT_EQ(w.reserved_count, 3u);
  EXPECT_EQ(w.live_count, 3u);
  EXPECT_DOUBLE_EQ(w.threshold_ratio, 0.75);
}

TEST(BudgetLedgerWarning, DoesNotRefireWhileAboveThreshold) {
  budget_ledger l{4, budget_mode::enforce};
  events out;
  reserve_all(l, {"a", "b", "c", "d"}, out);
  EXPECT_EQ(out.size(), 1u);
  // Dropping to 50% and climbing back is still above the re-arm line.
  l.release("d");
  l.release("c");
  reserve_all(l, {"c", "d"}, out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(BudgetLedgerWarning, RearmsOnlyAfterDroppingBelow37_5Percent) {
  budget_ledger l{4, budget_mode::enforce};
  events out;
  l.reserve("a", out); // 25%
  l.reserve("b", out); // 50%
  EXPECT_EQ(out.size(), 0u);
  l.reserve("c", out); // 75%: fires
  EXPECT_EQ(out.size(), 1u);
  l.release("a"); // 50%: not below 37.5%, stays disarmed
  l.reserve("a", out); // 75% again, silent because still disarmed
  EXPECT_EQ(out.size(), 1u);
  l.release("a"); // 50%
  l.release("b"); // 25%: re-arms silently
  EXPECT_EQ(out.size(), 1u);
  l.reserve("a", out); // 50%
  EXPECT_EQ(out.size(), 1u);
  l.reserve("b", out); // 75%: fires again
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(warning_at(out, 1).reserved_count, 3u);
}

TEST(BudgetLedgerWarning, ExactlyThreeEighthsDoesNotRearm) {
  budget_ledger l{8, budget_mode::warn};
  events out;
  reserve_all(l, {"a", "b", "c", "d", "e", "f"}, out); // 6/8 fires
  ASSERT_EQ(out.size(), 1u);
  for (auto name : {"d", "e", "f"})
    l.release(name); // 3/8 == 37.5%: the threshold is strict
  reserve_all(l, {"d", "e", "f"}, out);
  EXPECT_EQ(out.size(), 1u);
  for (auto name : {"c", "d", "e", "f"})
    l.release(name); // 2/8 re-arms
  reserve_all(l, {"c", "d", "e", "f"}, out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(BudgetLedgerWarning, CarriesWarnModeWhenOnlyWarning) {
  budget_ledger l{2, budget_mode::warn};
  events out;
  reserve_all(l, {"a", "b", "c"}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(warning_at(out, 0).mode, budget_mode::warn);
  EXPECT_EQ(warning_at(out, 0).reserved_count, 2u);
}

TEST(BudgetLedgerWarning, OffModeIsAHardNoOpNoEventsEver) {
  budget_ledger l{1, budget_mode::off};
  events out;
  reserve_all(l, {"a", "b", "c"}, out);
  l.begin_bulk_pass();
  l.record_refusal("d", "stdio", out);
  l.end_bulk_pass(out);
  l.record_refusal("e", "stdio", out);
  EXPECT_FALSE(l.release("a"));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(l.reserved().empty());
  EXPECT_TRUE(l.last_refused().empty());
}

TEST(BudgetLedgerWarning, SessionScopeReportsItsConnectedCountAsLiveCount) {
  budget_ledger l{4, budget_mode::warn, "session"};
  events out;
  l.set_live_count(1);
  reserve_all(l, {"a", "b", "c"}, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(warning_at(out, 0).scope, "session");
  EXPECT_EQ(warning_at(out, 0).reserved_count, 3u);
  EXPECT_EQ(warning_at(out, 0).live_count, 1u);
  l.set_live_count(std::nullopt);
  EXPECT_EQ(l.live_count(), 3u);
}

// -- refusals -----------------------------------------------------------------

TEST(BudgetLedgerRefusals, CoalescesPerPassRefusalsIntoOneRefusedBatchEvent) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.reserve("a", out);
  out.clear(); // a's warning
  std::vector<std::pair<std::string, std::string>> refusals{
    {"b", "stdio"}, {"c", "sse"}, {"d", "stdio"}};
  for (auto& [name, transport] : refusals) {
    EXPECT_EQ(l.reserve(name, out), reserve_result::refused);
    l.record_refusal(name, transport, out);
  }
  EXPECT_TRUE(out.empty());
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  auto& b = batch_at(out, 0);
  EXPECT_EQ(b.scope, "workspace");
  EXPECT_EQ(b.budget, 1u);
  EXPECT_EQ(b.mode, budget_mode::enforce);
  EXPECT_EQ(b.reserved_count, 1u);
  EXPECT_EQ(b.live_count, 1u);
  EXPECT_EQ(b.refused, (std::vector<refused_server>{{"b", "stdio", "budget_exhausted"},
                                                    {"c", "sse", "budget_exhausted"},
                                                    {"d", "stdio", "budget_exhausted"}}));
}

TEST(BudgetLedgerRefusals, ExposesRefusedNamesViaLastRefused) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.reserve("a", out);
  l.record_refusal("b", "stdio", out);
  l.record_refusal("c", "stdio", out);
  EXPECT_TRUE(l.last_refused().empty());
  l.end_bulk_pass(out);
  EXPECT_EQ(l.last_refused(), (names{"b", "c"}));
}

TEST(BudgetLedgerRefusals, ClearsRefusedNamesAtStartOfNextBulkPass) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.reserve("a", out);
  l.record_refusal("b", "stdio", out);
  l.end_bulk_pass(out);
  // Emission did not clear them: a snapshot between passes still sees them.
  EXPECT_EQ(l.last_refused(), (names{"b"}));
  l.begin_bulk_pass();
  EXPECT_TRUE(l.last_refused().empty());
  out.clear();
  l.end_bulk_pass(out);
  EXPECT_TRUE(out.empty());
}

TEST(BudgetLedgerRefusals, PreservesRefusalStatusAcrossPartialRecoveryAndEmitsOnlyNewRefusals) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  l.record_refusal("b", "http", out);
  l.end_bulk_pass(out);
  out.clear();
  l.begin_bulk_pass(true);
  EXPECT_EQ(l.last_refused(), (names{"a", "b"}));
  l.record_refusal("c", "sse", out);
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(refused_names(batch_at(out, 0)), (names{"c"}));
  EXPECT_EQ(l.last_refused(), (names{"a", "b", "c"}));
}

TEST(BudgetLedgerRefusals, LetsFullDiscoveryResetRefusalsWhenOverlappingAPartialRecovery) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.record_refusal("a", "stdio", out);
  out.clear();
  l.begin_bulk_pass(true);
  EXPECT_EQ(l.last_refused(), (names{"a"}));
  l.record_refusal("b", "stdio", out);
  l.begin_bulk_pass();
  EXPECT_TRUE(l.last_refused().empty());
  l.record_refusal("c", "stdio", out);
  l.end_bulk_pass(out);
  EXPECT_TRUE(out.empty());
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  // b was refused during the pass too; only the stale a is gone.
  EXPECT_EQ(refused_names(batch_at(out, 0)), (names{"b", "c"}));
  EXPECT_EQ(l.last_refused(), (names{"b", "c"}));
}

TEST(BudgetLedgerRefusals, ClearingTheFinalRefusalUpdatesStateWithoutEmittingAnEmptyRefusedBatch) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("srv", "stdio", out);
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(batch_at(out, 0).refused,
            (std::vector<refused_server>{{"srv", "stdio", "budget_exhausted"}}));
  out.clear();
  l.begin_bulk_pass(true);
  l.clear_refusal("srv");
  l.end_bulk_pass(out);
  EXPECT_TRUE(l.last_refused().empty());
  EXPECT_TRUE(out.empty());
}

TEST(BudgetLedgerRefusals, ClearingAPendingRefusalDropsItFromTheBatch) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  l.record_refusal("b", "stdio", out);
  l.clear_refusal("a");
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(refused_names(batch_at(out, 0)), (names{"b"}));
  EXPECT_EQ(l.last_refused(), (names{"b"}));
}

TEST(BudgetLedgerRefusals, NestedPassesEmitOnceAtTheOutermostEnd) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  l.begin_bulk_pass();
  l.record_refusal("b", "stdio", out);
  l.begin_bulk_pass(true);
  l.record_refusal("c", "stdio", out);
  EXPECT_EQ(l.bulk_depth(), 3u);
  l.end_bulk_pass(out);
  l.end_bulk_pass(out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(l.last_refused().empty());
  l.end_bulk_pass(out);
  EXPECT_EQ(l.bulk_depth(), 0u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(refused_names(batch_at(out, 0)), (names{"a", "b", "c"}));
}

TEST(BudgetLedgerRefusals, RefusalOutsideAPassEmitsABatchOfOneAtOnce) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  l.end_bulk_pass(out);
  out.clear();
  l.record_refusal("b", "", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(batch_at(out, 0).refused,
            (std::vector<refused_server>{{"b", "unknown", "budget_exhausted"}}));
  // Added to the snapshot, not replacing it; a repeat is not duplicated.
  EXPECT_EQ(l.last_refused(), (names{"a", "b"}));
  l.record_refusal("a", "stdio", out);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(l.last_refused(), (names{"a", "b"}));
}

TEST(BudgetLedgerRefusals, RefusingTheSameServerTwiceInAPassListsItOnce) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  l.record_refusal("b", "stdio", out);
  l.record_refusal("a", "http", out);
  l.end_bulk_pass(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(batch_at(out, 0).refused,
            (std::vector<refused_server>{{"a", "http", "budget_exhausted"},
                                         {"b", "stdio", "budget_exhausted"}}));
}

TEST(BudgetLedgerRefusals, WarnModeNeverRefusesAndNeverEmitsBatches) {
  budget_ledger l{1, budget_mode::warn};
  events out;
  l.begin_bulk_pass();
  for (auto name : {"a", "b", "c"})
    EXPECT_EQ(l.reserve(name, out), reserve_result::reserved);
  l.record_refusal("d", "stdio", out);
  l.end_bulk_pass(out);
  l.record_refusal("e", "stdio", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<budget_warning_event>(out[0]));
  EXPECT_TRUE(l.last_refused().empty());
}

TEST(BudgetLedgerRefusals, EndBulkPassAtDepthZeroIsHarmless) {
  budget_ledger l{1, budget_mode::enforce};
  events out;
  l.end_bulk_pass(out);
  EXPECT_EQ(l.bulk_depth(), 0u);
  // The depth did not go below zero: the next pass still opens and closes.
  l.begin_bulk_pass();
  l.record_refusal("a", "stdio", out);
  EXPECT_TRUE(out.empty());
  l.end_bulk_pass(out);
  EXPECT_EQ(out.size(), 1u);
}

// -- getters ------------------------------------------------------------------

TEST(BudgetLedgerGetters, ReportsConfiguredModeAndBudgetUnchanged) {
  budget_ledger l{5, budget_mode::warn};
  events out;
  reserve_all(l, {"a", "b", "c", "d", "e", "f"}, out);
  EXPECT_EQ(l.mode(), budget_mode::warn);
  EXPECT_EQ(l.budget(), std::optional<std::size_t>{5});
  EXPECT_EQ(l.scope(), "workspace");
  EXPECT_EQ(budget_ledger(std::nullopt, budget_mode::off).budget(), std::nullopt);
}

TEST(BudgetLedgerGetters, ReservedSlotsAreInInsertionOrderAndACopyIsIndependent) {
  budget_ledger l{3, budget_mode::enforce};
  events out;
  reserve_all(l, {"b", "a"}, out);
  auto copy = l.reserved();
  copy.push_back("mutate-me");
  EXPECT_EQ(l.reserved(), (names{"b", "a"}));
}

// -- parsing ------------------------------------------------------------------

TEST(BudgetMode, RoundTripsThroughText) {
  for (auto m : {budget_mode::off, budget_mode::warn, budget_mode::enforce})
    EXPECT_EQ(parse_budget_mode(to_string(m)), m);
  EXPECT_EQ(parse_budget_mode(" enforce\n"), budget_mode::enforce);
  EXPECT_EQ(parse_budget_mode("strict"), std::nullopt);
  EXPECT_EQ(parse_budget_mode(""), std::nullopt);
}

TEST(BudgetMode, ReserveResultsHaveWireNames) {
  EXPECT_EQ(to_string(reserve_result::reserved), "reserved");
  EXPECT_EQ(to_string(reserve_result::already_held), "already_held");
  EXPECT_EQ(to_string(reserve_result::refused), "refused");
}

TEST(BudgetValue, AcceptsPlainPositiveDecimalIntegers) {
  std::vector<std::pair<std::string, std::size_t>> table{
    {"1", 1}, {" 7 ", 7}, {"50", 50}, {"\t12\n", 12}, {"007", 7}};
  for (auto& [text, expected] : table) {
    auto r = parse_budget_value(text);
    EXPECT_EQ(r.value, std::optional<std::size_t>{expected}) << '"' << text << '"';
    EXPECT_EQ(r.error, "") << '"' << text << '"';
  }
}

TEST(BudgetValue, RejectsEverythingElseWithAReason) {
  for (auto text : {"0x10", "1e2", "1.0", "0", "-3", "+3", "", "   ", "abc", "12abc",
                    "99999999999999999999999"}) {
    auto r = parse_budget_value(text);
    EXPECT_EQ(r.value, std::nullopt) << '"' << text << '"';
    EXPECT_NE(r.error, "") << '"' << text << '"';
  }
  EXPECT_NE(parse_budget_value("0").error.find("positive"), std::string::npos);
  EXPECT_NE(parse_budget_value("99999999999999999999999").error.find("too large"),
            std::string::npos);
  EXPECT_NE(parse_budget_value("1e2").error.find("'1e2'"), std::string::npos);
}

TEST(BudgetLedger, AdoptHoldsPastTheBudgetAndOutsideRefusalsAreRecordedWithTheirReason) {
  budget_ledger l(1, budget_mode::enforce);
  events out;
  EXPECT_EQ(l.reserve("a", out), reserve_result::reserved);
  EXPECT_EQ(l.reserve("b", out), reserve_result::refused);
  EXPECT_EQ(l.adopt("b", out), reserve_result::reserved);
  EXPECT_EQ(l.adopt("b", out), reserve_result::already_held);
  EXPECT_EQ(l.reserved_count(), 2u);

  // Without a budget of its own a ledger records no refusal, unless another
  // budget refuses for it.
  budget_ledger none(std::nullopt, budget_mode::off);
  out.clear();
  none.record_refusal("x", "stdio", out, "fleet_unreachable");
  EXPECT_TRUE(out.empty());
  none.record_outside_refusals();
  none.record_refusal("x", "stdio", out, "fleet_unreachable");
  ASSERT_EQ(out.size(), 1u);
  auto& batch = std::get<refused_batch_event>(out[0]);
  EXPECT_EQ(batch.budget, 0u);
  ASSERT_EQ(batch.refused.size(), 1u);
  EXPECT_EQ(batch.refused[0].reason, "fleet_unreachable");
  EXPECT_TRUE(none.has_refusals());
}
