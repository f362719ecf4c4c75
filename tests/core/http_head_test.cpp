#include "core/http_head.hpp"

#include <gtest/gtest.h>

namespace mcprt {
namespace {

using step = http_head_reader::step;

TEST(HttpHead, AFinalHeadEndsAtItsBlankLineWithTrimmedValues) {
  http_head_reader r;
  EXPECT_EQ(r.feed("HTTP/1.1 200 OK\r\n"), step::more);
  EXPECT_EQ(r.feed("Content-Type:  text/event-stream ; charset=utf-8\t\r\n"), step::more);
  EXPECT_EQ(r.feed("Mcp-Session-Id: abc\r\n"), step::more);
  EXPECT_EQ(r.feed("\r\n"), step::complete);
  ASSERT_TRUE(r.complete());
  EXPECT_EQ(r.head().status, 200);
  EXPECT_EQ(r.head().reason, "OK");
  ASSERT_EQ(r.head().headers.size(), 2u);
  EXPECT_EQ(r.head().headers[0].first, "Content-Type");
  EXPECT_EQ(r.head().headers[0].second, "text/event-stream ; charset=utf-8");
  EXPECT_EQ(r.feed("X-Trailer: 1\r\n"), step::complete) << "trailers change nothing";
  EXPECT_EQ(r.head().headers.size(), 2u);
}

TEST(HttpHead, AnInformationalHeadIsForgottenForTheFinalOne) {
  http_head_reader r;
  r.feed("HTTP/1.1 100 Continue\r\n");
  r.feed("X-Early: 1\r\n");
  EXPECT_EQ(r.feed("\r\n"), step::more);
  EXPECT_FALSE(r.complete());
  r.feed("HTTP/2 404\r\n");
  EXPECT_EQ(r.feed("\r\n"), step::complete);
  EXPECT_EQ(r.head().status, 404);
  EXPECT_EQ(r.head().reason, "");
  EXPECT_TRUE(r.head().headers.empty());
}

TEST(HttpHead, AHeadOverItsBoundsIsRefused) {
  http_head_reader r;
  r.feed("HTTP/1.1 200 OK\r\n");
  step s = step::more;
  for (std::size_t i = 0; i <= http_head_reader::max_headers && s == step::more; ++i)
    s = r.feed("X-" + std::to_string(i) + ": v\r\n");
  EXPECT_EQ(s, step::too_large);
  http_head_reader big;
  big.feed("HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(big.feed("X-Big: " + std::string(http_head_reader::max_bytes, 'a') + "\r\n"), step::too_large);
}

TEST(HttpHead, LinesBeforeAStatusLineAndWithoutAColonAreIgnored) {
  http_head_reader r;
  EXPECT_EQ(r.feed("garbage\r\n"), step::more);
  EXPECT_EQ(r.feed("\r\n"), step::more);
  r.feed("HTTP/1.1 2xx weird\r\n");
  r.feed(" folded continuation\r\n");
  EXPECT_EQ(r.feed("\r\n"), step::more) << "status 2 is not a final head";
  EXPECT_TRUE(r.head().headers.empty());
}

} // namespace
} // namespace mcprt
