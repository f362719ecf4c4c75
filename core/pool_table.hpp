#pragma once

// The pool's rules as a pure state machine: which entries exist, who holds
// them, which budget slots the pool holds, when an entry drains, restarts,
// is given up or closes. It reads no clock (each event brings `now`), does
// no I/O and knows no actor: every event appends what must happen to
// `effects()`, and the pool supervisor (pool/pool_supervisor.cpp) carries
// those out. The design notes are at the top of core/pool_table.cpp.
//
// Connections are known by an index the table hands out per entry (the
// shell keeps its connection actors in a vector at those indices), so that
// the hot path needs no second lookup by id. Waiters, restart requests and
// sessions are opaque numbers the shell maps to its promises and holders.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/backoff.hpp"
#include "core/budget_ledger.hpp"
#include "core/server_config.hpp"

namespace mcprt {

using pool_time = std::chrono::steady_clock::time_point;

/// Mirrors of the contract's enums (messages/pool.hpp), which core cannot
/// include; the shell maps them one to one.
enum class pool_state : uint8_t { spawning, active, draining, restarting };
enum class pool_link : uint8_t { connecting, connected, disconnected, error, needs_auth };
enum class pool_release : uint8_t { session_closed, removed, changed };
enum class pool_change : uint8_t { restarting, restarted, failed, closed };
enum class pool_timer_type : uint8_t { drain, idle, restart };
enum class pool_error : uint8_t { not_connected, pool_draining, budget_exhausted, spawn_failed, needs_auth };

struct pool_table_options {
  /// How long an unreferenced entry lingers before it is closed; clamped to
  /// [1 s, 10 min] by the table.
  std::chrono::milliseconds drain_delay{30000};
  /// An entry that first went idle this long ago is closed if it is idle at
  /// that moment, however often sessions attached and detached meanwhile.
  std::chrono::milliseconds max_idle{300000};
  /// Crash restarts: backoff_delay(attempt, base, cap, jitter 0.1).
  std::chrono::milliseconds backoff_base{1000};
  std::chrono::milliseconds backoff_cap{30000};
  /// At most this many crash restarts within `restart_window`; one more
  /// crash and the entry is given up (`pool_entry_failed`).
  std::size_t max_restarts = 5;
  std::chrono::milliseconds restart_window{60000};
  /// Stderr lines carried by `pool_entry_failed`.
  std::size_t failed_stderr_lines = 20;
  /// Whether a budget admits new entries (else they spawn at once). The
  /// pool supervisor sets it from whether it has a budget actor.
  bool budget = true;
  /// How a connection id appears in the pool's log lines (the runtime's
  /// keyed digest; its events are shown by the bus); empty: unchanged.
  std::function<std::string(const std::string&)> show_id;
  /// Picks the point in the backoff jitter, in [0, 1]; empty: a generator
  /// seeded with `seed` (the pool supervisor seeds it from
  /// std::random_device when `seed` is 0).
  std::function<double()> unit_random;
  uint64_t seed = 0;
};

// -- effects ------------------------------------------------------------------------

/// Ask the budget for the slot of `name` (answer with reserve_answered).
struct pool_reserve_effect {
  std::string id;
  uint64_t serial = 0;
  std::string name;
  std::string transport;
};

/// Give the slot of `name` back to the budget.
struct pool_release_slot_effect {
  std::string name;
};

/// Start a connection at index `connection` (report its status with
/// connection_update / connection_down, carrying `generation`).
struct pool_spawn_effect {
  std::string id;
  std::size_t connection = 0;
  uint64_t generation = 0;
  server_config config;
};

/// A failure event to publish once the stderr tail of a stopped connection
/// is known (see pool_table::finish_failed_event).
struct pool_event {
  enum class kind : uint8_t { restarted, failed } what = kind::restarted;
  std::string id;
  std::string name;
  uint64_t generation = 0;
  uint64_t restarts = 0;
  std::string last_error;
  std::string reason; // restarted: "crash" or "manual"
  std::vector<std::string> stderr_tail; // failed
};

/// Stop the connection at index `connection`. With `ask_tail`, first ask it
/// for its stderr tail: then hand it back with stderr_tail(id, serial, failed,
/// tail) (with an empty tail if it does not answer).
struct pool_stop_effect {
  std::size_t connection = 0;
  bool ask_tail = false;
  std::string id;
  uint64_t serial = 0;
  std::optional<pool_event> failed;
};

struct pool_timer_effect {
  pool_timer_type kind = pool_timer_type::drain;
  std::string id;
  uint64_t token = 0;
  std::chrono::milliseconds delay{0};
};

/// Answer waiter `waiter` with the handle of the entry `id`.
struct pool_reply_effect {
  uint64_t waiter = 0;
  std::string id;
  std::size_t connection = 0;
  uint64_t generation = 0;
};

/// Answer waiter `waiter` with an error.
struct pool_fail_effect {
  uint64_t waiter = 0;
  pool_error code = pool_error::not_connected;
  std::string message;
};

struct pool_restart_outcome {
  std::string id;
  bool restarted = false;
  int64_t duration_ms = 0;
  std::string reason;
};

/// Answer restart request `request`.
struct pool_restart_done_effect {
  uint64_t request = 0;
  std::vector<pool_restart_outcome> results;
};

/// Tell the holder of `session` what happened to an entry it holds.
struct pool_notify_effect {
  uint64_t session = 0;
  std::string id;
  std::string server;
  pool_change what = pool_change::restarting;
  uint64_t generation = 0;
  std::string error;
};

struct pool_publish_effect {
  pool_event event;
};

struct pool_log_effect {
  enum class level : uint8_t { debug, info, warn, error } severity = level::info;
  std::string text;
};

using pool_effect =
  std::variant<pool_reserve_effect, pool_release_slot_effect, pool_spawn_effect, pool_stop_effect,
               pool_timer_effect, pool_reply_effect, pool_fail_effect, pool_restart_done_effect,
               pool_notify_effect, pool_publish_effect, pool_log_effect>;

// -- answers --------------------------------------------------------------------------

/// What an acquire or attach gets at once.
struct pool_join {
  enum class outcome : uint8_t { ready, waiting, refused } result = outcome::refused;
  /// ready: the entry's id, connection index and generation.
  const std::string* id = nullptr;
  std::size_t connection = 0;
  uint64_t generation = 0;
  /// refused:
  pool_error code = pool_error::not_connected;
  std::string message;
};

/// An entry as snapshots and lookups show it.
struct pool_entry_view {
  std::string id;
  std::string name;
  std::string transport;
  pool_state state = pool_state::spawning;
  bool live = false; // has a current connection
  std::size_t connection = 0;
  uint64_t generation = 0;
  pool_link link = pool_link::connecting;
  int32_t pid = -1;
  uint64_t refs = 0;
  uint64_t restarts = 0;
  std::string last_error;
  std::vector<std::string> stderr_tail;
};

/// What drain_all leaves the shell to stop.
struct pool_drain_plan {
  uint64_t already_stopped = 0;
  struct stop {
    std::string id;
    std::size_t connection = 0;
  };
  std::vector<stop> to_stop;
};

class pool_table {
public:
  explicit pool_table(pool_table_options opts = {});

  // -- events -----------------------------------------------------------------------

  /// A session wants the entry of `config`. `waiter` names the answer in
  /// case it has to wait (the shell makes a promise only then).
  pool_join acquire(uint64_t session, server_config config, uint64_t waiter);
  /// Attach to an existing entry by id; refused (not_connected) if none.
  pool_join attach(uint64_t session, const std::string& id, uint64_t waiter);
  /// Drops one handle (or a waiting acquire) of `session`; false if none.
  bool detach(uint64_t session, const std::string& id, pool_release reason, pool_time now);
  /// Drops everything `session` holds or waits for; how many handles.
  uint64_t release_session(uint64_t session, pool_time now);

  /// The budget answered a reservation. `budget_size` should be known for
  /// a refusal (it goes into the error).
  void reserve_answered(const std::string& id, uint64_t serial, const std::string& name, reserve_result r,
                        std::optional<uint64_t> budget_size, pool_time now);
  /// The reservation request itself failed.
  void reserve_failed(const std::string& id, uint64_t serial, pool_error code, const std::string& message);

  /// Status of the connection `generation` of entry `id`.
  void connection_update(const std::string& id, uint64_t generation, pool_link link, int32_t pid,
                         const std::string& error, pool_time now);
  /// The connection actor went away (or could not be started).
  void connection_down(const std::string& id, uint64_t generation, const std::string& why, pool_time now);
  /// The stderr tail a stopped connection handed over (see
  /// pool_stop_effect), empty if it handed over none: published with
  /// `failed` (an entry given up), else kept on the entry for snapshots.
  void stderr_tail(const std::string& id, uint64_t serial, std::optional<pool_event> failed,
                   std::vector<std::string> tail);

  void timer_fired(pool_timer_type kind, const std::string& id, uint64_t token, pool_time now);

  /// Restarts every entry of `name`; answers with pool_restart_done_effect,
  /// at once when there is nothing to wait for.
  void restart(const std::string& name, uint64_t request, pool_time now);

  /// Closes everything: every waiter fails, every holder is told, every
  /// slot goes back; later acquires are refused.
  pool_drain_plan drain_all(pool_time now);

  // -- effects ------------------------------------------------------------------------

  /// What the events since the last clear_effects() asked for, in order.
  std::vector<pool_effect>& effects() { return effects_; }
  void clear_effects() { effects_.clear(); }

  // -- observers ------------------------------------------------------------------------

  bool draining() const { return draining_; }
  std::size_t size() const { return entries_.size(); }
  /// The live entry `id` (nullptr if none or not connected).
  const std::string* live_id(const std::string& id, std::size_t& connection, uint64_t& generation) const;
  /// Every entry, sorted by id.
  std::vector<pool_entry_view> entries() const;
  /// Live stdio entries that are connected: the server processes running.
  std::size_t live_subprocesses() const;
  /// Names whose slot the pool holds.
  std::vector<std::string> held_slots() const;
  /// Sessions holding entry `id`, and how many handles each.
  std::vector<std::pair<uint64_t, uint64_t>> holders(const std::string& id) const;
  /// How many connection indices exist (the shell's vector size).
  std::size_t connection_capacity() const { return next_connection_; }

private:
  struct waiter {
    uint64_t session = 0;
    uint64_t token = 0;
  };
  struct restart_waiter {
    uint64_t request = 0;
    std::size_t index = 0;
    pool_time started;
  };
  struct restart_request {
    std::vector<pool_restart_outcome> results;
    std::size_t pending = 0;
  };
  using holder_map = std::unordered_map<uint64_t, uint64_t>;
  struct entry {
    /// Ids come back after an entry closed, serials never do.
    uint64_t serial = 0;
    std::string id;
    std::string name;
    std::string transport;
    server_config config;
    pool_state state = pool_state::spawning;
    /// Whether `connection` holds a current connection (not while the
    /// reservation is pending, while a restart waits, or once retired).
    bool live = false;
    std::size_t connection = 0;
    uint64_t generation = 0;
    pool_link link = pool_link::connecting;
    int32_t pid = -1;
    /// Attached sessions and how many handles each holds; refs is the sum.
    holder_map holders;
    uint64_t refs = 0;
    std::vector<waiter> waiters;
    std::vector<restart_waiter> restart_waiters;
    /// The drain timer in flight (0: none); it closes the entry only if it
    /// is still draining at `drain_deadline`, else re-arms for the rest.
    uint64_t drain_token = 0;
    pool_time drain_deadline;
    uint64_t idle_token = 0;
    uint64_t restart_token = 0;
    /// Set at the first idle moment; attach/detach flapping keeps it.
    bool idle_armed = false;
    restart_intensity intensity;
    uint64_t restarts = 0;
    std::string last_error;
    std::vector<std::string> stderr_tail;
  };

  entry* find(const std::string& id, uint64_t serial = 0);
  std::string shown(const std::string& id) const;
  void log(pool_log_effect::level level, std::string text);
  double unit_random();

  pool_join join(entry& e, uint64_t session, uint64_t waiter);
  void attach_holder(entry& e, uint64_t session);
  void drop_holder(entry& e, holder_map::iterator h);
  void spawn(entry& e);
  void stop(entry& e, bool ask_tail = false, std::optional<pool_event> failed = std::nullopt);
  void start_drain(entry& e, pool_time now);
  void arm_drain_timer(entry& e, std::chrono::milliseconds delay);
  void connected(entry& e, pool_time now);
  void failure(entry& e, const std::string& why, pool_time now);
  void needs_auth(entry& e, const std::string& why, pool_time now);
  void close(entry& e, const char* reason, pool_time now);
  void remove(const std::string& id);
  void release_slot_if_last(const std::string& name);
  bool has_sibling(const std::string& name) const;
  void fail_waiters(entry& e, pool_error code, const std::string& message);
  void finish_restart_waiters(entry& e, bool ok, const std::string& reason, pool_time now);
  void notify_holders(const entry& e, pool_change what, const std::string& error);
  static pool_event event_of(const entry& e, pool_event::kind what);
  /// `failed` with the stderr tail a stopped connection handed over (or the
  /// one known before, if it handed over none), cut to the configured lines.
  pool_event finish_failed_event(pool_event failed, std::vector<std::string> tail) const;
  void publish_restarted(const entry& e, const char* reason);
  void after_release(entry& e, pool_release reason, pool_time now);

  pool_table_options opts_;
  std::unordered_map<std::string, entry> entries_;
  /// Last generation issued per id, never forgotten (see pool_table.cpp).
  std::unordered_map<std::string, uint64_t> generations_;
  std::set<std::string> held_;
  std::vector<holder_map::node_type> spare_holders_;
  std::unordered_map<uint64_t, restart_request> restarts_;
  std::vector<std::size_t> free_connections_;
  std::size_t next_connection_ = 0;
  uint64_t next_serial_ = 1;
  uint64_t next_token_ = 1;
  bool draining_ = false;
  std::mt19937_64 rng_;
  std::vector<pool_effect> effects_;
};

} // namespace mcprt
