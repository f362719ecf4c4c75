#include <gtest/gtest.h>

#include "core/fingerprint.hpp"
#include "core/gating.hpp"
#include "test_support.hpp"

using namespace mcprt;
using mcprt::test::make_map;
using nlohmann::json;
using strings = std::vector<std::string>;

namespace {

// Decisions keyed by (name, approval hash), as the store keys them.
struct fake_decisions {
  std::map<std::pair<std::string, std::string>, approval_state> records;

  void decide(const server_config& c, approval_state s) { records[{c.name, approval_hash(c)}] = s; }

  std::function<approval_state(const server_config&)> lookup() const {
    return [this](const server_config& c) {
      auto i = records.find({c.name, approval_hash(c)});
      return i == records.end() ? approval_state::pending : i->second;
    };
  }
};

server_map mixed_servers() {
  auto m = make_map(json::parse(R"({"u1": {"command": "x"}, "u2": {"command": "y"}})"), config_scope::user);
  for (auto& [n, c] : make_map(json::parse(R"({"p1": {"command": "p"}})"), config_scope::project))
    m.emplace(n, c);
  for (auto& [n, c] : make_map(json::parse(R"({"w1": {"command": "w"}})"), config_scope::workspace))
    m.emplace(n, c);
  for (auto& [n, c] : make_map(json::parse(R"({"s1": {"command": "s"}})"), config_scope::session))
    m.emplace(n, c);
  return m;
}

gating_result run(const server_map& servers, const fake_decisions& d,
                  std::optional<strings> allowed = std::nullopt, strings excluded = {},
                  std::optional<strings> bound = std::nullopt, bool trusted = true) {
  gating_input in;
  in.servers = &servers;
  in.settings_allowed = std::move(allowed);
  in.settings_excluded = std::move(excluded);
  in.launch_bound = std::move(bound);
  in.trusted = trusted;
  in.approval = d.lookup();
  return compute_gating(in);
}

strings admitted_names(const gating_result& g) {
  strings out;
  for (auto& [n, a] : g.servers)
    if (a.admitted) out.push_back(n);
  return out;
}

} // namespace

// Seed item 10: mcpGatingEqual.
TEST(GatingEqual, IsOrderInsensitiveAcrossTheThreeLists) {
  gating_lists a{strings{"a", "b"}, {"x", "y"}, {"p", "q"}};
  gating_lists b{strings{"b", "a"}, {"y", "x"}, {"q", "p"}};
  EXPECT_TRUE(gating_equal(a, b));
}

TEST(GatingEqual, TreatsAbsentAndEmptyAsEqualForExcludedAndPending) {
  gating_lists a{std::nullopt, {}, {}};
  gating_lists b{std::nullopt, strings{}, strings{}};
  EXPECT_TRUE(gating_equal(a, b));
}

TEST(GatingEqual, DetectsAMemberAddedToAnyList) {
  gating_lists base{strings{"a"}, {"x"}, {"p"}};
  auto more_allowed = base;
  more_allowed.allowed->push_back("b");
  auto more_excluded = base;
  more_excluded.excluded.push_back("y");
  auto more_pending = base;
  more_pending.pending.push_back("q");
  EXPECT_FALSE(gating_equal(base, more_allowed));
  EXPECT_FALSE(gating_equal(base, more_excluded));
  EXPECT_FALSE(gating_equal(base, more_pending));
}

TEST(GatingEqual, AllowedAbsentAndEmptyAreDifferent) {
  gating_lists allow_all{std::nullopt, {}, {}};
  gating_lists deny_all{strings{}, {}, {}};
  EXPECT_FALSE(gating_equal(allow_all, deny_all));
}

// Part F, K: the launch flag is an immutable upper bound.
TEST(LaunchBound, FlagAloneAppliesInFull) {
  EXPECT_EQ(effective_allowed(std::nullopt, strings{"b", "a"}), (strings{"a", "b"}));
}

TEST(LaunchBound, SettingsCannotWidenBeyondTheFlag) {
  EXPECT_EQ(effective_allowed(strings{"a", "b", "c"}, strings{"a", "b"}), (strings{"a", "b"}));
}

TEST(LaunchBound, SettingsMayNarrowWithinTheFlag) {
  EXPECT_EQ(effective_allowed(strings{"a"}, strings{"a", "b"}), strings{"a"});
}

TEST(LaunchBound, WithoutTheFlagSettingsWinUnbounded) {
  EXPECT_EQ(effective_allowed(strings{"a", "z"}, std::nullopt), (strings{"a", "z"}));
  EXPECT_EQ(effective_allowed(std::nullopt, std::nullopt), std::nullopt);
}

TEST(LaunchBound, EmptySettingsListStaysDenyAllUnderTheFlag) {
  EXPECT_EQ(effective_allowed(strings{}, strings{"a"}), strings{});
}

TEST(LaunchBound, GlobsOnEitherSideIntersectByMatching) {
  // The reference intersects literally, so a settings "*" under a flag would
  // deny everything; matching keeps what both sides admit.
  EXPECT_EQ(effective_allowed(strings{"*"}, strings{"a", "b"}), (strings{"a", "b"}));
  EXPECT_EQ(effective_allowed(strings{"x1", "y"}, strings{"x*"}), strings{"x1"});
}

// Seed item 11, through compute_gating.
TEST(Gating, HotReloadNarrowsWithinButNeverWidensBeyondTheLaunchFlag) {
  auto servers = make_map(json::parse(R"({"a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}})"));
  fake_decisions d;
  auto g = run(servers, d, strings{"a", "b", "c"}, {}, strings{"a", "b"});
  EXPECT_EQ(admitted_names(g), (strings{"a", "b"}));
  EXPECT_EQ(g.servers.at("c").reason, unavailable_reason::not_allowed);
  g = run(servers, d, strings{"a"}, {}, strings{"a", "b"});
  EXPECT_EQ(admitted_names(g), strings{"a"});
  g = run(servers, d, strings{"a", "b", "c"}, {}, std::nullopt);
  EXPECT_EQ(admitted_names(g), (strings{"a", "b", "c"}));
}

// Part F, H.
TEST(Gating, EmptyAllowListDeniesAll) {
  auto servers = make_map(json::parse(R"({"a": {"command": "a"}, "b": {"command": "b"}})"));
  auto g = run(servers, {}, strings{});
  EXPECT_TRUE(admitted_names(g).empty());
  ASSERT_TRUE(g.lists.allowed);
  EXPECT_TRUE(g.lists.allowed->empty());
  EXPECT_EQ(g.servers.at("a").reason, unavailable_reason::not_allowed);
}

TEST(Gating, ExcludedWinsOverAllowedAndSupportsGlobs) {
  auto servers = make_map(json::parse(R"({"a": {"command": "a"}, "tmp-1": {"command": "t"}, "x9": {"command": "x"}})"));
  auto g = run(servers, {}, strings{"a", "tmp-*", "x?"}, {"a", "tmp-*"});
  EXPECT_EQ(g.servers.at("a").reason, unavailable_reason::excluded);
  EXPECT_EQ(g.servers.at("tmp-1").reason, unavailable_reason::excluded);
  EXPECT_TRUE(g.servers.at("x9").admitted);
}

TEST(Gating, DisabledServersAreNotAdmitted) {
  auto servers = make_map(json::parse(R"({"a": {"command": "a", "disabled": true}})"));
  auto g = run(servers, {});
  EXPECT_EQ(g.servers.at("a").reason, unavailable_reason::disabled);
}

// Seed item 15: in an untrusted folder nothing is admitted.
TEST(Gating, UntrustedFolderAdmitsNothing) {
  auto servers = mixed_servers();
  auto g = run(servers, {}, std::nullopt, {}, std::nullopt, false);
  EXPECT_TRUE(admitted_names(g).empty());
  for (auto& [n, a] : g.servers)
    EXPECT_EQ(a.reason, unavailable_reason::untrusted) << n;
}

// Reference 4.8: getPendingGatedMcpServers / getPromptableMcpServers.
TEST(Approvals, GatesProjectAndWorkspaceServersOnly) {
  auto servers = mixed_servers();
  auto g = run(servers, {});
  EXPECT_EQ(g.lists.pending, (strings{"p1", "w1"}));
  EXPECT_EQ(g.promptable, (strings{"p1", "w1"}));
  EXPECT_EQ(admitted_names(g), (strings{"s1", "u1", "u2"}));
  EXPECT_EQ(g.servers.at("p1").reason, unavailable_reason::pending_approval);
  EXPECT_EQ(g.servers.at("p1").approval, approval_state::pending);
  EXPECT_FALSE(g.servers.at("u1").approval); // not gated: no approval state at all
}

TEST(Approvals, ApprovedServerLeavesPendingAndIsAdmitted) {
  auto servers = mixed_servers();
  fake_decisions d;
  d.decide(servers.at("p1"), approval_state::approved);
  auto g = run(servers, d);
  EXPECT_EQ(g.lists.pending, strings{"w1"});
  EXPECT_EQ(g.promptable, strings{"w1"});
  EXPECT_TRUE(g.servers.at("p1").admitted);
  EXPECT_EQ(g.servers.at("p1").approval, approval_state::approved);
}

TEST(Approvals, RejectedServerStaysPendingButIsNotPrompted) {
  auto servers = mixed_servers();
  fake_decisions d;
  d.decide(servers.at("w1"), approval_state::rejected);
  auto g = run(servers, d);
  EXPECT_EQ(g.lists.pending, (strings{"p1", "w1"}));
  EXPECT_EQ(g.promptable, strings{"p1"});
  EXPECT_EQ(g.servers.at("w1").reason, unavailable_reason::rejected);
}

// Part D: after a rejection, an edit that changes the hash prompts again;
// an unrelated edit does not.
TEST(Approvals, RejectedServerIsPromptedAgainOnlyWhenItsConfigChanges) {
  auto servers = mixed_servers();
  fake_decisions d;
  d.decide(servers.at("w1"), approval_state::rejected);
  auto unrelated = servers;
  unrelated.at("u1") = make_map(json::parse(R"({"u1": {"command": "changed"}})")).at("u1");
  EXPECT_EQ(run(unrelated, d).promptable, strings{"p1"});
  auto edited = servers;
  edited.at("w1") = make_map(json::parse(R"({"w1": {"command": "w", "args": ["--new"]}})"), config_scope::workspace).at("w1");
  auto g = run(edited, d);
  EXPECT_EQ(g.promptable, (strings{"p1", "w1"}));
  EXPECT_EQ(g.servers.at("w1").reason, unavailable_reason::pending_approval);
}

TEST(Approvals, ApprovalRevertsToPendingWhenTheConfigChanges) {
  auto servers = mixed_servers();
  fake_decisions d;
  d.decide(servers.at("p1"), approval_state::approved);
  auto edited = servers;
  edited.at("p1") = make_map(json::parse(R"({"p1": {"command": "p", "env": {"X": "1"}}})"), config_scope::project).at("p1");
  auto g = run(edited, d);
  EXPECT_EQ(g.servers.at("p1").reason, unavailable_reason::pending_approval);
  // A description-only edit keeps the approval.
  auto cosmetic = servers;
  cosmetic.at("p1") = make_map(json::parse(R"({"p1": {"command": "p", "description": "now documented"}})"), config_scope::project).at("p1");
  EXPECT_TRUE(run(cosmetic, d).servers.at("p1").admitted);
}

// Part E: decisions survive removal; an identical re-add reconnects silently.
TEST(Approvals, DecisionsSurviveRemoveAndIdenticalReAdd) {
  auto servers = mixed_servers();
  fake_decisions d;
  d.decide(servers.at("p1"), approval_state::approved);
  d.decide(servers.at("w1"), approval_state::rejected);
  auto without = servers;
  without.erase("p1");
  without.erase("w1");
  auto g0 = run(without, d);
  EXPECT_FALSE(g0.servers.count("p1"));
  auto g = run(servers, d);
  EXPECT_TRUE(g.servers.at("p1").admitted);
  EXPECT_EQ(g.servers.at("w1").reason, unavailable_reason::rejected);
  EXPECT_EQ(g.promptable, strings{});
}

TEST(Approvals, ANonGatedServerNeverNeedsApproval) {
  auto servers = make_map(json::parse(R"({"u": {"command": "x"}})"), config_scope::user);
  auto g = run(servers, {});
  EXPECT_TRUE(g.lists.pending.empty());
  EXPECT_TRUE(g.promptable.empty());
  EXPECT_TRUE(g.servers.at("u").admitted);
}

// Part F, B: why is a server unavailable?
TEST(UnavailableReason, ClassifiesEveryGate) {
  auto servers = mixed_servers();
  servers.emplace("off", make_map(json::parse(R"({"off": {"command": "o", "disabled": true}})")).at("off"));
  fake_decisions d;
  d.decide(servers.at("w1"), approval_state::rejected);
  removal_tracker removals;
  auto before = servers;
  before.emplace("gone", make_map(json::parse(R"({"gone": {"command": "g"}})")).at("gone"));
  removals.update(before);
  removals.update(servers);
  auto g = run(servers, d, strings{"u1", "p1", "w1", "s1", "off"}, {"s1"});
  EXPECT_EQ(unavailable_reason_for(g, removals, "u2"), unavailable_reason::not_allowed);
  EXPECT_EQ(unavailable_reason_for(g, removals, "s1"), unavailable_reason::excluded);
  EXPECT_EQ(unavailable_reason_for(g, removals, "p1"), unavailable_reason::pending_approval);
  EXPECT_EQ(unavailable_reason_for(g, removals, "w1"), unavailable_reason::rejected);
  EXPECT_EQ(unavailable_reason_for(g, removals, "off"), unavailable_reason::disabled);
  EXPECT_EQ(unavailable_reason_for(g, removals, "gone"), unavailable_reason::removed);
  EXPECT_EQ(unavailable_reason_for(g, removals, "u1"), std::nullopt);        // admitted
  EXPECT_EQ(unavailable_reason_for(g, removals, "never-heard"), std::nullopt); // never configured
}

TEST(UnavailableReason, AServerFilteredByANarrowedAllowListIsNotAllowedNotRemoved) {
  auto servers = make_map(json::parse(R"({"a": {"command": "a"}, "b": {"command": "b"}})"));
  removal_tracker removals;
  removals.update(servers); // the merged map is judged before the allow-list
  removals.update(servers);
  auto g = run(servers, {}, strings{"a"});
  EXPECT_EQ(unavailable_reason_for(g, removals, "b"), unavailable_reason::not_allowed);
}

TEST(RemovalTracker, RecordsRemovalsAndSelfHealsOnReAdd) {
  removal_tracker t;
  auto ab = make_map(json::parse(R"({"a": {"command": "a"}, "b": {"command": "b"}})"));
  auto a = make_map(json::parse(R"({"a": {"command": "a"}})"));
  t.update(ab);
  EXPECT_FALSE(t.was_removed("b"));
  t.update(a);
  EXPECT_TRUE(t.was_removed("b"));
  t.update(ab);
  EXPECT_FALSE(t.was_removed("b"));
}

TEST(Remedy, PendingApprovalNamesTheCommand) {
  EXPECT_NE(remedy(unavailable_reason::pending_approval, "gh").find("mcprt approve gh"), std::string::npos);
  for (auto r : {unavailable_reason::disabled, unavailable_reason::not_allowed, unavailable_reason::excluded,
                 unavailable_reason::rejected, unavailable_reason::untrusted, unavailable_reason::removed}) {
    EXPECT_FALSE(remedy(r, "x").empty());
    EXPECT_FALSE(to_string(r).empty());
  }
}
