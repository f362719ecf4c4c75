#pragma once

// One connected Server-Sent Events response: a bounded queue of ready
// frames, pulled by the HTTP server's loop. Shared by the daemon's event
// stream (/workspace/mcp/events) and the gateway's MCP streams (/mcp).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cli/http_server.hpp"

namespace mcprt::cli {

using frame_ptr = std::shared_ptr<const std::string>;

/// One limit over every kind of stream the daemon holds open for a client
/// (the event stream, GET /mcp, /sse, a tools/call answered as a stream),
/// so that no client gets more by switching kind.
class stream_slots {
public:
  explicit stream_slots(std::size_t max) : max_(max), open_(std::make_shared<std::atomic<std::size_t>>(0)) {}

  /// A slot, held until the last copy of the token goes; nullptr when every
  /// slot is taken.
  std::shared_ptr<void> take() {
    auto n = open_->load();
    do {
      if (n >= max_) return nullptr;
    } while (!open_->compare_exchange_weak(n, n + 1));
    // Not null (a null shared_ptr tests false): it points at the count it
    // gives back to, and owns nothing.
    return std::shared_ptr<void>(static_cast<void*>(open_.get()), [open = open_](void*) { open->fetch_sub(1); });
  }

  std::size_t open() const { return open_->load(); }
  std::size_t max() const { return max_; }

private:
  std::size_t max_;
  std::shared_ptr<std::atomic<std::size_t>> open_;
};

/// One connected event stream: a bounded queue of ready SSE frames, pulled
/// by the server's loop. `push` comes from the bus subscriber and only
/// takes a short lock: it never waits for a client.
class event_stream final : public http_stream {
public:
  explicit event_stream(std::size_t limit) : limit_(limit) {}

  /// A slot of stream_slots, given back when the stream goes (its
  /// response ended).
  void hold(std::shared_ptr<void> slot) { slot_ = std::move(slot); }

  /// What the stream starts with (replayed events, a gap marker) and the
  /// highest event id in it: queued events up to that id are skipped.
  void set_initial(std::string head, uint64_t last) {
    std::lock_guard<std::mutex> guard{mtx_};
    current_ = std::move(head);
    offset_ = 0;
    last_ = std::max(last_, last);
  }

  /// False when this push made the stream fall behind (it is dropped).
  bool push(uint64_t seq, frame_ptr frame) {
    bool wake_up = false;
    bool dropped_now = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (dropped_ || closed_) return true;
      if (queue_.size() >= limit_) {
        dropped_ = true;
        dropped_now = true;
        queue_.clear();
      } else {
        queue_.emplace_back(seq, std::move(frame));
      }
      wake_up = std::exchange(waiting_, false);
    }
    if (dropped_now) abort();
    else if (wake_up) wake();
    return !dropped_now;
  }

  /// The daemon stops: the stream ends cleanly after what is queued.
  void close() {
    bool wake_up;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      closed_ = true;
      wake_up = std::exchange(waiting_, false);
    }
    if (wake_up) wake();
  }

  /// A comment when nothing was sent for a while.
  void keepalive() {
    bool wake_up;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!waiting_ || dropped_ || closed_ || !queue_.empty()) return;
      // Not a function-local static: the loop may still run while statics go at exit.
      queue_.emplace_back(0, std::make_shared<const std::string>(": keep-alive\n\n"));
      wake_up = std::exchange(waiting_, false);
    }
    if (wake_up) wake();
  }

  chunk pull(char* buf, std::size_t max) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (dropped_) return {state::fail, 0};
    while (offset_ >= current_.size()) {
      current_.clear();
      offset_ = 0;
      if (queue_.empty()) {
        if (closed_) return {state::end, 0};
        waiting_ = true;
        return {state::wait, 0};
      }
      auto [seq, frame] = std::move(queue_.front());
      queue_.pop_front();
      // seq 0: a keep-alive; otherwise skip what the replay already sent.
      if (seq != 0) {
        if (seq <= last_) continue;
        last_ = seq;
      }
      current_ = *frame;
    }
    auto n = std::min(max, current_.size() - offset_);
    std::copy_n(current_.data() + offset_, n, buf);
    offset_ += n;
    return {state::data, n};
  }

private:
  std::mutex mtx_;
  std::deque<std::pair<uint64_t, frame_ptr>> queue_;
  std::string current_;
  std::size_t offset_ = 0;
  uint64_t last_ = 0;
  std::size_t limit_;
  bool waiting_ = false;
  bool dropped_ = false;
  bool closed_ = false;
  std::shared_ptr<void> slot_;
};

} // namespace mcprt::cli
