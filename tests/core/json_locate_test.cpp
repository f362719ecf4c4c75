#include "core/json_locate.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mcprt;

using views = std::vector<std::string_view>;

TEST(JsonValueText, GivesTheWholeValueAtAPath) {
  std::string text = R"( {"id": [1, {"x": "a]}\"b"}] , "n": null, "s": "q", "k": -1.5e3} )";
  EXPECT_EQ(json_value_text(text, {"id"}), R"([1, {"x": "a]}\"b"}])");
  EXPECT_EQ(json_value_text(text, {"id", "1", "x"}), R"("a]}\"b")");
  EXPECT_EQ(json_value_text(text, {"n"}), "null");
  EXPECT_EQ(json_value_text(text, {"k"}), "-1.5e3");
  EXPECT_EQ(json_value_text(text, {}), text.substr(1, text.size() - 2));
  EXPECT_FALSE(json_value_text(text, {"missing"}));
  EXPECT_FALSE(json_value_text(text, {"id", "2"}));
}

TEST(JsonValueText, LooksOnlyAtTheObjectsOwnMembers) {
  // A nested "id" is not the message's id.
  EXPECT_FALSE(json_value_text(R"({"params": {"id": 1}, "method": "x"})", {"id"}));
  EXPECT_FALSE(json_value_text(R"([{"id": 1}])", {"id"}));
  EXPECT_EQ(json_value_text(R"({"id": 1, "id": 2})", {"id"}), "2") << "the last, as the parser keeps";
}

TEST(JsonValueText, EndsOnTextThatIsNotJson) {
  EXPECT_FALSE(json_value_text(R"({"id": [1, 2)", {"id"}));
  EXPECT_FALSE(json_value_text(R"({"id": "open)", {"id"}));
  EXPECT_FALSE(json_value_text(R"({"id" 1})", {"id"}));
  EXPECT_FALSE(json_value_text("", {"id"}));
  std::string deep(100000, '[');
  EXPECT_FALSE(json_value_text(deep, {"0"})) << "nesting is counted, not recursed into";
}

TEST(JsonArrayElements, SplitsOneArray) {
  EXPECT_EQ(json_array_elements("[]"), views{});
  EXPECT_EQ(json_array_elements(" [ ] \n"), views{});
  EXPECT_EQ(json_array_elements(R"([{"s":"a],[}\"x"}, {"id":[2,{"z":3}]} ,7, "x", null])"),
            (views{R"({"s":"a],[}\"x"})", R"({"id":[2,{"z":3}]})", "7", R"("x")", "null"}));
}

TEST(JsonArrayElements, RejectsAnythingButExactlyOneArray) {
  for (const char* bad : {"", "{}", "7", "[", "[1", "[1,", "[1,]", "[,1]", "[1 2]", "[1] x", "[] []",
                          "[\"open]", "[{]", "]"})
    EXPECT_FALSE(json_array_elements(bad)) << bad;
}
