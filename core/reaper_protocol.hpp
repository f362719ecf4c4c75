#pragma once

// The messages between the runtime and its reaper process (io/reaper): a
// SOCK_SEQPACKET socket, one fixed-size struct per message except the
// spawn request, whose flat payload (cwd, exec candidates, argv, envp) may
// span several messages.
//
// The decoding half is freestanding: no allocation, no exceptions, no libc
// beyond what the compiler provides, because the reaper runs it after
// fork() in a multi-threaded process (only async-signal-safe code there)
// and in its own static image. The encoding half is for the runtime.

#include <cstddef>
#include <cstdint>

#ifndef MCPRT_REAPER_FREESTANDING
#include <optional>
#include <string>
#include <vector>
#endif

namespace mcprt::reaper_protocol {

constexpr std::uint32_t version = 1;

/// One message on the socket, at most: the default socket buffer takes it.
constexpr std::size_t max_message = 32 * 1024;
/// One spawn request (all its parts): about what execve itself accepts.
constexpr std::size_t max_request = 2 * 1024 * 1024;
/// Strings in one request (candidates + argv + envp).
constexpr std::uint32_t max_strings = 65536;

enum class kind : std::uint32_t {
  // runtime -> reaper
  spawn = 1,    // spawn_part + bytes; the last part carries 3 fds (SCM_RIGHTS)
  signal = 2,   // signal_request: signal a server's process group
  shutdown = 3, // header: kill every descendant, then exit
  // reaper -> runtime
  hello = 101,   // reply: pid = the reaper, a = its mode, b = version
  spawned = 102, // reply: pid or -1, a = spawn_stage, b = errno
  exited = 103,  // reply: pid, a = si_code, b = si_status
};

struct header {
  std::uint32_t kind = 0;
  std::uint32_t flags = 0;
  std::uint64_t id = 0; // the runtime's process id (never 0)
};

constexpr std::uint32_t first_part = 1; // header.flags of spawn parts
constexpr std::uint32_t last_part = 2;

struct spawn_part {
  header h;
  std::uint32_t total = 0;  // bytes of the whole payload
  std::uint32_t offset = 0; // where this part's bytes go
};

struct signal_request {
  header h;
  std::int32_t signo = 0;
  std::int32_t unused = 0;
};

/// Every message from the reaper.
struct reply {
  header h;
  std::int32_t pid = -1;
  std::int32_t a = 0;
  std::int32_t b = 0;
  std::int32_t c = 0;
};

/// The reaper's PR_SET_PDEATHSIG: it learns this way that the runtime's
/// thread that started it is gone, and cleans up as on a closed socket.
/// (SIGUSR2, spelled out: this header includes no <signal.h>.)
constexpr int parent_gone_signal = 12;

/// How the reaper runs: its own image executed from a memfd, or the
/// runtime's image after fork() (when exec is not allowed).
enum class reaper_mode : std::int32_t { exec_image = 1, forked = 2 };

/// Where a spawn failed (spawned.a).
enum class spawn_stage : std::int32_t {
  ok = 0,
  chdir = 1,       // the cwd could not be entered (b = errno)
  exec = 2,        // no candidate could be executed (b = errno)
  fork = 3,        // clone/fork failed (b = errno)
  bad_request = 4, // the request did not decode (b = decode_error)
  too_many = 5,    // the reaper's table of servers is full
};

enum class decode_error : std::int32_t {
  none = 0,
  too_short,        // no room for the counts
  bad_header,       // another protocol version, or a flag out of range
  too_many_strings, // over max_strings, or more than the caller's room
  no_command,       // no candidate or no argv[0]
  unterminated,     // a string runs past the end
  trailing_bytes,   // bytes after the last string
};

/// A decoded request: pointers into the payload (which must outlive it)
/// and into the caller's pointer array.
struct spawn_view {
  const char* cwd = nullptr; // null: the reaper's own
  char* const* candidates = nullptr; // null-terminated
  char* const* argv = nullptr;       // null-terminated
  char* const* envp = nullptr;       // null-terminated
};

namespace detail {

inline std::uint32_t read_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Points `out[0..n)` at the next n strings of [*pos, end), then a null.
inline decode_error take_strings(char*& pos, char* end, std::uint32_t n, char** out) {
  for (std::uint32_t i = 0; i < n; ++i) {
    char* s = pos;
    while (pos < end && *pos != '\0')
      ++pos;
    if (pos == end) return decode_error::unterminated;
    ++pos; // past the NUL
    out[i] = s;
  }
  out[n] = nullptr;
  return decode_error::none;
}

} // namespace detail

constexpr std::size_t counts_size = 5 * 4; // version, candidates, args, env, has_cwd

/// Decodes a whole payload in place. `slots` must hold candidates + argv +
/// envp + 3 terminating nulls. O(size), no allocation.
inline decode_error decode_spawn(char* data, std::size_t size, char** slots, std::size_t slot_count,
                                 spawn_view& out) {
  if (size < counts_size) return decode_error::too_short;
  if (detail::read_u32(data) != version) return decode_error::bad_header;
  std::uint64_t candidates = detail::read_u32(data + 4);
  std::uint64_t args = detail::read_u32(data + 8);
  std::uint64_t env = detail::read_u32(data + 12);
  std::uint32_t has_cwd = detail::read_u32(data + 16);
  if (has_cwd > 1) return decode_error::bad_header;
  std::uint64_t strings = candidates + args + env;
  if (strings > max_strings || strings + 3 > slot_count) return decode_error::too_many_strings;
  if (candidates == 0 || args == 0) return decode_error::no_command;
  char* pos = data + counts_size;
  char* end = data + size;
  out.cwd = nullptr;
  if (has_cwd) {
    char* cwd[2];
    if (auto e = detail::take_strings(pos, end, 1, cwd); e != decode_error::none) return e;
    out.cwd = cwd[0];
  }
  char** c = slots;
  char** a = c + candidates + 1;
  char** v = a + args + 1;
  if (auto e = detail::take_strings(pos, end, static_cast<std::uint32_t>(candidates), c); e != decode_error::none)
    return e;
  if (auto e = detail::take_strings(pos, end, static_cast<std::uint32_t>(args), a); e != decode_error::none)
    return e;
  if (auto e = detail::take_strings(pos, end, static_cast<std::uint32_t>(env), v); e != decode_error::none)
    return e;
  if (pos != end) return decode_error::trailing_bytes;
  out.candidates = c;
  out.argv = a;
  out.envp = v;
  return decode_error::none;
}

/// Accumulates the parts of one request into a fixed buffer (the reaper's:
/// static, max_request bytes). Parts must come in order; a first part
/// restarts, anything out of place marks the request broken.
class request_assembler {
 public:
  constexpr request_assembler(char* buffer, std::size_t capacity) : buf_(buffer), cap_(capacity) {}

  enum class step { more, complete, broken };

  /// `bytes` follow the spawn_part header in one message.
  step add(const spawn_part& part, const char* bytes, std::size_t n) {
    if (part.h.flags & first_part) {
      active_ = true;
      id_ = part.h.id;
      total_ = part.total;
      got_ = 0;
      broken_ = total_ > cap_;
    } else if (!active_ || part.h.id != id_ || part.total != total_) {
      broken_ = true;
    }
    if (!broken_ && (part.offset != got_ || n > total_ - got_)) broken_ = true;
    if (!broken_) {
      for (std::size_t i = 0; i < n; ++i)
        buf_[got_ + i] = bytes[i];
      got_ += n;
    }
    if (!(part.h.flags & last_part)) return step::more;
    active_ = false;
    if (!broken_ && got_ != total_) broken_ = true;
    bool ok = !broken_;
    broken_ = false;
    return ok ? step::complete : step::broken;
  }

  char* data() const { return buf_; }
  std::size_t size() const { return got_; }
  std::uint64_t id() const { return id_; }

 private:
  char* buf_;
  std::size_t cap_;
  std::uint64_t id_ = 0;
  std::size_t total_ = 0;
  std::size_t got_ = 0;
  bool active_ = false; // between a first and a last part
  bool broken_ = false;
};

#ifndef MCPRT_REAPER_FREESTANDING

struct encoded_request {
  std::string payload;
  std::string error; // non-empty: nothing to send
};

/// The payload of a spawn request. A string with a NUL byte cannot reach
/// execve whole: that is an error, not a silent cut.
inline encoded_request encode_spawn(const std::optional<std::string>& cwd, const std::vector<std::string>& candidates,
                                    const std::vector<std::string>& argv, const std::vector<std::string>& envp) {
  encoded_request r;
  auto put_u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
      r.payload.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  std::size_t strings = candidates.size() + argv.size() + envp.size();
  if (strings > max_strings) {
    r.error = "too many arguments and environment variables (" + std::to_string(strings) + ", at most "
              + std::to_string(max_strings) + ")";
    return r;
  }
  if (candidates.empty() || argv.empty()) {
    r.error = "no command";
    return r;
  }
  put_u32(version);
  put_u32(static_cast<std::uint32_t>(candidates.size()));
  put_u32(static_cast<std::uint32_t>(argv.size()));
  put_u32(static_cast<std::uint32_t>(envp.size()));
  put_u32(cwd ? 1 : 0);
  auto put = [&](const std::string& s, const char* what) {
    if (s.find('\0') != std::string::npos) {
      if (r.error.empty()) r.error = std::string(what) + " contains a NUL byte";
      return;
    }
    r.payload += s;
    r.payload.push_back('\0');
  };
  if (cwd) put(*cwd, "the working directory");
  for (auto& s : candidates)
    put(s, "the command");
  for (auto& s : argv)
    put(s, "an argument");
  for (auto& s : envp)
    put(s, "an environment variable");
  if (r.error.empty() && r.payload.size() > max_request)
    r.error = "arguments and environment too large (" + std::to_string(r.payload.size()) + " bytes, at most "
              + std::to_string(max_request) + ")";
  if (!r.error.empty()) r.payload.clear();
  return r;
}

/// The messages that carry `payload` for process `id`, in order; the fds
/// go with the last one.
inline std::vector<std::string> split_spawn(std::uint64_t id, const std::string& payload) {
  std::vector<std::string> out;
  constexpr std::size_t room = max_message - sizeof(spawn_part);
  std::size_t offset = 0;
  do {
    std::size_t n = payload.size() - offset < room ? payload.size() - offset : room;
    spawn_part part;
    part.h.kind = static_cast<std::uint32_t>(kind::spawn);
    part.h.id = id;
    part.h.flags = (offset == 0 ? first_part : 0) | (offset + n == payload.size() ? last_part : 0);
    part.total = static_cast<std::uint32_t>(payload.size());
    part.offset = static_cast<std::uint32_t>(offset);
    std::string msg(reinterpret_cast<const char*>(&part), sizeof part);
    msg.append(payload, offset, n);
    out.push_back(std::move(msg));
    offset += n;
  } while (offset < payload.size());
  return out;
}

inline std::string describe(decode_error e) {
  switch (e) {
    case decode_error::none: return "no error";
    case decode_error::too_short: return "request too short";
    case decode_error::bad_header: return "bad request header";
    case decode_error::too_many_strings: return "too many strings";
    case decode_error::no_command: return "no command";
    case decode_error::unterminated: return "a string runs past the end";
    case decode_error::trailing_bytes: return "bytes after the last string";
  }
  return "unknown error";
}

#endif

} // namespace mcprt::reaper_protocol
