#include <gtest/gtest.h>

#include "core/fingerprint.hpp"
#include "core/reconcile_plan.hpp"
#include "test_support.hpp"

using namespace mcprt;
using mcprt::test::make_map;
using nlohmann::json;
using strings = std::vector<std::string>;

namespace {

std::map<std::string, live_connection> live_from(const server_map& m) {
  std::map<std::string, live_connection> out;
  for (auto& [name, cfg] : m)
    out[name] = {connection_id(cfg), filter_key(cfg)};
  return out;
}

} // namespace

TEST(ReconcilePlan, IdenticalDesiredAndLiveKeepsEverything) {
  auto m = make_map(json::parse(R"({"a": {"command": "x"}, "b": {"command": "y"}})"));
  auto p = plan_reconcile(m, live_from(m));
  EXPECT_EQ(p.kept, (strings{"a", "b"}));
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.touched(), 0u);
}

// Seed item 13: 0 → 1 and 1 → 0.
TEST(ReconcilePlan, EmptyToOneAndBack) {
  auto one = make_map(json::parse(R"({"a": {"command": "x"}})"));
  auto up = plan_reconcile(one, {});
  EXPECT_EQ(up.added, strings{"a"});
  EXPECT_EQ(up.touched(), 1u);
  auto down = plan_reconcile({}, live_from(one));
  EXPECT_EQ(down.removed, strings{"a"});
  EXPECT_TRUE(down.added.empty());
  EXPECT_TRUE(down.kept.empty());
}

// Seed item 14: a changed transport restarts that server alone.
TEST(ReconcilePlan, FingerprintChangeRestartsOnlyThatServer) {
  auto before = make_map(json::parse(R"({"a": {"command": "x"}, "b": {"command": "y"}, "c": {"httpUrl": "u"}})"));
  for (auto [name, patch] : std::vector<std::pair<std::string, json>>{
         {"a", {{"command", "x2"}}}, {"a", {{"env", {{"K", "v"}}}}}, {"c", {{"httpUrl", "u2"}}},
         {"c", {{"headers", {{"H", "1"}}}}}}) {
    auto spec = json::object();
    for (auto& [n, cfg] : before)
      spec[n] = cfg.spec;
    spec[name].update(patch);
    auto p = plan_reconcile(make_map(spec), live_from(before));
    EXPECT_EQ(p.restarted, strings{name}) << patch;
    EXPECT_EQ(p.kept.size(), 2u) << patch;
    EXPECT_EQ(p.touched(), 1u);
  }
}

TEST(ReconcilePlan, FilterOnlyEditRefiltersWithoutReconnect) {
  auto before = make_map(json::parse(R"({"a": {"command": "x"}})"));
  for (auto patch : {json{{"includeTools", {"t"}}}, json{{"excludeTools", {"t"}}}, json{{"trust", true}}}) {
    json spec = {{"a", {{"command", "x"}}}};
    spec["a"].update(patch);
    auto p = plan_reconcile(make_map(spec), live_from(before));
    EXPECT_EQ(p.refiltered, strings{"a"}) << patch;
    EXPECT_EQ(p.touched(), 0u);
  }
  // A description change alone touches nothing at all.
  auto p = plan_reconcile(make_map(json::parse(R"({"a": {"command": "x", "description": "new"}})")), live_from(before));
  EXPECT_EQ(p.kept, strings{"a"});
}

TEST(ReconcilePlan, MixedChanges) {
  auto before = make_map(json::parse(R"({"keep": {"command": "k"}, "gone": {"command": "g"}, "edit": {"command": "e"}})"));
  auto after = make_map(json::parse(R"({"keep": {"command": "k"}, "edit": {"command": "e2"}, "new": {"command": "n"}})"));
  auto p = plan_reconcile(after, live_from(before));
  EXPECT_EQ(p.removed, strings{"gone"});
  EXPECT_EQ(p.restarted, strings{"edit"});
  EXPECT_EQ(p.added, strings{"new"});
  EXPECT_EQ(p.kept, strings{"keep"});
  EXPECT_EQ(p.touched(), 3u);
}

// The plan a session makes after a delta of its desired state walks the
// named servers alone; where nothing else moved it must equal the full plan.
TEST(ReconcilePlan, PlanOfTheTouchedServersEqualsTheFullPlan) {
  auto before = make_map(json::parse(
    R"({"a": {"command": "a"}, "gone": {"command": "g"}, "edit": {"command": "e"}, "m": {"command": "m"},
        "filter": {"command": "f"}, "z": {"command": "z"}})"));
  auto after = make_map(json::parse(
    R"({"a": {"command": "a"}, "edit": {"command": "e2"}, "m": {"command": "m"}, "new": {"command": "n"},
        "filter": {"command": "f", "excludeTools": ["x"]}, "z": {"command": "z"}})"));
  auto live = live_from(before);
  auto full = plan_reconcile(after, live);
  // A name the delta carried that did not move ("m") is kept, as in the full plan.
  auto touched =
    plan_reconcile(after, live, std::set<std::string>{"edit", "filter", "gone", "m", "new"}, names_of(live));
  EXPECT_EQ(touched.removed, full.removed);
  EXPECT_EQ(touched.restarted, full.restarted);
  EXPECT_EQ(touched.added, full.added);
  EXPECT_EQ(touched.refiltered, full.refiltered);
  EXPECT_EQ(touched.kept, full.kept);
  EXPECT_EQ(touched.removed, strings{"gone"});
  EXPECT_EQ(touched.restarted, strings{"edit"});
  EXPECT_EQ(touched.added, strings{"new"});
  EXPECT_EQ(touched.refiltered, strings{"filter"});
  EXPECT_EQ(touched.kept, (strings{"a", "m", "z"}));
  // Nothing touched: everything live is kept, nothing else happens.
  auto none = plan_reconcile(before, live, std::set<std::string>{}, names_of(live));
  EXPECT_EQ(none.kept, (strings{"a", "edit", "filter", "gone", "m", "z"}));
  EXPECT_TRUE(none.empty());
  // A withdrawn name that was never live touches nothing.
  auto ghost = plan_reconcile(before, live, std::set<std::string>{"never"}, names_of(live));
  EXPECT_TRUE(ghost.empty());
  EXPECT_EQ(ghost.kept.size(), 6u);
}

TEST(SharedNames, ListsTheArrayLessTheExceptedNames) {
  auto all = std::make_shared<const std::vector<std::string>>(strings{"a", "b", "c", "d", "e"});
  EXPECT_EQ(shared_names(all, {"b", "d"}), (strings{"a", "c", "e"}));
  EXPECT_EQ(shared_names(all, {"b", "d"}).size(), 3u);
  // The ends, runs, names that are not in the array, and a name twice.
  EXPECT_EQ(shared_names(all, {"a", "b", "e"}), (strings{"c", "d"}));
  EXPECT_EQ(shared_names(all, {"0", "bb", "c", "c", "z"}), (strings{"a", "b", "d", "e"}));
  EXPECT_EQ(shared_names(all, {"0", "bb", "c", "c", "z"}).size(), 4u);
  EXPECT_TRUE(shared_names(all, {"a", "b", "c", "d", "e"}).empty());
  EXPECT_EQ(shared_names(all, {"a", "b", "c", "d", "e"}).begin(), shared_names(all, {"a", "b", "c", "d", "e"}).end());
  EXPECT_TRUE(shared_names().empty());
  EXPECT_EQ(shared_names(), strings{});
  EXPECT_EQ(shared_names(nullptr, {"a"}), strings{});
  EXPECT_EQ(shared_names(strings{"x", "y"}).to_vector(), (strings{"x", "y"}));
  EXPECT_EQ(shared_names(all, {"c"}), shared_names(strings{"a", "b", "d", "e"}));
  EXPECT_NE(shared_names(all, {"c"}), shared_names(strings{"a", "b", "d"}));
  // The array is shared, never copied: the list sees the one it was given.
  EXPECT_EQ(&*shared_names(all, {}).begin(), &(*all)[0]);
  // A moved-from list is empty in its size as in its names.
  shared_names from(all, {"b"});
  shared_names to(std::move(from));
  EXPECT_EQ(to, (strings{"a", "c", "d", "e"}));
  EXPECT_EQ(from.size(), 0u); // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(from.begin(), from.end());
  shared_names assigned(strings{"q"});
  assigned = std::move(to);
  EXPECT_EQ(assigned.size(), 4u);
  EXPECT_EQ(to.size(), 0u); // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(to, strings{});
}
