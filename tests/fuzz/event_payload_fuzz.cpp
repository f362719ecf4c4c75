// An event payload as another CAF node may send it (messages/events.hpp):
// any bytes through CAF's binary deserializer must either fail or give a
// payload that the bus makes safe and renders to JSON that dumps; a payload
// that decodes must encode and decode again to the same rendering.
//
// Input: the serialized bytes of an event_payload (a kind byte, then the
// struct's fields).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "messages/event_bus.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mcprt;
  event_payload p;
  caf::binary_deserializer source{nullptr, reinterpret_cast<const char*>(data), size};
  if (source(p)) return 0;
  auto show = [](const std::string& id) { return "shown:" + id; };
  make_publishable(p, show);
  nlohmann::json rendered = p;
  auto text = rendered.dump(); // throws (and so crashes the target) on invalid UTF-8
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  if (sink(p)) __builtin_trap();
  event_payload again;
  caf::binary_deserializer back{nullptr, buf};
  if (back(again)) __builtin_trap();
  if (nlohmann::json(again).dump() != text) __builtin_trap();
  return 0;
}
