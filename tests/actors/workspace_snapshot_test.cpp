// The workspace snapshot as one typed value: assembled from its parts and
// shown as JSON, without actors. Ids are shown keyed, servers are listed
// from gating and the session together, missing parts show as null.

#include <gtest/gtest.h>

#include "messages/workspace_snapshot.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

std::string keyed(const std::string& id) {
  return "shown:" + id;
}

snapshot_parts some_parts() {
  snapshot_parts p;
  p.version = "9.9.9";
  p.workspace = "/ws";
  p.capabilities = {"pool"};
  gating_snapshot g;
  g.servers.push_back({"live", "user", "stdio", "id-live", true, "", "", "live__"});
  g.servers.push_back({"broken", "project", "stdio", "id-broken", true, "", "approved", "broken__"});
  g.servers.push_back({"out", "project", "http", "id-out", false, "pending_approval", "pending", "out__"});
  g.errors = {"/ws/.mcp.json: line 3"};
  p.gating = g;
  session_snapshot s;
  s.generation = 4;
  s.servers.push_back({"live", "user", "stdio", "id-live", connection_status::connected, 42, 3, 1, ""});
  s.servers.push_back({"own", "session", "stdio", "id-own", connection_status::connecting, -1, 0, 0, ""});
  s.failed.push_back({"broken", "error", "exit code 3"});
  p.session = s;
  pool_snapshot pool;
  pool_entry_info e;
  e.id = "id-live";
  e.name = "live";
  e.refs = 1;
  e.pid = 42;
  e.restarts = 2;
  pool.entries.push_back(e);
  pool.subprocess_count = 1;
  p.pool = pool;
  budget_snapshot b;
  b.scope = "workspace";
  b.limited = true;
  b.budget = 4;
  b.mode = "warn";
  b.reserved_count = 3;
  p.budgets.push_back(b);
  return p;
}

} // namespace

TEST(WorkspaceSnapshot, ServersComeFromGatingAndTheSessionWithTheirStateAndKeyedIds) {
  json j = assemble(some_parts(), keyed);
  ASSERT_EQ(j["servers"].size(), 4u) << j.dump(2);
  std::vector<std::string> names;
  for (auto& s : j["servers"])
    names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"broken", "live", "out", "own"}));
  auto& broken = j["servers"][0];
  EXPECT_EQ(broken["status"], "error");
  EXPECT_EQ(broken["last_error"], "exit code 3");
  EXPECT_EQ(broken["approval"], "approved");
  auto& live = j["servers"][1];
  EXPECT_EQ(live["status"], "connected");
  EXPECT_EQ(live["pid"], 42);
  EXPECT_EQ(live["tools"], 3);
  EXPECT_EQ(live["restarts"], 2);
  EXPECT_EQ(live["fingerprint"], "shown:id-live");
  auto& out = j["servers"][2];
  EXPECT_EQ(out["status"], "disconnected");
  EXPECT_EQ(out["reason"], "pending_approval");
  EXPECT_TRUE(out["pid"].is_null());
  EXPECT_EQ(j["servers"][3]["scope"], "session");
  EXPECT_EQ(j["pool"]["entries"][0]["id"], "shown:id-live");
  EXPECT_EQ(j["reconcile"]["generation"], 4);
  EXPECT_EQ(j["budgets"][0]["status"], "warning") << "3 of 4 is past three quarters";
  EXPECT_EQ(j["errors"][0], "/ws/.mcp.json: line 3");
  EXPECT_EQ(j["v"], 1);
}

TEST(WorkspaceSnapshot, MissingPartsShowAsNullOrEmpty) {
  snapshot_parts p;
  p.workspace = "/ws";
  json j = assemble(p, keyed);
  EXPECT_TRUE(j["pool"].is_null());
  EXPECT_TRUE(j["fleet"].is_null());
  EXPECT_TRUE(j["servers"].empty());
  EXPECT_FALSE(j.contains("errors"));
  EXPECT_TRUE(j["reconcile"]["last_error"].is_null());
}

TEST(WorkspaceSnapshot, AServersInvalidUtf8ComesOutValid) {
  auto p = some_parts();
  p.session->servers[0].last_error = "bad \xff byte";
  json j = assemble(std::move(p), keyed);
  EXPECT_NO_THROW((void)j.dump());
}
