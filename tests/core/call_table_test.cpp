#include "core/call_table.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mcprt;
using namespace std::chrono_literals;

namespace {

const call_clock::time_point table_t0{};

call_slot table_slot(const std::string& server, const std::string& call_id, const std::string& owner = {},
               const std::string& tool = "t") {
  call_slot s;
  s.owner = owner;
  s.call_id = call_id;
  s.session = "s1";
  s.server = server;
  s.tool = tool;
  s.deadline = table_t0 + 1s;
  return s;
}

using keys = std::vector<std::string>;

} // namespace

TEST(CallTable, AKeyIsTheCallIdPrefixedByItsOwnerWhenItHasOne) {
  call_table t{0};
  EXPECT_EQ(t.admit(table_slot("a", "c-1")).key, "c-1");
  EXPECT_EQ(t.admit(table_slot("a", "c-1", "s3")).key, "s3/c-1");
  EXPECT_EQ(t.size(), 2u);
}

TEST(CallTable, ACallIdInFlightIsRefusedForItsOwnerOnlyAndFreeAgainOnceRemoved) {
  call_table t{0};
  ASSERT_FALSE(t.admit(table_slot("a", "c-1")).refused);
  auto again = t.admit(table_slot("b", "c-1"));
  ASSERT_TRUE(again.refused);
  EXPECT_EQ(again.refused->why, call_refusal::duplicate_id);
  EXPECT_FALSE(t.admit(table_slot("a", "c-1", "s3")).refused);
  ASSERT_TRUE(t.remove("c-1"));
  EXPECT_FALSE(t.admit(table_slot("a", "c-1")).refused);
}

TEST(CallTable, ABadCallIdIsRefusedAndCountsAgainstNothing) {
  call_table t{1};
  for (const std::string& id : std::vector<std::string>{"with space", "a/b", std::string(129, 'x')}) {
    auto r = t.admit(table_slot("a", id));
    ASSERT_TRUE(r.refused) << id;
    EXPECT_EQ(r.refused->why, call_refusal::bad_id);
  }
  EXPECT_EQ(t.in_flight("a"), 0u);
  EXPECT_FALSE(t.admit(table_slot("a", std::string(128, 'x'))).refused);
}

TEST(CallTable, ThePerServerLimitCountsEveryOwnerAndFreesOnRemove) {
  call_table t{2};
  ASSERT_FALSE(t.admit(table_slot("a", "c-1")).refused);
  ASSERT_FALSE(t.admit(table_slot("a", "c-1", "s3")).refused);
  auto third = t.admit(table_slot("a", "c-2"));
  ASSERT_TRUE(third.refused);
  EXPECT_EQ(third.refused->why, call_refusal::too_many_calls);
  EXPECT_NE(third.refused->message.find("max_calls_per_server"), std::string::npos);
  EXPECT_FALSE(t.admit(table_slot("b", "c-3")).refused) << "another server has its own share";
  t.remove("s3/c-1");
  EXPECT_FALSE(t.admit(table_slot("a", "c-2")).refused);
  EXPECT_EQ(t.in_flight("a"), 2u);
}

TEST(CallTable, NoLimitIsZero) {
  call_table t{0};
  for (int i = 0; i < 100; ++i)
    ASSERT_FALSE(t.admit(table_slot("a", "c-" + std::to_string(i))).refused);
  EXPECT_EQ(t.in_flight("a"), 100u);
}

TEST(CallTable, RequestsWithoutACallIdGetKeysNoCallerCanName) {
  call_table t{0};
  auto s = table_slot("a", "");
  s.tool.clear();
  s.method = "resources/read";
  auto a = t.admit(s);
  auto b = t.admit(s);
  ASSERT_FALSE(a.refused);
  ASSERT_FALSE(b.refused);
  EXPECT_NE(a.key, b.key);
  EXPECT_FALSE(is_valid_call_id(a.key));
}

TEST(CallTable, AnAttemptsAnswerIsKnownByItsSerialAndALaterAttemptHasANewOne) {
  call_table t{0};
  auto key = t.admit(table_slot("a", "c-1")).key;
  auto* s = t.find(key);
  ASSERT_TRUE(s);
  auto first = s->serial;
  EXPECT_TRUE(t.find(key, first));
  t.wait(*s, table_t0 + 50ms);
  EXPECT_FALSE(t.find(key, first)) << "a retry's predecessor must not answer it";
  auto second = t.ask_again(*s);
  EXPECT_TRUE(t.find(key, second));
  t.remove(key);
  auto reused = t.admit(table_slot("a", "c-1")).key;
  EXPECT_FALSE(t.find(reused, second)) << "a late answer must not reach a new call under the same id";
}

TEST(CallTable, DeadlinesAndRetriesComeDueAtTheirTime) {
  call_table t{0};
  auto early = table_slot("a", "c-1");
  early.deadline = table_t0 + 100ms;
  auto late = table_slot("a", "c-2");
  late.deadline = table_t0 + 500ms;
  t.admit(early);
  t.admit(late);
  t.wait(*t.find("c-2"), table_t0 + 150ms);
  EXPECT_EQ(t.expired(table_t0 + 99ms), keys{});
  EXPECT_EQ(t.expired(table_t0 + 100ms), keys{"c-1"});
  EXPECT_EQ(t.due(table_t0 + 149ms), keys{});
  EXPECT_EQ(t.due(table_t0 + 150ms), keys{"c-2"});
  EXPECT_EQ(t.due(table_t0 + 500ms), keys{}) << "a call past its deadline is not tried again";
  t.ask_again(*t.find("c-2"));
  EXPECT_EQ(t.due(table_t0 + 200ms), keys{}) << "asked already";
}

TEST(CallTable, ARequestIsAttributedToTheOneCallOfItsServerAndTool) {
  call_table t{0};
  t.admit(table_slot("a", "c-1", "", "read"));
  t.admit(table_slot("a", "c-2", "s3", "write"));
  t.admit(table_slot("b", "c-3", "", "read"));
  auto one = t.attribute("a", "read");
  ASSERT_TRUE(one.call);
  EXPECT_EQ(one.call->call_id, "c-1");
  EXPECT_EQ(one.in_flight, (keys{"c-1", "s3/c-2"})) << "a remote host's call is named by its key";
  t.admit(table_slot("a", "c-4", "", "read"));
  EXPECT_FALSE(t.attribute("a", "read").call) << "two calls of that tool: neither";
  EXPECT_FALSE(t.attribute("a", "").call) << "no tool named: none";
  EXPECT_EQ(t.attribute("c", "read").in_flight, keys{});
}
