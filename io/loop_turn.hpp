#pragma once

#include <memory>

namespace mcprt::io {

/// Told when an I/O loop's turn begins and ends: a turn is what the loop
/// does between two waits (the callbacks of the descriptors that were
/// ready, posted work, timers). The runtime uses it to run the actor work
/// those callbacks started on the loop's own thread at the end of the turn,
/// instead of waking a scheduler thread for it (see actors/io_thread_jobs).
/// Both are called on the loop thread, in pairs, never nested.
class loop_turn_hook {
public:
  virtual ~loop_turn_hook() = default;
  virtual void turn_begins() noexcept = 0;
  virtual void turn_ends() noexcept = 0;
};

/// A loop's side of the hook: `begin` after a wait, `end` before the next
/// one (and when the loop leaves). Either is a no-op without a hook, and
/// `end` without a turn begun.
class loop_turn {
public:
  explicit loop_turn(std::shared_ptr<loop_turn_hook> hook) : hook_(std::move(hook)) {}
  loop_turn(const loop_turn&) = delete;
  loop_turn& operator=(const loop_turn&) = delete;
  ~loop_turn() { end(); }

  void begin() noexcept {
    if (!hook_ || open_) return;
    open_ = true;
    hook_->turn_begins();
  }

  void end() noexcept {
    if (!open_) return;
    open_ = false;
    hook_->turn_ends();
  }

private:
  std::shared_ptr<loop_turn_hook> hook_;
  bool open_ = false;
};

} // namespace mcprt::io
