// The /proc texts the reaper reads to find its children (core/proc_text).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/proc_text.hpp"

using mcprt::proc_text::parent_in_stat;
using mcprt::proc_text::pid_list_reader;

namespace {

long ppid(const std::string& s) { return parent_in_stat(s.data(), s.size()); }

} // namespace

TEST(ProcText, TheParentComesAfterTheLastParenthesisOfTheName) {
  EXPECT_EQ(ppid("1234 (sleep) S 77 1234 1234 0 -1 4194304"), 77);
  EXPECT_EQ(ppid("1234 (a b) c) (d) Z 9 1 1"), 9) << "a name with spaces and parentheses";
  EXPECT_EQ(ppid("1 (init) S 0 1 1"), 0);
  EXPECT_EQ(ppid("5 (x) S 42\n"), 42);
}

TEST(ProcText, AnythingElseIsNoParent) {
  EXPECT_EQ(ppid(""), -1);
  EXPECT_EQ(ppid("1234 (sleep S 77"), -1);
  EXPECT_EQ(ppid("1234 (sleep) S"), -1);
  EXPECT_EQ(ppid("1234 (sleep) S x7"), -1);
  EXPECT_EQ(ppid("1234 (sleep) S 7x"), -1);
  EXPECT_EQ(ppid("1234 (sleep)  S 7"), -1);
  EXPECT_EQ(ppid("1234 (sleep) S 123456789012"), -1) << "more digits than a pid has";
}

TEST(ProcText, PidListsAreReadAcrossChunks) {
  std::vector<long> got;
  auto collect = [&](long pid) { got.push_back(pid); };
  pid_list_reader<decltype(collect)> r(collect);
  std::string text = "12 345 6789 10";
  // One byte at a time: every number is cut somewhere.
  for (char c : text)
    r.feed(&c, 1);
  r.finish();
  EXPECT_EQ(got, (std::vector<long>{12, 345, 6789, 10}));
}

TEST(ProcText, OverlongAndZeroNumbersAreDropped) {
  std::vector<long> got;
  auto collect = [&](long pid) { got.push_back(pid); };
  pid_list_reader<decltype(collect)> r(collect);
  std::string text = "0 99999999999999999999 7 4294967297 2147483647 ";
  r.feed(text.data(), text.size());
  r.finish();
  EXPECT_EQ(got, (std::vector<long>{7, 2147483647}));
}
