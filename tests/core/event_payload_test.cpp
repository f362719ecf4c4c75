#include "core/event_payload.hpp"

#include <gtest/gtest.h>

#include "core/untrusted_text.hpp"

using namespace mcprt;
using nlohmann::json;

namespace {

bool dumps_valid(const json& j) {
  try {
    return !first_invalid_utf8(j.dump()).has_value();
  } catch (const json::exception&) {
    return false;
  }
}

} // namespace

TEST(EventPayload, InvalidUtf8InStringsAndKeysIsReplaced) {
  json p = {{"server", "echo"},
            {"error", "server exited; last stderr: caf\xe9 \xff"},
            {"list", {"ok", "\xc3"}},
            {"nested", {{"k\xfe", {{"deeper", "\x80"}}}}}};
  ASSERT_FALSE(dumps_valid(p)); // nlohmann would throw on this
  EXPECT_TRUE(make_payload_safe(p));
  EXPECT_TRUE(dumps_valid(p));
  EXPECT_EQ(p["server"], "echo");
  EXPECT_EQ(p["error"], "server exited; last stderr: caf\xEF\xBF\xBD \xEF\xBF\xBD");
  EXPECT_EQ(p["list"][1], "\xEF\xBF\xBD");
  EXPECT_EQ(p["nested"]["k\xEF\xBF\xBD"]["deeper"], "\xEF\xBF\xBD");
}

TEST(EventPayload, ValidPayloadIsUntouched) {
  json p = {{"server", "échø ✓"}, {"tools", 3}, {"list", {1, 2, {{"a", nullptr}}}}};
  auto before = p;
  EXPECT_FALSE(make_payload_safe(p));
  EXPECT_EQ(p, before);
}

TEST(EventPayload, DeepNestingIsCutWithoutRecursion) {
  // Built iteratively: 100000 levels would overflow a recursive walk.
  json p = json::array();
  json* cur = &p;
  for (int i = 0; i < 100000; ++i) {
    cur->push_back(json::array());
    cur = &(*cur)[0];
  }
  EXPECT_TRUE(make_payload_safe(p, 4));
  EXPECT_EQ(p.dump(), R"([[[["<nested deeper than 4 levels>"]]]])");
}

