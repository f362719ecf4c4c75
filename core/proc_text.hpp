#pragma once

// Reading the two /proc texts the reaper needs to find its children:
// /proc/self/task/<tid>/children (pids separated by spaces) and
// /proc/<pid>/stat (the parent pid). Freestanding like
// core/reaper_protocol.hpp: the reaper reads them after fork() in a
// multi-threaded process and in its own static image.

#include <cstddef>

namespace mcprt::proc_text {

/// The parent pid in the text of /proc/<pid>/stat ("pid (comm) state ppid
/// ..."), or -1. The comm may hold spaces and parentheses: the fields that
/// follow it start after its last ')'.
inline long parent_in_stat(const char* text, std::size_t n) {
  std::size_t close = n;
  for (std::size_t i = 0; i < n; ++i)
    if (text[i] == ')') close = i;
  if (close == n) return -1;
  // ") S 1234 ..." : space, state, space, ppid.
  std::size_t i = close + 1;
  if (i + 3 >= n || text[i] != ' ' || text[i + 2] != ' ') return -1;
  i += 3;
  long ppid = 0;
  std::size_t digits = 0;
  for (; i < n && text[i] >= '0' && text[i] <= '9' && digits < 10; ++i, ++digits)
    ppid = ppid * 10 + (text[i] - '0');
  if (digits == 0 || (i < n && text[i] != ' ' && text[i] != '\n')) return -1;
  return ppid;
}

/// Calls `f(pid)` for each pid in a list of decimal numbers separated by
/// anything else, fed in chunks (a number cut at a chunk's end continues in
/// the next). finish() takes the last one. Numbers past 10 digits are
/// dropped, not wrapped.
template <class F>
class pid_list_reader {
 public:
  explicit pid_list_reader(F f) : f_(f) {}

  void feed(const char* text, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      char c = text[i];
      if (c >= '0' && c <= '9') {
        if (digits_ < 10) value_ = value_ * 10 + (c - '0');
        ++digits_;
      } else {
        finish();
      }
    }
  }

  void finish() {
    if (digits_ > 0 && digits_ <= 10 && value_ > 0 && value_ <= 0x7fffffffL) f_(value_);
    value_ = 0;
    digits_ = 0;
  }

 private:
  F f_;
  long value_ = 0;
  std::size_t digits_ = 0;
};

} // namespace mcprt::proc_text
