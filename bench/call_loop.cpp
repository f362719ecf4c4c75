#include "call_loop.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

namespace mcprt::bench {

using loop_clock = std::chrono::steady_clock;

loop_result run_call_loop(const std::function<call_fn()>& make, int clients, double seconds) {
  std::vector<call_fn> callers;
  for (int i = 0; i < clients; ++i)
    callers.push_back(make());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> errors{0};
  std::mutex mtx;
  std::vector<double> lat;
  std::vector<std::thread> threads;
  auto start = loop_clock::now();
  for (auto& call : callers)
    threads.emplace_back([&, call] {
      std::vector<double> mine;
      while (!stop) {
        auto t0 = loop_clock::now();
        bool ok = call();
        auto us = std::chrono::duration<double, std::micro>(loop_clock::now() - t0).count();
        if (ok) mine.push_back(us);
        else ++errors;
      }
      std::lock_guard<std::mutex> guard{mtx};
      lat.insert(lat.end(), mine.begin(), mine.end());
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads)
    t.join();
  loop_result r;
  r.clients = clients;
  r.seconds = std::chrono::duration<double>(loop_clock::now() - start).count();
  r.calls = lat.size();
  r.errors = errors;
  std::sort(lat.begin(), lat.end());
  auto at = [&](double q) {
    return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, static_cast<std::size_t>(q * lat.size()))];
  };
  r.p50_us = at(0.50);
  r.p99_us = at(0.99);
  return r;
}

bool warm_up(const call_fn& call) {
  for (int i = 0; i < 200; ++i) {
    if (call()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::optional<std::string> line_starting(const std::string& file, const std::string& prefix, double timeout_s) {
  auto deadline = loop_clock::now() + std::chrono::duration<double>(timeout_s);
  while (loop_clock::now() < deadline) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(prefix, 0) == 0) return line;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

} // namespace mcprt::bench
