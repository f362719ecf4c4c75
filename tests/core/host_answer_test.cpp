// core/host_answer: what the daemon shows of a server's request for the
// host, and which HTTP answers it passes on.

#include "core/host_answer.hpp"

#include <gtest/gtest.h>

namespace mcprt {
namespace {

using nlohmann::json;

TEST(HostAnswer, AnElicitationAnswerPassesOnItsActionAndFlatContent) {
  auto a = check_elicitation_answer({{"action", "accept"}, {"content", {{"name", "Ada"}, {"age", 36}, {"ok", true}, {"tags", {"a", "b"}}}}, {"extra", 1}});
  ASSERT_TRUE(a.result) << a.error;
  EXPECT_EQ(*a.result, (json{{"action", "accept"}, {"content", {{"name", "Ada"}, {"age", 36}, {"ok", true}, {"tags", {"a", "b"}}}}}));
  // Content goes with accept only.
  a = check_elicitation_answer({{"action", "decline"}, {"content", {{"name", "Ada"}}}});
  ASSERT_TRUE(a.result);
  EXPECT_EQ(*a.result, (json{{"action", "decline"}}));
  a = check_elicitation_answer({{"action", "cancel"}});
  ASSERT_TRUE(a.result);
  EXPECT_EQ(*a.result, (json{{"action", "cancel"}}));
}

TEST(HostAnswer, ABadElicitationAnswerIsRefusedWithAReason) {
  for (auto body : {json::array(), json{{"action", "maybe"}}, json{{"action", 1}}, json::object(),
                    json{{"action", "accept"}, {"content", "Ada"}},
                    json{{"action", "accept"}, {"content", {{"name", {{"nested", 1}}}}}},
                    json{{"action", "accept"}, {"content", {{"list", {1, 2}}}}}}) {
    auto a = check_elicitation_answer(body);
    EXPECT_FALSE(a.result) << body.dump();
    EXPECT_FALSE(a.refusal) << body.dump();
    EXPECT_FALSE(a.error.empty()) << body.dump();
  }
  json many = json::object();
  for (int i = 0; i < 257; ++i)
    many["f" + std::to_string(i)] = i;
  EXPECT_FALSE(check_elicitation_answer({{"action", "accept"}, {"content", many}}).error.empty());
}

TEST(HostAnswer, ASamplingAnswerIsAResultOrARefusal) {
  auto a = check_sampling_answer(
    {{"role", "assistant"}, {"content", {{"type", "text"}, {"text", "hi"}}}, {"model", "m"}, {"stopReason", "endTurn"}, {"x", 1}});
  ASSERT_TRUE(a.result) << a.error;
  EXPECT_EQ(*a.result, (json{{"role", "assistant"}, {"content", {{"type", "text"}, {"text", "hi"}}}, {"model", "m"}, {"stopReason", "endTurn"}}));
  a = check_sampling_answer({{"role", "assistant"}, {"content", json::array({{{"type", "text"}, {"text", "hi"}}})}, {"model", "m"}});
  EXPECT_TRUE(a.result) << a.error;
  a = check_sampling_answer({{"error", {{"message", "no"}}}});
  EXPECT_FALSE(a.result);
  EXPECT_EQ(a.refusal, std::optional<std::string>("no"));
  a = check_sampling_answer({{"error", {{"message", std::string(10000, 'x')}}}});
  ASSERT_TRUE(a.refusal);
  EXPECT_EQ(a.refusal->size(), max_host_text_bytes);
  for (auto body : {json{{"role", "system"}, {"content", {{"type", "text"}}}, {"model", "m"}},
                    json{{"role", "assistant"}, {"content", "hi"}, {"model", "m"}},
                    json{{"role", "assistant"}, {"content", json::array()}, {"model", "m"}},
                    json{{"role", "assistant"}, {"content", {{"type", "text"}}}},
                    json{{"role", "assistant"}, {"content", {{"type", "text"}}}, {"model", "m"}, {"stopReason", 3}},
                    json{{"error", "no"}}, json{{"error", {{"message", 1}}}}, json(5)}) {
    auto b = check_sampling_answer(body);
    EXPECT_FALSE(b.result) << body.dump();
    EXPECT_FALSE(b.refusal) << body.dump();
    EXPECT_FALSE(b.error.empty()) << body.dump();
  }
}

TEST(HostAnswer, LargeParamsAreCutToTheirMessage) {
  json small{{"message", "Name?"}, {"requestedSchema", {{"type", "object"}}}};
  EXPECT_EQ(bounded_host_params(small), small);
  json big{{"message", std::string(5000, 'm')}, {"requestedSchema", {{"description", std::string(100000, 'd')}}}};
  auto cut = bounded_host_params(big);
  EXPECT_EQ(cut["truncated"], true);
  EXPECT_GT(cut["bytes"].get<std::size_t>(), 100000u);
  EXPECT_EQ(cut["message"].get<std::string>().size(), max_host_text_bytes);
  EXPECT_FALSE(cut.contains("requestedSchema"));
  // A cut inside a UTF-8 sequence does not leave half of it.
  json multibyte{{"message", std::string(max_host_text_bytes - 1, 'a') + "\xc3\xa9"}, {"pad", std::string(70000, 'p')}};
  auto m = bounded_host_params(multibyte)["message"].get<std::string>();
  EXPECT_EQ(m, std::string(max_host_text_bytes - 1, 'a'));
  EXPECT_EQ(bounded_host_params(json::array({1})), json::object());
}

} // namespace
} // namespace mcprt
