#include <gtest/gtest.h>

#include "core/patterns.hpp"

using namespace mcprt;

TEST(GlobMatch, LiteralNamesMatchExactly) {
  EXPECT_TRUE(glob_match("github", "github"));
  EXPECT_FALSE(glob_match("github", "github2"));
  EXPECT_FALSE(glob_match("github", "git"));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("", ""));
}

TEST(GlobMatch, StarMatchesAnyRunIncludingNone) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("tmp-*", "tmp-"));
  EXPECT_TRUE(glob_match("tmp-*", "tmp-search"));
  EXPECT_FALSE(glob_match("tmp-*", "tm"));
  EXPECT_TRUE(glob_match("*-dev", "api-dev"));
  EXPECT_TRUE(glob_match("a*b*c", "a--b--c"));
  EXPECT_TRUE(glob_match("a*b*c", "abc"));
  EXPECT_FALSE(glob_match("a*b*c", "a--c--b"));
  EXPECT_TRUE(glob_match("**x", "yyx"));
}

TEST(GlobMatch, QuestionMarkMatchesExactlyOne) {
  EXPECT_TRUE(glob_match("x?", "x1"));
  EXPECT_FALSE(glob_match("x?", "x"));
  EXPECT_FALSE(glob_match("x?", "x12"));
  EXPECT_TRUE(glob_match("?*", "a"));
  EXPECT_FALSE(glob_match("?*", ""));
}

TEST(GlobMatch, RegexCharactersAreLiteral) {
  EXPECT_TRUE(glob_match("a.b", "a.b"));
  EXPECT_FALSE(glob_match("a.b", "axb"));
  EXPECT_TRUE(glob_match("a+(b)", "a+(b)"));
  EXPECT_TRUE(glob_match("a::b", "a::b"));
}

TEST(GlobMatch, PathologicalPatternStaysFast) {
  std::string text(10000, 'a');
  std::string pattern;
  for (int i = 0; i < 50; ++i)
    pattern += "*a";
  pattern += "b";
  EXPECT_FALSE(glob_match(pattern, text)); // would explode with a backtracking matcher
}

TEST(GlobMatch, MatchesAny) {
  EXPECT_TRUE(matches_any({"x", "tmp-*"}, "tmp-1"));
  EXPECT_FALSE(matches_any({}, "a"));
  EXPECT_FALSE(matches_any({"x", "y"}, "z"));
}

TEST(GlobMatch, QuestionMarkMatchesOneUtf8Character) {
  EXPECT_TRUE(glob_match("x?", "x\xC3\xA9"));        // é is two bytes
  EXPECT_TRUE(glob_match("?", "\xF0\x9F\x98\x80")); // four-byte emoji
  EXPECT_FALSE(glob_match("x??", "x\xC3\xA9"));
  EXPECT_TRUE(glob_match("*\xC3\xA9", "caf\xC3\xA9"));
}

TEST(IntersectAllowLists, KeepsWhatBothListsAdmit) {
  using v = std::vector<std::string>;
  EXPECT_EQ(intersect_allow_lists(v{"a", "b", "c"}, v{"a", "b"}, {}), (v{"a", "b"}));
  EXPECT_EQ(intersect_allow_lists(v{"*"}, v{"a", "b"}, {}), (v{"a", "b"}));
  // Two overlapping globs: only configured names can express the overlap.
  EXPECT_EQ(intersect_allow_lists(v{"srv-*"}, v{"*-2"}, v{"srv-1", "srv-2", "x-2"}), v{"srv-2"});
  EXPECT_EQ(intersect_allow_lists(v{}, v{"a"}, v{"a"}), v{});
}
