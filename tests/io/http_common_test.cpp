#include "io/http_common.hpp"

#include <gtest/gtest.h>

namespace mcprt::io {
namespace {

TEST(HttpCommon, HeadersTheTransportsSetThemselvesAreOwnedInAnyCase) {
  for (auto name : {"Accept", "content-length", "HOST", "Mcp-Session-Id", "mcp-protocol-version", "Last-Event-ID",
                    "Transfer-Encoding"})
    EXPECT_TRUE(transport_owned_header(name)) << name;
  for (auto name : {"Authorization", "X-Api-Key", "Accepts", ""})
    EXPECT_FALSE(transport_owned_header(name)) << name;
}

TEST(HttpCommon, AHeaderThatWouldSplitTheRequestIsInvalid) {
  EXPECT_TRUE(valid_header_name("X-Api-Key"));
  EXPECT_FALSE(valid_header_name(""));
  EXPECT_FALSE(valid_header_name("X Key"));
  EXPECT_FALSE(valid_header_name("X:Key"));
  EXPECT_FALSE(valid_header_name("X-K\xc3\xa9y"));
  EXPECT_TRUE(valid_header_value("Bearer abc def"));
  EXPECT_FALSE(valid_header_value("abc\r\nHost: evil"));
  EXPECT_FALSE(valid_header_value(std::string("a\0b", 3)));
}

TEST(HttpCommon, AnExcerptIsCutOnACharacterBoundaryAndHasNoControls) {
  EXPECT_EQ(excerpt("a\nb\x7f", 200), "a b ");
  // "é" is two bytes; a cut after its first byte backs off to before it.
  EXPECT_EQ(excerpt("ab\xc3\xa9zz", 3), "ab…");
  EXPECT_EQ(excerpt("short", 5), "short");
}

TEST(HttpCommon, QueryValuesAreTheValuesOfEveryPair) {
  EXPECT_EQ(query_values("/messages?sessionId=s3cr3t&x=1"), (std::vector<std::string>{"s3cr3t", "1"}));
  EXPECT_EQ(query_values("/messages?flag&k="), (std::vector<std::string>{""}));
  EXPECT_TRUE(query_values("/messages").empty());
}

} // namespace
} // namespace mcprt::io
