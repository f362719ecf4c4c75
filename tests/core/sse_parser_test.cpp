#include "core/sse_parser.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mcprt;

TEST(SseParser, FollowsTheEventStreamRules) {
  sse_parser p;
  std::vector<sse_parser::event> got;
  auto sink = [&](sse_parser::event&& e) { got.push_back(std::move(e)); };
  std::string stream =
      "\xEF\xBB\xBF: comment\r\n"
      "event: message\r\n"
      "id: 7\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "data:line1\n"
      "data: line2\n"
      "\n"
      "event: other\n"
      "data: x\n\n"
      "event: ignored-without-data\n\n"
      "retry: 1500\r"
      "data: cr only\r\r"
      "data: tail";
  // Byte by byte: every split point, including inside CRLF and the BOM.
  for (char c : stream) ASSERT_TRUE(p.feed(std::string_view(&c, 1), sink));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].type, "message");
  EXPECT_EQ(got[0].data, "{\"a\":1}");
  EXPECT_EQ(got[0].id, "7");
  EXPECT_EQ(got[1].type, "message");
  EXPECT_EQ(got[1].data, "line1\nline2");
  EXPECT_EQ(got[2].type, "other");
  EXPECT_EQ(got[3].data, "cr only");
  EXPECT_EQ(p.retry_ms(), 1500);
  p.finish(sink);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[4].data, "tail");
  EXPECT_EQ(p.last_event_id(), "7");
}

TEST(SseParser, RejectsOversizedEvents) {
  sse_parser p(64);
  auto sink = [](sse_parser::event&&) {};
  EXPECT_FALSE(p.feed("data: " + std::string(100, 'x') + "\n", sink));
  EXPECT_FALSE(p.feed("\n", sink));
}

TEST(SseParser, BoundsEachLineNotOnlyData) {
  // One chunk may hold a whole `event:` or `id:` line of any length; it must
  // fail the parser as an oversized data line does.
  for (std::string field : {"event: ", "id: ", "data: ", ": "}) {
    sse_parser p(64);
    int events = 0;
    auto sink = [&](sse_parser::event&&) { ++events; };
    EXPECT_FALSE(p.feed(field + std::string(100, 'x') + "\n", sink)) << field;
    EXPECT_FALSE(p.feed("data: ok\n\n", sink)) << "gave up for good";
    p.finish(sink);
    EXPECT_EQ(events, 0) << field;
  }
}

TEST(SseParser, AnUnfinishedLineCountsTowardsTheBound) {
  sse_parser p(64);
  auto sink = [](sse_parser::event&&) {};
  for (int i = 0; i < 6; ++i)
    if (!p.feed(std::string(16, 'x'), sink)) return; // gave up before the line ended
  FAIL() << "a line without its end grew past the bound";
}

TEST(SseParser, SplitPointsChangeNothing) {
  const std::string stream = "id: a\r\ndata: 1\r\n\r\nevent: e\rdata: 2\r\rdata: 3\n\n: c\ndata: 4";
  auto run = [&](std::size_t chunk) {
    sse_parser p;
    std::vector<std::string> out;
    auto sink = [&](sse_parser::event&& e) { out.push_back(e.type + "|" + e.data + "|" + e.id); };
    for (std::size_t i = 0; i < stream.size(); i += chunk)
      EXPECT_TRUE(p.feed(std::string_view(stream).substr(i, chunk), sink));
    p.finish(sink);
    return out;
  };
  auto whole = run(stream.size());
  ASSERT_EQ(whole, (std::vector<std::string>{"message|1|a", "e|2|a", "message|3|a", "message|4|a"}));
  for (std::size_t chunk = 1; chunk < 8; ++chunk) EXPECT_EQ(run(chunk), whole) << chunk;
}

TEST(SseParser, IgnoresBadIdsAndRetries) {
  sse_parser p;
  std::vector<sse_parser::event> got;
  auto sink = [&](sse_parser::event&& e) { got.push_back(std::move(e)); };
  std::string text = std::string("id: ok\nid: a") + '\0' + "b\nretry: 12x\nretry: 99999999999\ndata\n\n";
  ASSERT_TRUE(p.feed(text, sink));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, "ok") << "an id with NUL is ignored";
  EXPECT_EQ(got[0].data, "") << "a bare `data` field is an empty data line";
  EXPECT_FALSE(p.retry_ms()) << "retry takes digits only, fewer than ten";
}
