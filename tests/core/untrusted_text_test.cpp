#include "core/untrusted_text.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace mcprt;
using nlohmann::json;

TEST(Utf8, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xE9!"), 3u);                // Latin-1
  EXPECT_EQ(first_invalid_utf8("a\xC0\xAF"), 1u);               // overlong '/'
  EXPECT_EQ(first_invalid_utf8("ab\xED\xA0\x80"), 2u);          // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);        // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xE2\x82"), 2u);              // cut short at the end
  EXPECT_EQ(first_invalid_utf8(std::string("a\0b", 3)), std::nullopt);
}

TEST(Utf8, FindsABadByteAtAnyOffsetOfALongAsciiText) {
  // ASCII is skipped eight bytes at a time: a bad byte, or a good sequence
  // cut by a word's edge, must be seen wherever it falls.
  for (std::size_t at = 0; at < 40; ++at) {
    std::string text(48, 'x');
    text[at] = '\xE9';
    EXPECT_EQ(first_invalid_utf8(text), at) << at;
    std::string good = std::string(at, 'x') + "\xE2\x82\xAC" + std::string(20, 'y');
    EXPECT_EQ(first_invalid_utf8(good), std::nullopt) << at;
    std::string cut = std::string(at, 'x') + "\xE2\x82";
    EXPECT_EQ(first_invalid_utf8(cut), at) << at;
  }
}

TEST(Utf8, ReplacesMaximalSubpartsWithOneReplacementCharacterEach) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8("caf\xE9!"), "caf" + fffd + "!");
  // A truncated three-byte sequence is one maximal subpart; the byte after it starts anew.
  EXPECT_EQ(replace_invalid_utf8("\xE2\x82x"), fffd + "x");
  // Two stray continuation bytes are two subparts.
  EXPECT_EQ(replace_invalid_utf8("\x80\x80"), fffd + fffd);
  EXPECT_EQ(replace_invalid_utf8("\xFF"), fffd);
  std::string valid = "\xE2\x82\xAC ok";
  EXPECT_EQ(replace_invalid_utf8(valid), valid);
  EXPECT_EQ(first_invalid_utf8(replace_invalid_utf8("\xC3\x28\xA0\xA1\xF0\x28\x8C\xBC")), std::nullopt);
}

TEST(Display, EscapesWhatCouldForgeALineOrReorderIt) {
  EXPECT_EQ(escape_for_display("name"), "name");
  EXPECT_EQ(escape_for_display("a\nINFO forged"), "a\\nINFO forged");
  EXPECT_EQ(escape_for_display("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(escape_for_display("back\\slash"), "back\\\\slash");
  EXPECT_EQ(escape_for_display("\xFFz"), "\\xffz");
  EXPECT_EQ(escape_for_display("\xE2\x80\xAE" "gnp.exe"), "\\u202egnp.exe"); // right-to-left override
  EXPECT_EQ(escape_for_display("\xC2\x85"), "\\u0085");                      // C1 next line
  EXPECT_EQ(escape_for_display("caf\xC3\xA9"), "caf\xC3\xA9");
  // The escape of a backslash-x in the input differs from the escape of a byte.
  EXPECT_NE(escape_for_display("\\xff"), escape_for_display("\xFF"));
}

TEST(DumpJson, ReplacesInvalidUtf8InsteadOfThrowing) {
  json j{{"stderr", std::string("bad \xFF byte")}};
  EXPECT_THROW((void)j.dump(), json::type_error);
  auto s = dump_json(j);
  EXPECT_EQ(json::parse(s)["stderr"], "bad \xEF\xBF\xBD byte");
}

TEST(BoundedJson, ParsesWhatIsWithinTheLimits) {
  auto r = parse_bounded_json(R"({"a": [1, {"b": "c"}]})", {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value["a"][1]["b"], "c");
}

TEST(BoundedJson, RefusesNestingPastTheLimitBeforeBuildingATree) {
  json_limits lim;
  lim.max_depth = 4;
  EXPECT_TRUE(parse_bounded_json("[[[[1]]]]", lim).ok());
  auto r = parse_bounded_json("[[[[[1]]]]]", lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->offset, 4u);
  EXPECT_NE(r.error->message.find("deeper than 4"), std::string::npos);
  // Brackets in strings and comments do not count.
  lim.allow_comments = true;
  EXPECT_TRUE(parse_bounded_json("{\"x\": \"[[[[[[[[\" /* [[[[[[ */ // {{{{{{\n}", lim).ok());
  // A million levels: refused at once, not a stack overflow.
  std::string deep(1000000, '[');
  EXPECT_FALSE(parse_bounded_json(deep, {}).ok());
}

TEST(BoundedJson, RefusesTextOverTheSizeLimit) {
  json_limits lim;
  lim.max_bytes = 10;
  auto r = parse_bounded_json("[1,2,3,4,5,6]", lim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find("larger than 10 bytes"), std::string::npos);
}

TEST(BoundedJson, ErrorMessagesNeverQuoteTheInput) {
  // A half-typed secret: a raw newline inside a string.
  auto r = parse_bounded_json("{\"env\": {\"TOKEN\": \"hunter2\nrest\"}}", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->message.find("hunter2"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.error->offset, 26u); // the newline
  auto lit = parse_bounded_json("{\"a\": secretword}", {});
  ASSERT_FALSE(lit.ok());
  EXPECT_EQ(lit.error->message.find("secret"), std::string::npos) << lit.error->message;
}

TEST(BoundedJson, InvalidUtf8IsAnErrorAtItsByteOrIsReplaced) {
  std::string text = "{\"k\": \"caf\xE9\"}";
  auto r = parse_bounded_json(text, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->offset, 10u);
  EXPECT_NE(r.error->message.find("invalid UTF-8"), std::string::npos);
  json_limits lim;
  lim.replace_invalid_utf8 = true;
  auto ok = parse_bounded_json(text, lim);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value["k"], "caf\xEF\xBF\xBD");
  // Offsets of later errors still point into the original text.
  auto late = parse_bounded_json("[\"\xE9\xE9\", x]", lim);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error->offset, 7u); // the x
}

TEST(BoundedJson, ANulByteIsAnErrorNotTheEndOfTheText) {
  // nlohmann stops at a NUL: without the check the tail would be ignored.
  json_limits lim;
  auto r = parse_bounded_json(std::string("{\"a\": 1}\0{\"b\": 2}", 17), lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->offset, 8u);
  r = parse_bounded_json(std::string("[1,\0 2]", 7), lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->offset, 3u);
}
