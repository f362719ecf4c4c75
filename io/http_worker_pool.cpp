#include "io/http_worker_pool.hpp"

namespace mcprt::io {

http_worker_pool::http_worker_pool(std::size_t threads, std::size_t max_event_streams)
    : max_workers_(threads == 0 ? 1 : threads), max_streams_(max_event_streams) {}

void http_worker_pool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return; // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

std::size_t http_worker_pool::thread_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

http_worker_pool::~http_worker_pool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_)
    t.join();
  std::vector<stream_thread> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
  }
  for (auto& s : streams)
    s.thread.join();
}

void http_worker_pool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (idle_ < jobs_.size() && workers_.size() < max_workers_) workers_.emplace_back([this] { work(); });
  }
  cv_.notify_one();
}

void http_worker_pool::reap_locked(std::vector<std::thread>& finished) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (*it->done) {
      finished.push_back(std::move(it->thread));
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t http_worker_pool::active_event_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& s : streams_)
    if (!*s.done) ++n;
  return n;
}

bool http_worker_pool::wait_event_streams_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return streams_cv_.wait_for(lock, timeout, [&] {
    for (const auto& s : streams_)
      if (!*s.done) return false;
    return true;
  });
}

bool http_worker_pool::start_event_stream(std::function<void()> body) {
  std::vector<std::thread> finished;
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reap_locked(finished);
    if (!stopping_ && streams_.size() < max_streams_) {
      auto done = std::make_shared<bool>(false);
      std::thread t([this, done, body = std::move(body)] {
        body();
        std::lock_guard<std::mutex> lock(mu_);
        *done = true;
        streams_cv_.notify_all();
      });
      streams_.push_back({std::move(t), std::move(done)});
      started = true;
    }
  }
  for (auto& t : finished)
    t.join(); // they have finished: quick
  return started;
}

} // namespace mcprt::io
