#pragma once

// The calls in flight of one runtime, as the call broker keeps them: who
// owns each one, its id, its server's share of the per-server limit, its
// deadlines and where it is on its way. Pure bookkeeping: the broker
// (actors/call_broker) asks it what to do and carries that out.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mcprt {

using call_clock = std::chrono::steady_clock;

/// Where a call is on its way to its server.
enum class call_phase {
  asking,   // its session was asked to take it to the server
  waiting,  // its server is still connecting: asked again at `retry_at`
};

struct call_slot {
  /// Unique among the calls in flight: the caller's call id, prefixed with
  /// its owner's name and a '/' when the owner is not the runtime's host
  /// API (a remote host's session). The session, the connection, progress
  /// and server logs know the call by it.
  std::string key;
  std::string owner;   // empty: the runtime's host API
  std::string call_id; // the caller's; empty for requests nobody can cancel
  std::string session;
  std::string server;
  std::string tool;    // tools/call
  std::string method;  // set: another client request; `tool` is empty
  call_clock::time_point deadline;
  call_clock::time_point connecting_deadline;
  call_phase phase = call_phase::asking;
  call_clock::time_point retry_at;
  /// Tells one attempt's answer from a later one's (and from a later call
  /// that reuses the key).
  uint64_t serial = 0;
};

enum class call_refusal { bad_id, duplicate_id, too_many_calls };

struct call_refused {
  call_refusal why;
  std::string message;
};

/// A call taken in (`key` set) or refused (`refused` set).
struct call_admission {
  std::string key;
  std::optional<call_refused> refused;
};

/// The calls a server's request (sampling, elicitation) may belong to.
struct call_attribution {
  /// The one call of the runtime to that server and tool, when exactly one
  /// is in flight; nullopt otherwise.
  std::optional<call_slot> call;
  /// The keys of every call in flight to that server: a caller's call id,
  /// or `SESSION/ID` for a remote host's, so that two owners' never read
  /// as one.
  std::vector<std::string> in_flight;
};

/// A call id a caller may choose: 1 to 128 bytes of ASCII letters, digits
/// and `-` `_` `.` `:`.
bool is_valid_call_id(const std::string& id);

class call_table {
public:
  /// `max_per_server`: calls in flight per server name, all owners
  /// together; 0: no bound.
  explicit call_table(std::size_t max_per_server) : limit_(max_per_server) {}

  /// Takes `slot` in: checks its call id, that no call in flight has its
  /// key, and its server's limit; sets its key (requests without a call id
  /// get one of their own) and serial.
  call_admission admit(call_slot slot);

  call_slot* find(const std::string& key);
  /// The call of `key` when `serial` is still its attempt.
  call_slot* find(const std::string& key, uint64_t serial);

  /// The call leaves the table; its server's share goes back.
  std::optional<call_slot> remove(const std::string& key);

  /// The call will be asked for again at `at` (its server is connecting);
  /// a new serial tells the next attempt's answer apart.
  void wait(call_slot& slot, call_clock::time_point at);
  uint64_t ask_again(call_slot& slot);

  /// Keys of the calls whose deadline has passed at `now`.
  std::vector<std::string> expired(call_clock::time_point now) const;
  /// Keys of the waiting calls due for another attempt at `now`.
  std::vector<std::string> due(call_clock::time_point now) const;

  call_attribution attribute(const std::string& server, const std::string& tool) const;

  std::vector<std::string> keys() const;
  std::size_t size() const { return calls_.size(); }
  bool empty() const { return calls_.empty(); }
  std::size_t in_flight(const std::string& server) const;
  std::size_t limit() const { return limit_; }

  /// How a caller's call id is known in the table.
  static std::string key_of(const std::string& owner, const std::string& call_id);

private:
  std::size_t limit_;
  uint64_t next_serial_ = 1;
  uint64_t next_request_ = 1;
  std::map<std::string, call_slot> calls_;
  std::map<std::string, std::size_t> per_server_;
};

} // namespace mcprt
