// The reaper (io/reaper_process.cpp) decodes spawn requests with no
// allocation into fixed buffers, after fork() where a crash would take
// every server of the runtime with it. Any bytes, as whole payloads and as
// a stream of parts, must be refused or decoded into strings that lie in
// the buffer; what decodes must encode back to the same payload.
//
// Input: byte 0 picks the mode; the rest is a payload (mode % 3 == 0), a
// sequence of parts (mode % 3 == 1), each [flags, id, total:2, offset:2,
// len:2, bytes], reassembled in a 4 KiB buffer, or the text of a /proc file
// the reaper reads (mode % 3 == 2).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/proc_text.hpp"
#include "core/reaper_protocol.hpp"

namespace wire = mcprt::reaper_protocol;

namespace {

std::vector<std::string> strings(char* const* p, const char* begin, const char* end) {
  std::vector<std::string> out;
  for (; *p; ++p) {
    if (*p < begin || *p >= end) __builtin_trap(); // a pointer outside the payload
    out.emplace_back(*p);
  }
  return out;
}

void check_payload(std::string payload, std::size_t slot_count) {
  std::vector<char*> slots(slot_count);
  wire::spawn_view view;
  auto e = wire::decode_spawn(payload.data(), payload.size(), slots.data(), slots.size(), view);
  if (e != wire::decode_error::none) return;
  const char* begin = payload.data();
  const char* end = begin + payload.size();
  auto candidates = strings(view.candidates, begin, end);
  auto argv = strings(view.argv, begin, end);
  auto envp = strings(view.envp, begin, end);
  std::optional<std::string> cwd;
  if (view.cwd) {
    if (view.cwd < begin || view.cwd >= end) __builtin_trap();
    cwd = view.cwd;
  }
  if (candidates.empty() || argv.empty()) __builtin_trap();
  auto again = wire::encode_spawn(cwd, candidates, argv, envp);
  if (!again.error.empty() || again.payload != payload) __builtin_trap();
}

std::uint32_t u16(const std::uint8_t* p) { return static_cast<std::uint32_t>(p[0] | (p[1] << 8)); }

void check_parts(const std::uint8_t* data, std::size_t size) {
  std::vector<char> buffer(4096);
  wire::request_assembler a(buffer.data(), buffer.size());
  std::size_t pos = 0;
  while (pos + 8 <= size) {
    wire::spawn_part part;
    part.h.kind = static_cast<std::uint32_t>(wire::kind::spawn);
    part.h.flags = data[pos] & 3;
    part.h.id = data[pos + 1];
    part.total = u16(data + pos + 2) * 2; // up to 128 KiB: past the buffer too
    part.offset = u16(data + pos + 4);
    std::size_t n = u16(data + pos + 6);
    pos += 8;
    if (n > size - pos) n = size - pos;
    auto step = a.add(part, reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    if (step == wire::request_assembler::step::complete) {
      if (a.size() > buffer.size()) __builtin_trap();
      check_payload(std::string(a.data(), a.size()), 64);
    }
  }
}

} // namespace

void check_proc_text(const char* text, std::size_t n) {
  long ppid = mcprt::proc_text::parent_in_stat(text, n);
  if (ppid < -1 || ppid > 9999999999L) __builtin_trap();
  auto in_range = [](long pid) {
    if (pid <= 0 || pid > 0x7fffffffL) __builtin_trap();
  };
  mcprt::proc_text::pid_list_reader<decltype(in_range)> reader(in_range);
  // In two chunks, cut where the input says.
  std::size_t cut = n > 0 ? static_cast<unsigned char>(text[0]) % (n + 1) : 0;
  reader.feed(text, cut);
  reader.feed(text + cut, n - cut);
  reader.finish();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: {
      std::string payload(reinterpret_cast<const char*>(data + 1), size - 1);
      check_payload(payload, 1 + data[0] / 3); // few slots: the capacity check
      check_payload(payload, 4096);
      break;
    }
    case 1:
      check_parts(data + 1, size - 1);
      break;
    default:
      check_proc_text(reinterpret_cast<const char*>(data + 1), size - 1);
      break;
  }
  return 0;
}
