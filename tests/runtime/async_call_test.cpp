// runtime::call_tool_async and the per-server bound of calls in flight,
// against real mcprt-test-server processes: a call returns at once and
// answers through its callback, a server never has more calls in flight
// than the bound (blocking calls count too), and a server that is not
// connected is asked again on a timer, without a thread per call.

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

/// Collects the answers of async calls, in arrival order.
struct answers {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<caf::expected<json>> got;

  call_callback callback() {
    return [this](caf::expected<json> r) {
      std::lock_guard<std::mutex> guard{mtx};
      got.push_back(std::move(r));
      cv.notify_all();
    };
  }

  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return got.size() >= n; });
  }

  std::size_t size() {
    std::lock_guard<std::mutex> guard{mtx};
    return got.size();
  }
};

using test::is;

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

using test::server;

class AsyncCall : public test::runtime_fixture {
protected:
  AsyncCall() : runtime_fixture("mcprt-async") {}

  void start(const json& servers, std::size_t max_calls) {
    save(user_settings(), {{"mcpServers", servers}});
    auto o = options();
    o.watch = false;
    o.max_calls_per_server = max_calls;
    // Subscribed before the session opens: none of its events is missed.
    runtime_fixture::start(o);
  }

  /// Waits for `name`'s connection to report `connected`, then checks that
  /// it answers a call.
  void wait_connected(const std::string& name) {
    runtime_fixture::wait_connected(name, 30s);
    auto r = rt->call_tool(session, name, "echo", {{"text", "up?"}}, 10s);
    ASSERT_TRUE(r) << name << " connected but did not answer: " << sys->render(r.error());
  }

  /// Waits until a pass of the session has tried `name` and reported it
  /// failed.
  void wait_failed(const std::string& name) {
    auto tried = log->wait(
      [&](const event& e) {
        auto f = std::get_if<events::reconcile_finished>(&e.payload);
        return f && f->session == session
               && std::any_of(f->errors.begin(), f->errors.end(), [&](auto& x) { return x.name == name; });
      },
      0, 30s);
    ASSERT_TRUE(tried) << "no pass reported " << name << " failed";
  }
};

} // namespace

TEST_F(AsyncCall, ReturnsAtOnceAndAnswersThroughTheCallback) {
  start({{"echo", server()}}, 4);
  wait_connected("echo");
  answers a;
  auto t0 = clock_type::now();
  rt->call_tool_async(session, "echo", "sleep", {{"ms", 500}}, a.callback());
  EXPECT_LT(clock_type::now() - t0, 200ms) << "call_tool_async blocked";
  ASSERT_TRUE(a.wait_for_count(1));
  ASSERT_TRUE(a.got[0]) << sys->render(a.got[0].error());
  EXPECT_EQ((*a.got[0])["content"][0]["text"], "slept 500");
  // Errors come the same way.
  rt->call_tool_async(session, "echo", "no_such_tool", json::object(), a.callback());
  rt->call_tool_async(session, "nope", "echo", json::object(), a.callback());
  rt->call_tool_async("no-session", "echo", "echo", json::object(), a.callback());
  ASSERT_TRUE(a.wait_for_count(4));
  for (std::size_t i = 1; i < 4; ++i)
    EXPECT_FALSE(a.got[i]) << i;
}

TEST_F(AsyncCall, AServerNeverHasMoreCallsInFlightThanTheBound) {
  start({{"slow", server()}, {"other", server()}}, 2);
  wait_connected("slow");
  wait_connected("other");
  answers sleeping;
  rt->call_tool_async(session, "slow", "sleep", {{"ms", 3000}}, sleeping.callback());
  rt->call_tool_async(session, "slow", "sleep", {{"ms", 3000}}, sleeping.callback());
  // The third fails at once, naming the server; a blocking call counts too.
  answers refused;
  auto t0 = clock_type::now();
  rt->call_tool_async(session, "slow", "echo", {{"text", "x"}}, refused.callback());
  ASSERT_TRUE(refused.wait_for_count(1, 1s));
  EXPECT_LT(clock_type::now() - t0, 1s);
  ASSERT_FALSE(refused.got[0]);
  EXPECT_TRUE(is(refused.got[0].error(), errc::too_many_calls)) << sys->render(refused.got[0].error());
  EXPECT_NE(sys->render(refused.got[0].error()).find("slow"), std::string::npos);
  auto blocking = rt->call_tool(session, "slow", "echo", {{"text", "x"}});
  ASSERT_FALSE(blocking);
  EXPECT_TRUE(is(blocking.error(), errc::too_many_calls));
  // Another server is not held up.
  auto other = rt->call_tool(session, "other", "echo", {{"text", "free"}});
  ASSERT_TRUE(other) << sys->render(other.error());
  EXPECT_EQ((*other)["content"][0]["text"], "free");
  EXPECT_EQ(sleeping.size(), 0u);
  // Once they answered, the slots are free again.
  ASSERT_TRUE(sleeping.wait_for_count(2));
  auto after = rt->call_tool(session, "slow", "echo", {{"text", "again"}});
  ASSERT_TRUE(after) << sys->render(after.error());
}

TEST_F(AsyncCall, ANotConnectedServerIsAskedAgainOnATimerWithoutAThreadPerCall) {
  // It exits on initialize: admitted, never connected.
  start({{"broken", server({"--exit-on-initialize"})}}, 0);
  // Until its first pass has tried it, the session does not know it.
  wait_failed("broken");
  {
    auto r = rt->call_tool(session, "broken", "echo", {{"text", "x"}});
    ASSERT_FALSE(r);
    ASSERT_TRUE(is(r.error(), errc::not_connected)) << sys->render(r.error());
  }
  auto threads_before = thread_count();
  answers a;
  call_options wait;
  wait.wait_connecting = 1500ms;
  auto t0 = clock_type::now();
  const std::size_t calls = 40;
  for (std::size_t i = 0; i < calls; ++i)
    rt->call_tool_async(session, "broken", "echo", {{"text", "x"}}, a.callback(), wait);
  EXPECT_LT(clock_type::now() - t0, 1s) << "call_tool_async blocked";
  // While they wait, no thread is added per call.
  EXPECT_LT(thread_count(), threads_before + 5);
  ASSERT_TRUE(a.wait_for_count(calls));
  EXPECT_GE(clock_type::now() - t0, 1400ms) << "the calls were not retried for the whole wait";
  for (auto& r : a.got) {
    ASSERT_FALSE(r);
    EXPECT_TRUE(is(r.error(), errc::not_connected)) << sys->render(r.error());
  }
  // Without a wait the answer is immediate.
  answers quick;
  t0 = clock_type::now();
  rt->call_tool_async(session, "broken", "echo", {{"text", "x"}}, quick.callback());
  ASSERT_TRUE(quick.wait_for_count(1));
  EXPECT_LT(clock_type::now() - t0, 1000ms);
}

TEST_F(AsyncCall, ACallInFlightAtShutdownStillAnswers) {
  start({{"slow", server()}}, 1);
  wait_connected("slow");
  answers a;
  rt->call_tool_async(session, "slow", "sleep", {{"ms", 20000}}, a.callback());
  rt->shutdown();
  ASSERT_TRUE(a.wait_for_count(1, 20s)) << "the callback never ran";
  EXPECT_FALSE(a.got[0]);
}
