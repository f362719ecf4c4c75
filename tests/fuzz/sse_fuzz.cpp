// A streamable-HTTP server's text/event-stream body through the SSE parser
// (core/sse_parser, which io/http_transport feeds), in chunks whose split points the
// input chooses: the first byte of each step is the chunk's length.
//
// Whatever the bytes and however they are split: nothing crashes, no event,
// type or id is longer than the parser's bound, a parser that gave up stays
// given up, and the events are the same as when the whole body arrives at
// once (the split points change nothing).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sse_parser.hpp"

namespace {

using mcprt::sse_parser;

constexpr std::size_t max_event = 256;

struct result {
  std::vector<sse_parser::event> events;
  bool failed = false;
};

void check(const sse_parser::event& e) {
  if (e.data.size() > max_event || e.type.size() > max_event || e.id.size() > max_event) __builtin_trap();
  if (e.type.empty()) __builtin_trap(); // "message" by default
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // Chunks: [length byte][bytes]...; the body is their concatenation.
  std::vector<std::string_view> chunks;
  std::string body;
  while (!in.empty()) {
    std::size_t n = static_cast<unsigned char>(in[0]) % 48;
    in.remove_prefix(1);
    auto chunk = in.substr(0, n);
    in.remove_prefix(chunk.size());
    chunks.push_back(chunk);
    body.append(chunk);
  }

  result split, whole;
  {
    sse_parser p(max_event);
    auto sink = [&](sse_parser::event&& e) {
      check(e);
      if (split.failed) __builtin_trap(); // nothing after giving up
      split.events.push_back(std::move(e));
    };
    for (auto c : chunks)
      if (!p.feed(c, sink)) split.failed = true;
    if (!split.failed) p.finish(sink);
    if (split.failed && p.feed("data: x\n\n", sink)) __builtin_trap();
  }
  {
    sse_parser p(max_event);
    auto sink = [&](sse_parser::event&& e) {
      check(e);
      whole.events.push_back(std::move(e));
    };
    if (!p.feed(body, sink)) whole.failed = true;
    if (!whole.failed) p.finish(sink);
  }
  // A bound reached inside one chunk may be reached at another event in the
  // other run only when it fails; without failures the events must agree.
  if (!split.failed && !whole.failed) {
    if (split.events.size() != whole.events.size()) __builtin_trap();
    for (std::size_t i = 0; i < split.events.size(); ++i)
      if (split.events[i].data != whole.events[i].data || split.events[i].type != whole.events[i].type ||
          split.events[i].id != whole.events[i].id)
        __builtin_trap();
  }
  return 0;
}
