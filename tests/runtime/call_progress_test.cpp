// Progress and cancel of tool calls through the runtime, against
// real mcprt-test-server processes: a call's progress reaches the caller's
// callback and the bus under the call's id, never after the answer; a
// cancelled call fails with errc::cancelled, its server hears of it, and the
// runtime goes on serving; a call parked while its server connects is
// cancelled at once, without reaching the server.

#include <gtest/gtest.h>

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "../support/wait_for.hpp"
#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

using test::is;

/// One async call: its progress steps and its answer, and how many steps
/// had come when the answer came.
struct tracked_call {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<tool_call_progress> steps;
  std::optional<caf::expected<json>> answer;
  std::size_t steps_at_answer = 0;

  call_options options(std::string call_id, bool events = false) {
    call_options o;
    o.timeout = 30s;
    o.call_id = std::move(call_id);
    o.progress_events = events;
    o.progress = [this](const tool_call_progress& p) {
      std::lock_guard<std::mutex> guard{mtx};
      steps.push_back(p);
      cv.notify_all();
    };
    return o;
  }

  call_callback callback() {
    return [this](caf::expected<json> r) {
      std::lock_guard<std::mutex> guard{mtx};
      steps_at_answer = steps.size();
      answer = std::move(r);
      cv.notify_all();
    };
  }

  bool wait_answer(std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return answer.has_value(); });
  }

  bool wait_steps(std::size_t n, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, timeout, [&] { return steps.size() >= n; });
  }

  std::size_t step_count() {
    std::lock_guard<std::mutex> guard{mtx};
    return steps.size();
  }
};

using test::server;

class CallProgress : public test::runtime_fixture {
protected:
  CallProgress() : runtime_fixture("mcprt-progress") {}

  void SetUp() override {
    runtime_fixture::SetUp();
    fs::create_directories(dir / "notes");
  }

  void start(const json& servers) {
    save(user_settings(), {{"mcpServers", servers}});
    auto o = options();
    o.watch = false;
    runtime_fixture::start(o);
  }

  std::string file_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

} // namespace

TEST_F(CallProgress, ProgressReachesTheCallerAndTheBusUnderTheCallIdBeforeTheAnswer) {
  start({{"srv", server()}});
  wait_connected("srv");
  tracked_call c;
  auto from = log->mark();
  auto id = rt->call_tool_async(session, "srv", "sleep", {{"ms", 200}}, c.callback(), c.options("job-1", true));
  EXPECT_EQ(id, "job-1");
  ASSERT_TRUE(c.wait_answer());
  ASSERT_TRUE(*c.answer) << sys->render(c.answer->error());
  EXPECT_EQ((**c.answer)["content"][0]["text"], "slept 200");
  ASSERT_GE(c.steps_at_answer, 1u) << "no progress reached the caller before the answer";
  auto& first = c.steps.at(0);
  EXPECT_EQ(first.call_id, "job-1");
  EXPECT_EQ(first.session, session);
  EXPECT_EQ(first.server, "srv");
  EXPECT_EQ(first.tool, "sleep");
  EXPECT_EQ(first.progress, 1.0);
  EXPECT_EQ(first.total, std::optional<double>(2.0));
  EXPECT_EQ(first.message, "sleeping");
  // The same step on the bus, as the daemon's SSE stream shows it.
  auto ev = log->wait(
    [](const event& e) {
      auto p = std::get_if<events::call_progress>(&e.payload);
      return p && p->call_id == "job-1";
    },
    from, 10s);
  ASSERT_TRUE(ev) << "no call_progress event";
  EXPECT_EQ(to_string(ev->kind), "call_progress");
  EXPECT_EQ(ev->data.value["server"], "srv");
  EXPECT_EQ(ev->data.value["tool"], "sleep");
  EXPECT_EQ(ev->data.value["progress"], 1.0);
  EXPECT_EQ(ev->data.value["total"], 2.0);
  EXPECT_EQ(ev->data.value["message"], "sleeping");
  // Nothing comes after the answer (a later call's round trip is past any
  // step still on its way).
  auto r = rt->call_tool(session, "srv", "echo", {{"text", "after"}}, 10s);
  ASSERT_TRUE(r) << sys->render(r.error());
  EXPECT_EQ(c.step_count(), c.steps_at_answer) << "a progress step came after the answer";
}

TEST_F(CallProgress, ACallWithoutProgressEventsPublishesNone) {
  start({{"srv", server()}});
  wait_connected("srv");
  tracked_call c;
  auto from = log->mark();
  rt->call_tool_async(session, "srv", "sleep", {{"ms", 100}}, c.callback(), c.options("quiet-1", false));
  ASSERT_TRUE(c.wait_answer());
  ASSERT_TRUE(*c.answer) << sys->render(c.answer->error());
  EXPECT_GE(c.steps_at_answer, 1u);
  // A later call's step event is published after any of the first call's
  // would have been (those come before its answer): once it is in, the
  // first call's would be too.
  tracked_call loud;
  rt->call_tool_async(session, "srv", "sleep", {{"ms", 10}}, loud.callback(), loud.options("loud-1", true));
  ASSERT_TRUE(loud.wait_answer());
  auto fence = log->wait(
    [](const event& e) {
      auto p = std::get_if<events::call_progress>(&e.payload);
      return p && p->call_id == "loud-1";
    },
    from, 10s);
  ASSERT_TRUE(fence) << "no call_progress event for a call that asked for them";
  auto ev = log->wait(
    [](const event& e) {
      auto p = std::get_if<events::call_progress>(&e.payload);
      return p && p->call_id == "quiet-1";
    },
    from, 0ms);
  EXPECT_FALSE(ev) << "progress was published without progress_events";
}

TEST_F(CallProgress, ACancelledCallFailsAtOnceTheServerHearsOfItAndTheRuntimeGoesOn) {
  auto notes = dir / "notes" / "cancelled.txt";
  start({{"srv", server({"--cancel-file", notes.string()})}});
  wait_connected("srv");
  tracked_call c;
  auto t0 = clock_type::now();
  rt->call_tool_async(session, "srv", "sleep", {{"ms", 30000}}, c.callback(), c.options("slow-1"));
  // The first step says the server is running the call.
  ASSERT_TRUE(c.wait_steps(1)) << "the server never started the call";
  EXPECT_TRUE(rt->cancel_call("slow-1"));
  ASSERT_TRUE(c.wait_answer(10s)) << "a cancelled call did not answer";
  ASSERT_FALSE(*c.answer) << "a cancelled call answered";
  EXPECT_TRUE(is(c.answer->error(), errc::cancelled)) << sys->render(c.answer->error());
  EXPECT_LT(clock_type::now() - t0, 20s) << "the call waited for the server";
  EXPECT_FALSE(rt->cancel_call("slow-1")) << "a call that answered is not in flight";
  ASSERT_TRUE(test::wait_for_change_in(
    dir / "notes", [&] { return file_text(notes).find("cancelled ") != std::string::npos; }, 10s))
    << "the server never got notifications/cancelled";
  auto r = rt->call_tool(session, "srv", "echo", {{"text", "still here"}}, 10s);
  ASSERT_TRUE(r) << sys->render(r.error());
  EXPECT_EQ((*r)["content"][0]["text"], "still here");
}

TEST_F(CallProgress, ACallParkedWhileItsServerConnectsIsCancelledAtOnce) {
  start({{"stuck", server({"--hang-on-initialize"})}});
  // The session is acquiring it: a call now parks in the session.
  auto connecting = log->wait(
    [](const event& e) {
      auto u = std::get_if<events::client_update>(&e.payload);
      return u && u->server == "stuck" && u->status == connection_status::connecting;
    },
    0, 30s);
  ASSERT_TRUE(connecting);
  tracked_call c;
  auto o = c.options("parked-1");
  o.wait_connecting = 30s;
  rt->call_tool_async(session, "stuck", "echo", {{"text", "never"}}, c.callback(), o);
  EXPECT_FALSE(c.wait_answer(200ms)) << "the call did not wait for its server";
  auto t0 = clock_type::now();
  EXPECT_TRUE(rt->cancel_call("parked-1"));
  ASSERT_TRUE(c.wait_answer(5s)) << "a cancelled parked call did not fail at once";
  EXPECT_LT(clock_type::now() - t0, 2s);
  ASSERT_FALSE(*c.answer);
  EXPECT_TRUE(is(c.answer->error(), errc::cancelled)) << sys->render(c.answer->error());
  EXPECT_EQ(c.steps_at_answer, 0u);
}

TEST_F(CallProgress, ACallIdIsCheckedAndUniqueAmongCallsInFlight) {
  start({{"srv", server()}});
  wait_connected("srv");
  tracked_call slow, twin, bad;
  rt->call_tool_async(session, "srv", "sleep", {{"ms", 30000}}, slow.callback(), slow.options("same"));
  rt->call_tool_async(session, "srv", "echo", {{"text", "x"}}, twin.callback(), twin.options("same"));
  ASSERT_TRUE(twin.wait_answer(10s));
  ASSERT_FALSE(*twin.answer);
  EXPECT_TRUE(is(twin.answer->error(), errc::bad_request)) << sys->render(twin.answer->error());
  rt->call_tool_async(session, "srv", "echo", {{"text", "x"}}, bad.callback(), bad.options("no spaces/here"));
  ASSERT_TRUE(bad.wait_answer(10s));
  ASSERT_FALSE(*bad.answer);
  EXPECT_TRUE(is(bad.answer->error(), errc::bad_request));
  // The runtime names a call that has no id of its caller's.
  tracked_call own;
  auto id = rt->call_tool_async(session, "srv", "echo", {{"text", "x"}}, own.callback());
  EXPECT_FALSE(id.empty());
  EXPECT_TRUE(is_valid_call_id(id)) << id;
  ASSERT_TRUE(own.wait_answer(10s));
  EXPECT_TRUE(rt->cancel_call("same"));
  ASSERT_TRUE(slow.wait_answer(10s));
  EXPECT_TRUE(is(slow.answer->error(), errc::cancelled));
}
