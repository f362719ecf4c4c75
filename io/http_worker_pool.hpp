#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mcprt::io {

/// The threads every http_transport runs its requests on. Requests (POST,
/// DELETE) run on a fixed number of workers shared by all transports; a
/// GET event stream needs a long-lived blocking request, so each open one
/// gets a dedicated thread instead, at most `max_event_streams` at a time.
///
/// A POST holds its worker until its response is complete (an SSE response
/// until that stream ends), so `threads` bounds how many requests wait for
/// answers at once across all transports; more queue behind them. Size it
/// above the number of slow tool calls expected at the same time (a server
/// request arriving on an SSE response needs a free worker for our answer).
///
/// A worker thread starts when a job finds none idle, up to `threads`: a
/// runtime with no HTTP server keeps none (the idle footprint).
///
/// Destroy every transport before the pool: the destructor finishes the
/// jobs already posted (requests of destroyed transports are aborted and
/// end quickly) and joins all threads.
class http_worker_pool {
public:
  explicit http_worker_pool(std::size_t threads = 4, std::size_t max_event_streams = 64);
  ~http_worker_pool();
  http_worker_pool(const http_worker_pool&) = delete;
  http_worker_pool& operator=(const http_worker_pool&) = delete;

  void post(std::function<void()> job);
  /// The most worker threads it starts.
  std::size_t thread_limit() const { return max_workers_; }
  /// The worker threads started so far.
  std::size_t thread_count() const;
  std::size_t max_event_streams() const { return max_streams_; }
  std::size_t active_event_streams() const;
  /// Waits until no event stream is running (each ends once its transport
  /// closes); false if some still run after `timeout`.
  bool wait_event_streams_idle(std::chrono::milliseconds timeout) const;

  /// Runs `body` on a new dedicated thread unless `max_event_streams`
  /// threads are running already (then returns false and drops `body`).
  bool start_event_stream(std::function<void()> body);

private:
  struct stream_thread {
    std::thread thread;
    std::shared_ptr<bool> done; // guarded by mu_
  };
  void reap_locked(std::vector<std::thread>& finished);
  void work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::condition_variable streams_cv_; // a stream thread finished
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  std::size_t max_workers_;
  std::size_t idle_ = 0; // workers waiting for a job; guarded by mu_
  std::size_t max_streams_;
  std::vector<stream_thread> streams_;
};

} // namespace mcprt::io
