#include "core/line_reader.hpp"
#include "core/untrusted_text.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mcprt;

namespace {

std::vector<std::string> feed_all(line_reader& r, std::string_view data) {
  std::vector<std::string> out;
  r.feed(data, out);
  return out;
}

} // namespace

TEST(LineReader, SplitsCompleteLines) {
  line_reader r;
  EXPECT_EQ(feed_all(r, "{\"a\":1}\n{\"b\":2}\n"), (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_EQ(r.buffered_bytes(), 0u);
}

TEST(LineReader, HoldsPartialLinesAcrossFeeds) {
  line_reader r;
  EXPECT_TRUE(feed_all(r, "{\"jsonrpc\":").empty());
  EXPECT_EQ(r.buffered_bytes(), 11u);
  EXPECT_TRUE(feed_all(r, "\"2.0\",").empty());
  EXPECT_EQ(feed_all(r, "\"id\":1}\n{\"x\""), (std::vector<std::string>{"{\"jsonrpc\":\"2.0\",\"id\":1}"}));
  EXPECT_EQ(feed_all(r, ":2}\n"), (std::vector<std::string>{"{\"x\":2}"}));
}

TEST(LineReader, ByteAtATimeGivesTheSameLines) {
  std::string data = "one\r\ntwo\n\nthree\n";
  line_reader r;
  std::vector<std::string> out;
  for (char c : data)
    r.feed(&c, 1, out);
  EXPECT_EQ(out, (std::vector<std::string>{"one", "two", "three"}));
}

TEST(LineReader, StripsCarriageReturnAndSkipsBlankLines) {
  line_reader r;
  EXPECT_EQ(feed_all(r, "\n\r\n  \t\r\na\r\n\n"), (std::vector<std::string>{"a"}));
}

TEST(LineReader, OversizedLineIsDiscardedWhileStreamingWithBoundedMemory) {
  line_reader_limits limits;
  limits.max_line_bytes = 1 << 20;
  line_reader r(limits);
  std::vector<std::string> out;
  r.feed("{\"before\":1}\n", out);
  // 20 MB of one line, in 64 KiB chunks.
  std::string chunk(64 * 1024, 'x');
  std::size_t fed = 0, peak = 0;
  while (fed < 20u * 1000 * 1000) {
    r.feed(chunk, out);
    fed += chunk.size();
    peak = std::max(peak, r.buffered_bytes());
  }
  EXPECT_LE(peak, limits.max_line_bytes);
  EXPECT_TRUE(r.discarding());
  EXPECT_EQ(r.oversized_lines(), 1u);
  EXPECT_EQ(r.garbage_lines(), 1u);
  EXPECT_FALSE(r.error());
  r.feed("tail of the long line\n{\"after\":2}\n", out);
  EXPECT_FALSE(r.discarding());
  EXPECT_EQ(out, (std::vector<std::string>{"{\"before\":1}", "{\"after\":2}"}));
  EXPECT_EQ(r.buffered_bytes(), 0u);
}

TEST(LineReader, LineExactlyAtLimitIsKept) {
  line_reader_limits limits;
  limits.max_line_bytes = 8;
  line_reader r(limits);
  EXPECT_EQ(feed_all(r, "12345678\n123456789\nok\n"), (std::vector<std::string>{"12345678", "ok"}));
  EXPECT_EQ(r.oversized_lines(), 1u);
}

TEST(LineReader, GarbageLinesBeyondBudgetAreFatalWithClearReason) {
  line_reader_limits limits;
  limits.max_garbage_lines = 3;
  line_reader r(limits);
  for (int i = 0; i < 3; ++i)
    r.note_garbage("Server running on stdio");
  EXPECT_FALSE(r.error());
  r.note_garbage("Secure MCP Filesystem Server running on stdio, allowed directories: /tmp and a lot more text "
                 "after the eighty byte preview cut");
  ASSERT_TRUE(r.error());
  EXPECT_NE(r.error()->find("server wrote 4 lines that are not JSON-RPC (limit 3); last: 'Secure MCP"),
            std::string::npos)
      << *r.error();
  EXPECT_NE(r.error()->find("...'"), std::string::npos) << *r.error();
  // Once fatal, nothing more comes out.
  EXPECT_TRUE(feed_all(r, "{\"jsonrpc\":\"2.0\"}\n").empty());
}

TEST(LineReader, GarbageBytesBeyondBudgetAreFatal) {
  line_reader_limits limits;
  limits.max_garbage_bytes = 100;
  line_reader r(limits);
  r.note_garbage(std::string(60, 'a'));
  EXPECT_FALSE(r.error());
  r.note_garbage(std::string(60, 'b'));
  ASSERT_TRUE(r.error());
  EXPECT_NE(r.error()->find("120 bytes that are not JSON-RPC (limit 100)"), std::string::npos) << *r.error();
}

TEST(LineReader, ValidMessageResetsTheBudget) {
  line_reader_limits limits;
  limits.max_garbage_lines = 2;
  line_reader r(limits);
  for (int i = 0; i < 10; ++i) {
    r.note_garbage("log line");
    r.note_garbage("log line");
    r.note_valid();
  }
  EXPECT_FALSE(r.error());
  EXPECT_EQ(r.total_garbage_lines(), 20u);
}

TEST(LineReader, OversizedLinesCountAgainstTheLineBudget) {
  line_reader_limits limits;
  limits.max_line_bytes = 4;
  limits.max_garbage_lines = 1;
  line_reader r(limits);
  std::vector<std::string> out;
  r.feed("toolong\n", out);
  EXPECT_FALSE(r.error());
  r.feed("again too long\nok\n", out);
  ASSERT_TRUE(r.error());
  EXPECT_NE(r.error()->find("line longer than 4 bytes, starting 'again too long'"), std::string::npos)
      << *r.error();
  EXPECT_TRUE(out.empty());
}

TEST(LineReader, PreviewIsSafeForLogs) {
  EXPECT_EQ(line_preview("a\tb\x1b[0m"), "a\\tb\\x1b[0m");
  // Cut on a code point boundary: "é" is two bytes.
  EXPECT_EQ(line_preview("aé", 2), "a...");
  EXPECT_EQ(line_preview("abc", 3), "abc");
}

// A server's bytes reach error messages through the preview, and error
// messages reach JSON events: the preview must be valid UTF-8 on one line
// whatever the server wrote.
TEST(LineReader, PreviewOfInvalidUtf8IsValidUtf8) {
  EXPECT_EQ(line_preview("caf\xe9 \xff"), "caf\\xe9 \\xff");
  EXPECT_EQ(line_preview("line\nINFO forged"), "line\\nINFO forged");
  // A run of continuation bytes: the cut does not walk back to nothing.
  std::string junk(100, '\x80');
  auto p = line_preview(junk, 10);
  EXPECT_FALSE(first_invalid_utf8(p).has_value()) << p;
  EXPECT_NE(p.find("\\x80"), std::string::npos) << p;
}

TEST(LineReader, GarbageErrorQuotingInvalidUtf8IsValidUtf8) {
  line_reader_limits lim;
  lim.max_garbage_lines = 1;
  line_reader r(lim);
  std::vector<std::string> out;
  r.feed("\xff\xfe not json\n\xc3\n", out);
  for (auto& l : out) r.note_garbage(l);
  ASSERT_TRUE(r.error());
  EXPECT_FALSE(first_invalid_utf8(*r.error()).has_value()) << *r.error();
  EXPECT_NE(r.error()->find("\\xc3"), std::string::npos) << *r.error();
}

namespace mcprt {
namespace {

TEST(LineReaderPieces, AnOversizedLineComesOnceAsItsStartAndTheNextLineIsWhole) {
  line_reader_limits limits;
  limits.max_line_bytes = 16;
  limits.oversized_prefix_bytes = 8;
  line_reader r(limits);
  std::vector<line_piece> out;
  r.feed(std::string_view("{\"id\":7,\"method\":"), out); // 17 bytes, no newline yet: oversized already
  r.feed(std::string_view("\"x\"}\nshort\n\n"), out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].oversized);
  EXPECT_EQ(out[0].text, "{\"id\":7,");
  EXPECT_FALSE(out[1].oversized);
  EXPECT_EQ(out[1].text, "short") << "blank lines are skipped";
}

TEST(LineReaderPieces, FinishHandsOutALastLineWithoutItsNewline) {
  line_reader r;
  std::vector<line_piece> out;
  r.feed("one\ntwo\r", 8, out);
  ASSERT_EQ(out.size(), 1u);
  r.finish(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].text, "two");
  r.finish(out);
  EXPECT_EQ(out.size(), 2u) << "nothing twice";
}

TEST(LineReaderPieces, WithoutAPrefixBudgetAnOversizedLineIsDroppedAsBefore) {
  line_reader_limits limits;
  limits.max_line_bytes = 4;
  line_reader r(limits);
  std::vector<line_piece> out;
  r.feed(std::string_view("toolong\nok\n"), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, "ok");
  EXPECT_EQ(r.oversized_lines(), 1u);
}

} // namespace
} // namespace mcprt
