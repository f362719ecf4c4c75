// The runtime <-> reaper wire format (core/reaper_protocol.hpp): what the
// runtime encodes decodes to the same strings in the reaper, in one message
// or many, and anything malformed is refused without reading or writing
// past a buffer.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/reaper_protocol.hpp"

namespace mcprt::reaper_protocol {

namespace {

std::vector<std::string> list(char* const* p) {
  std::vector<std::string> out;
  for (; *p; ++p)
    out.emplace_back(*p);
  return out;
}

struct decoded {
  decode_error error = decode_error::none;
  std::optional<std::string> cwd;
  std::vector<std::string> candidates, argv, envp;
};

decoded decode(std::string payload, std::size_t slot_count = 1024) {
  std::vector<char*> slots(slot_count);
  spawn_view view;
  decoded d;
  d.error = decode_spawn(payload.data(), payload.size(), slots.data(), slots.size(), view);
  if (d.error != decode_error::none) return d;
  if (view.cwd) d.cwd = view.cwd;
  d.candidates = list(view.candidates);
  d.argv = list(view.argv);
  d.envp = list(view.envp);
  return d;
}

// What the reaper does with the messages of one request.
std::optional<std::string> assemble(const std::vector<std::string>& messages, std::size_t capacity = max_request) {
  std::vector<char> buffer(capacity);
  request_assembler a(buffer.data(), buffer.size());
  std::optional<std::string> out;
  for (auto& m : messages) {
    spawn_part part;
    std::memcpy(&part, m.data(), sizeof part);
    auto step = a.add(part, m.data() + sizeof part, m.size() - sizeof part);
    if (step == request_assembler::step::complete) out = std::string(a.data(), a.size());
    if (step == request_assembler::step::broken) return std::nullopt;
  }
  return out;
}

std::string part(std::uint64_t id, std::uint32_t flags, std::uint32_t total, std::uint32_t offset,
                 const std::string& bytes) {
  spawn_part p;
  p.h.kind = static_cast<std::uint32_t>(kind::spawn);
  p.h.id = id;
  p.h.flags = flags;
  p.total = total;
  p.offset = offset;
  return std::string(reinterpret_cast<const char*>(&p), sizeof p) + bytes;
}

std::string u32(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i)
    s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

std::string counts(std::uint32_t candidates, std::uint32_t args, std::uint32_t env, std::uint32_t has_cwd) {
  return u32(version) + u32(candidates) + u32(args) + u32(env) + u32(has_cwd);
}

} // namespace

TEST(ReaperProtocol, ARequestRoundTripsInOneMessage) {
  auto r = encode_spawn(std::string("/srv"), {"/usr/bin/srv", "/bin/srv"}, {"srv", "--flag", ""}, {"A=1", "B="});
  ASSERT_TRUE(r.error.empty()) << r.error;
  auto messages = split_spawn(7, r.payload);
  ASSERT_EQ(messages.size(), 1u);
  auto payload = assemble(messages);
  ASSERT_TRUE(payload);
  auto d = decode(*payload);
  ASSERT_EQ(d.error, decode_error::none) << describe(d.error);
  EXPECT_EQ(d.cwd, "/srv");
  EXPECT_EQ(d.candidates, (std::vector<std::string>{"/usr/bin/srv", "/bin/srv"}));
  EXPECT_EQ(d.argv, (std::vector<std::string>{"srv", "--flag", ""}));
  EXPECT_EQ(d.envp, (std::vector<std::string>{"A=1", "B="}));
}

TEST(ReaperProtocol, ALargeRequestSpansMessagesAndArrivesWhole) {
  std::vector<std::string> env;
  for (int i = 0; i < 40; ++i)
    env.push_back("V" + std::to_string(i) + "=" + std::string(5000, static_cast<char>('a' + i % 26)));
  auto r = encode_spawn(std::nullopt, {"/bin/x"}, {"x"}, env);
  ASSERT_TRUE(r.error.empty());
  auto messages = split_spawn(9, r.payload);
  ASSERT_GT(messages.size(), 5u);
  for (auto& m : messages)
    EXPECT_LE(m.size(), max_message);
  auto payload = assemble(messages);
  ASSERT_TRUE(payload);
  EXPECT_EQ(*payload, r.payload);
  auto d = decode(*payload);
  ASSERT_EQ(d.error, decode_error::none);
  EXPECT_FALSE(d.cwd);
  EXPECT_EQ(d.envp, env);
}

TEST(ReaperProtocol, WhatExecveCannotTakeIsRefusedByTheEncoder) {
  EXPECT_NE(encode_spawn(std::nullopt, {"/bin/x"}, {"x", std::string("a\0b", 3)}, {}).error.find("NUL byte"),
            std::string::npos);
  EXPECT_NE(encode_spawn(std::string("/a\0b", 4), {"/bin/x"}, {"x"}, {}).error.find("working directory"),
            std::string::npos);
  EXPECT_NE(encode_spawn(std::nullopt, {"/bin/x"}, {"x"}, {"BIG=" + std::string(max_request, 'x')}).error.find("too large"),
            std::string::npos);
  EXPECT_NE(encode_spawn(std::nullopt, {"/bin/x"}, {"x"}, std::vector<std::string>(max_strings, "A=1")).error.find(
              "too many"),
            std::string::npos);
  EXPECT_FALSE(encode_spawn(std::nullopt, {}, {"x"}, {}).error.empty());
  auto r = encode_spawn(std::nullopt, {"/bin/x"}, {"x", std::string("a\0b", 3)}, {});
  EXPECT_TRUE(r.payload.empty()) << "nothing to send";
}

TEST(ReaperProtocol, MalformedPayloadsAreRefusedWithTheirReason) {
  EXPECT_EQ(decode("").error, decode_error::too_short);
  EXPECT_EQ(decode(counts(1, 1, 0, 0).substr(0, 19)).error, decode_error::too_short);
  EXPECT_EQ(decode(u32(version + 1) + u32(1) + u32(1) + u32(0) + u32(0) + "a" + '\0' + "b" + '\0').error,
            decode_error::bad_header);
  EXPECT_EQ(decode(counts(1, 1, 0, 2) + "a" + '\0' + "b" + '\0').error, decode_error::bad_header);
  EXPECT_EQ(decode(counts(0, 1, 0, 0) + "b" + '\0').error, decode_error::no_command);
  EXPECT_EQ(decode(counts(1, 0, 0, 0) + "a" + '\0').error, decode_error::no_command);
  EXPECT_EQ(decode(counts(1, 1, 0, 0) + "a" + '\0' + "b").error, decode_error::unterminated);
  EXPECT_EQ(decode(counts(1, 1, 1, 0) + "a" + '\0' + "b" + '\0').error, decode_error::unterminated);
  EXPECT_EQ(decode(counts(1, 1, 0, 0) + "a" + '\0' + "b" + '\0' + "c").error, decode_error::trailing_bytes);
  EXPECT_EQ(decode(counts(1, 1, 0xffffffffu, 0) + "a" + '\0' + "b" + '\0').error, decode_error::too_many_strings);
  // More strings than the caller has slots for: refused before any is written.
  EXPECT_EQ(decode(counts(1, 3, 0, 0) + "a" + '\0' + "b" + '\0' + "c" + '\0' + "d" + '\0', 5).error,
            decode_error::too_many_strings);
  EXPECT_EQ(decode(counts(1, 3, 0, 0) + "a" + '\0' + "b" + '\0' + "c" + '\0' + "d" + '\0', 7).error,
            decode_error::none);
}

TEST(ReaperProtocol, PartsOutOfPlaceBreakTheRequest) {
  auto r = encode_spawn(std::nullopt, {"/bin/x"}, {"x"}, {"A=" + std::string(100000, 'a')});
  auto messages = split_spawn(3, r.payload);
  ASSERT_GE(messages.size(), 3u);
  // Missing first part; swapped parts; a repeated part; a part of another id.
  EXPECT_FALSE(assemble({messages.begin() + 1, messages.end()}));
  auto swapped = messages;
  std::swap(swapped[1], swapped[2]);
  EXPECT_FALSE(assemble(swapped));
  auto repeated = messages;
  repeated.insert(repeated.begin() + 1, messages[1]);
  EXPECT_FALSE(assemble(repeated));
  auto other = messages;
  other[1] = split_spawn(4, r.payload)[1];
  EXPECT_FALSE(assemble(other));
  // More than the reaper's buffer holds.
  EXPECT_FALSE(assemble(messages, r.payload.size() - 1));
  EXPECT_TRUE(assemble(messages, r.payload.size()));
}

TEST(ReaperProtocol, TheAssemblerRecoversForTheNextRequest) {
  std::vector<char> buffer(64);
  request_assembler a(buffer.data(), buffer.size());
  auto add = [&](const std::string& m) {
    spawn_part p;
    std::memcpy(&p, m.data(), sizeof p);
    return a.add(p, m.data() + sizeof p, m.size() - sizeof p);
  };
  // Too big for the buffer: broken at its last part, nothing written past it.
  EXPECT_EQ(add(part(1, first_part, 100, 0, std::string(50, 'x'))), request_assembler::step::more);
  EXPECT_EQ(add(part(1, last_part, 100, 50, std::string(50, 'x'))), request_assembler::step::broken);
  // A stray last part with nothing begun.
  EXPECT_EQ(add(part(2, last_part, 0, 0, "")), request_assembler::step::broken);
  // A part that claims more than its total.
  EXPECT_EQ(add(part(3, first_part | last_part, 4, 0, "12345")), request_assembler::step::broken);
  // Then a good one.
  EXPECT_EQ(add(part(4, first_part | last_part, 5, 0, "hello")), request_assembler::step::complete);
  EXPECT_EQ(std::string(a.data(), a.size()), "hello");
  EXPECT_EQ(a.id(), 4u);
  // The same last part again is not a second request.
  EXPECT_EQ(add(part(4, last_part, 5, 5, "")), request_assembler::step::broken);
}

} // namespace mcprt::reaper_protocol
