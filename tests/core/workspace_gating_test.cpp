// The gating model fed the way the gating actor feeds it (set_contents:
// unchanged entries taken over, only touched servers merged and gated
// again) against the same model recomputed in full (set_documents), edit by
// edit: every observable answer must be the same.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/fingerprint.hpp"
#include "core/settings.hpp"
#include "core/workspace_gating.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

/// Admission of every server, as one comparable text.
std::map<std::string, std::string> admissions(const workspace_gating& m) {
  std::map<std::string, std::string> out;
  for (auto& [name, a] : m.gating().servers) {
    std::string s = a.admitted ? "+" : "-";
    if (a.reason) s += to_string(*a.reason);
    if (a.approval) s += "/" + std::to_string(static_cast<int>(*a.approval));
    if (a.problem) s += "/" + a.problem->message();
    out.emplace(name, s);
  }
  return out;
}

std::vector<std::string> unavailable(const workspace_gating& m) {
  std::vector<std::string> out;
  for (auto& u : m.admit({}).unavailable)
    out.push_back(u.name + ":" + to_string(u.reason));
  return out;
}

class IncrementalGating : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcprt-incgating-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    opts_.workspace = root_ / "ws";
    opts_.home = root_ / "home";
    opts_.environment = [](const std::string& k) -> std::optional<std::string> {
      if (k == "TOKEN") return std::string("t0ken");
      return std::nullopt;
    };
    approvals_ = std::make_unique<approvals_store>(root_ / "approvals.json");
    incremental_ = std::make_unique<workspace_gating>(opts_, *approvals_);
    full_ = std::make_unique<workspace_gating>(opts_, *approvals_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string path(config_scope scope) const {
    switch (scope) {
      case config_scope::user: return (root_ / "home/.mcprt/settings.json").string();
      case config_scope::project: return (root_ / "ws/.mcp.json").string();
      default: return (root_ / "ws/.mcprt/settings.json").string();
    }
  }

  /// Feeds both models the three layers; answers what both said about the
  /// change gate (they must agree).
  bool update() {
    std::vector<settings_content> files;
    std::vector<settings_document> docs;
    for (auto scope : {config_scope::user, config_scope::project, config_scope::workspace}) {
      auto& c = content_[scope];
      bool exists = !c.is_null();
      files.push_back({path(scope), scope, exists, c, std::nullopt});
      docs.push_back(document_from_json(path(scope), scope, exists, c));
    }
    bool a = incremental_->set_contents(std::move(files));
    bool b = full_->set_documents(std::move(docs));
    EXPECT_EQ(a, b);
    expect_same();
    return a;
  }

  void expect_same() {
    auto& a = *incremental_;
    auto& b = *full_;
    EXPECT_TRUE(servers_equal(a.merged().servers, b.merged().servers));
    EXPECT_EQ(a.merged().allowed, b.merged().allowed);
    EXPECT_EQ(a.merged().excluded, b.merged().excluded);
    EXPECT_EQ(a.merged().tool_sets, b.merged().tool_sets);
    EXPECT_EQ(admissions(a), admissions(b));
    EXPECT_EQ(a.gating().lists.pending, b.gating().lists.pending);
    EXPECT_EQ(a.gating().lists.allowed, b.gating().lists.allowed);
    EXPECT_EQ(a.gating().promptable, b.gating().promptable);
    EXPECT_TRUE(servers_equal(a.gating().expanded, b.gating().expanded));
    EXPECT_EQ(unavailable(a), unavailable(b));
    for (auto& [name, cfg] : a.merged().servers) {
      auto* x = a.admitted_config(name);
      auto* y = b.admitted_config(name);
      ASSERT_EQ(x == nullptr, y == nullptr) << name;
      if (x) EXPECT_TRUE(servers_equal(*x, *y)) << name;
    }
    // The incremental model's documents are what a fresh parse gives.
    ASSERT_EQ(a.documents().size(), b.documents().size());
    for (std::size_t i = 0; i < a.documents().size(); ++i) {
      EXPECT_TRUE(servers_equal(a.documents()[i].servers, b.documents()[i].servers)) << i;
      for (auto& [name, cfg] : a.documents()[i].servers)
        EXPECT_EQ(cfg.source, a.documents()[i].path);
    }
  }

  /// The names whose version moved since `since`, by changes().
  std::set<std::string> changed_since(uint64_t since) const {
    std::set<std::string> out;
    auto& changes = incremental_->changes();
    for (auto c = changes.upper_bound(since); c != changes.end(); ++c)
      out.insert(c->second);
    return out;
  }

  fs::path root_;
  workspace_options opts_;
  std::unique_ptr<approvals_store> approvals_;
  std::unique_ptr<workspace_gating> incremental_, full_;
  std::map<config_scope, json> content_;
};

TEST_F(IncrementalGating, EveryEditGivesWhatAFullRecomputeGives) {
  content_[config_scope::user] = json::parse(R"({"mcpServers": {
    "a": {"command": "a"}, "b": {"command": "b"},
    "c": {"command": "c", "env": {"T": "${TOKEN}"}},
    "m": {"command": "m", "env": {"T": "${MISSING}"}}}})");
  content_[config_scope::project] = json::parse(R"({"mcpServers": {"p": {"command": "p"}}})");
  content_[config_scope::workspace] = json::object();
  EXPECT_TRUE(update());
  ASSERT_TRUE(incremental_->admitted_config("c"));
  EXPECT_EQ(incremental_->admitted_config("c")->env.at("T"), "t0ken");
  EXPECT_EQ(incremental_->gating().servers.at("p").reason, unavailable_reason::pending_approval);

  // One server edited: only its version moves, and the others are not
  // merged again (their entries stay where they were).
  auto v = incremental_->latest_version();
  auto* untouched = &incremental_->merged().servers.at("b");
  content_[config_scope::user]["mcpServers"]["a"]["args"] = {"--edited"};
  EXPECT_TRUE(update());
  EXPECT_EQ(changed_since(v), std::set<std::string>{"a"});
  EXPECT_EQ(&incremental_->merged().servers.at("b"), untouched);

  // One added, one removed (and reported removed), one given a variable.
  v = incremental_->latest_version();
  content_[config_scope::user]["mcpServers"]["d"] = {{"command", "d"}};
  content_[config_scope::user]["mcpServers"].erase("b");
  content_[config_scope::user]["mcpServers"]["m"]["env"]["T"] = "${TOKEN}";
  EXPECT_TRUE(update());
  EXPECT_EQ(changed_since(v), (std::set<std::string>{"b", "d", "m"}));
  EXPECT_EQ(incremental_->reason("b"), unavailable_reason::removed);
  EXPECT_TRUE(incremental_->admitted_config("m"));

  // A workspace server shadows the user's `a`: gated, so pending.
  content_[config_scope::workspace] = json::parse(R"({"mcpServers": {"a": {"command": "a2"}}})");
  EXPECT_TRUE(update());
  EXPECT_EQ(incremental_->gating().servers.at("a").reason, unavailable_reason::pending_approval);

  // Editing the shadowed entry changes nothing that runs.
  v = incremental_->latest_version();
  content_[config_scope::user]["mcpServers"]["a"]["args"] = {"--again"};
  EXPECT_FALSE(update());
  EXPECT_TRUE(changed_since(v).empty());

  // Approved, then edited: pending again.
  auto& p = incremental_->merged().servers.at("p");
  approvals_->set(incremental_->project_root(), "p", approval_hash(p), approval_state::approved);
  EXPECT_TRUE(incremental_->refresh());
  EXPECT_TRUE(full_->refresh());
  expect_same();
  EXPECT_TRUE(incremental_->admitted_config("p"));
  content_[config_scope::project]["mcpServers"]["p"]["args"] = {"x"};
  EXPECT_TRUE(update());
  EXPECT_FALSE(incremental_->admitted_config("p"));

  // The same content again: nothing moves.
  v = incremental_->latest_version();
  EXPECT_FALSE(update());
  EXPECT_TRUE(changed_since(v).empty());

  // Lists change: an exclusion, then allow-lists in two scopes, under
  // which a server that comes or goes changes the intersection.
  content_[config_scope::workspace]["mcp"] = {{"excluded", {"d"}}};
  EXPECT_TRUE(update());
  EXPECT_EQ(incremental_->gating().servers.at("d").reason, unavailable_reason::excluded);
  content_[config_scope::user]["mcp"] = {{"allowed", {"a", "c", "x*"}}};
  content_[config_scope::workspace]["mcp"]["allowed"] = {"*"};
  EXPECT_TRUE(update());
  content_[config_scope::user]["mcpServers"]["x1"] = {{"command", "x1"}};
  EXPECT_TRUE(update());
  EXPECT_TRUE(incremental_->admitted_config("x1"));
  content_[config_scope::user]["mcpServers"].erase("x1");
  EXPECT_TRUE(update());

  // A layer that goes away and comes back.
  content_[config_scope::workspace] = nullptr;
  EXPECT_TRUE(update());
  content_[config_scope::workspace] = json::parse(R"({"mcpServers": {"w": {"command": "w"}}})");
  EXPECT_TRUE(update());
  // Back to the launch state of the workspace file but with a new server.
  content_[config_scope::user]["mcpServers"]["b"] = {{"command", "b"}};
  EXPECT_TRUE(update());
  EXPECT_FALSE(incremental_->reason("b").has_value() && *incremental_->reason("b") == unavailable_reason::removed);
}

TEST_F(IncrementalGating, AnEditOfAToolSetAloneReachesTheMergedSettings) {
  content_[config_scope::user] = json::parse(R"({"mcpServers": {"a": {"command": "a"}},
    "mcp": {"toolSets": {"r": {"servers": ["a"]}}}})");
  content_[config_scope::workspace] = json::object();
  EXPECT_TRUE(update());
  ASSERT_EQ(incremental_->merged().tool_sets.count("r"), 1u);
  content_[config_scope::user]["mcp"]["toolSets"]["r"]["tools"] = {"x_*"};
  content_[config_scope::workspace] = json::parse(R"({"mcp": {"toolSets": {"w": {}}}})");
  EXPECT_FALSE(update()) << "no server changed";
  EXPECT_EQ(incremental_->merged().tool_sets.at("r").tools, std::vector<std::string>{"x_*"});
  EXPECT_EQ(incremental_->merged().tool_sets.count("w"), 1u);
}

TEST_F(IncrementalGating, AnAllowListAloneLetsServersComeAndGoIncrementally) {
  content_[config_scope::user] = json::parse(R"({"mcp": {"allowed": ["s*"]},
    "mcpServers": {"s1": {"command": "s1"}, "t1": {"command": "t1"}}})");
  content_[config_scope::project] = json::object();
  content_[config_scope::workspace] = json::object();
  EXPECT_TRUE(update());
  auto v = incremental_->latest_version();
  content_[config_scope::user]["mcpServers"]["s2"] = {{"command", "s2"}};
  content_[config_scope::user]["mcpServers"]["t2"] = {{"command", "t2"}};
  EXPECT_TRUE(update());
  EXPECT_EQ(changed_since(v), (std::set<std::string>{"s2", "t2"}));
  EXPECT_TRUE(incremental_->admitted_config("s2"));
  EXPECT_EQ(incremental_->gating().servers.at("t2").reason, unavailable_reason::not_allowed);
}

TEST_F(IncrementalGating, AnEditOfMostServersIsGatedWholeAndGivesTheSameAnswers) {
  content_[config_scope::user] = json::parse(R"({"mcpServers": {}})");
  content_[config_scope::project] = json::object();
  content_[config_scope::workspace] = json::object();
  for (int i = 0; i < 100; ++i)
    content_[config_scope::user]["mcpServers"]["s" + std::to_string(i)] = {{"command", "s"}};
  content_[config_scope::project]["mcpServers"]["p"] = {{"command", "p"}};
  EXPECT_TRUE(update());
  auto v = incremental_->latest_version();
  for (int i = 0; i < 100; ++i)
    content_[config_scope::user]["mcpServers"]["s" + std::to_string(i)]["args"] = {"--edited"};
  EXPECT_TRUE(update());
  EXPECT_EQ(changed_since(v).size(), 100u); // the gated project server did not move
  EXPECT_EQ(incremental_->gating().lists.pending, (std::vector<std::string>{"p"}));
}

TEST(TakeSettingsValue, MovesUnchangedEntriesAndLeavesTheEditedAndRemovedBehind) {
  auto before = json::parse(R"({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"},
                                                "c": {"command": "c"}}})");
  auto previous = parse_settings_value("/u.json", config_scope::user, before);
  auto* a_before = &previous.servers.at("a");
  auto after = json::parse(R"({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b2"},
                                               "d": {"command": "d"}}})");
  std::vector<std::string> fresh;
  auto doc = take_settings_value("/u.json", config_scope::user, after, previous, fresh);
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(servers_equal(doc.servers, parse_settings_value("/u.json", config_scope::user, after).servers));
  EXPECT_EQ(&doc.servers.at("a"), a_before); // taken over, not copied
  EXPECT_EQ(fresh, (std::vector<std::string>{"b", "d"}));
  ASSERT_EQ(previous.servers.size(), 2u); // the old b, and c
  EXPECT_EQ(previous.servers.at("b").command, "b");
  EXPECT_TRUE(previous.servers.count("c"));
}

TEST(TakeSettingsValue, AnInvalidEntryFailsTheDocumentAsAFreshParseDoes) {
  auto previous = parse_settings_value("/u.json", config_scope::user,
                                       json::parse(R"({"mcpServers": {"a": {"command": "a"}}})"));
  auto bad = json::parse(R"({"mcpServers": {"a": {"command": "a"}, "b": {"command": 7}}})");
  std::vector<std::string> fresh;
  auto doc = take_settings_value("/u.json", config_scope::user, bad, previous, fresh);
  auto direct = parse_settings_value("/u.json", config_scope::user, bad);
  ASSERT_FALSE(doc.ok());
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(doc.error->message, direct.error->message);
  EXPECT_TRUE(doc.servers.empty());
}

} // namespace

TEST_F(IncrementalGating, AGatedSessionServerWaitsForApprovalAndLosesToASettingsServerOfItsName) {
  content_[config_scope::user] = json::parse(R"({"mcpServers": {"echo": {"command": "settings-echo"}}})");
  update();
  auto session_server = [](const std::string& name, const std::string& command, config_scope scope) {
    auto parsed = parse_server_config(name, json{{"command", command}}, scope);
    EXPECT_TRUE(parsed.config.has_value());
    return *parsed.config;
  };
  server_map host{{"echo", session_server("echo", "host-echo", config_scope::project)},
                  {"mine", session_server("mine", "host-mine", config_scope::project)}};
  auto adm = incremental_->admit(host);
  ASSERT_TRUE(adm.admitted.count("echo"));
  EXPECT_EQ(adm.admitted.at("echo").command.value_or(""), "settings-echo");
  EXPECT_FALSE(adm.admitted.count("mine"));
  auto out = std::find_if(adm.unavailable.begin(), adm.unavailable.end(), [](auto& u) { return u.name == "mine"; });
  ASSERT_NE(out, adm.unavailable.end());
  EXPECT_EQ(out->reason, unavailable_reason::pending_approval);

  approvals_->set(incremental_->project_root(), "mine", approval_hash(host.at("mine")), approval_state::approved);
  adm = incremental_->admit(host);
  ASSERT_TRUE(adm.admitted.count("mine"));
  EXPECT_EQ(adm.admitted.at("mine").command.value_or(""), "host-mine");

  // A top-tier session server (an embedder's own) still wins, unapproved.
  server_map top{{"echo", session_server("echo", "top-echo", config_scope::session)}};
  adm = incremental_->admit(top);
  ASSERT_TRUE(adm.admitted.count("echo"));
  EXPECT_EQ(adm.admitted.at("echo").command.value_or(""), "top-echo");
}
