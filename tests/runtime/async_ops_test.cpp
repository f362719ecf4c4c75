// The runtime's non-blocking operations against real mcprt-test-server
// processes: each returns at once and answers exactly once through its
// callback, with what the blocking form answers; after shutdown each still
// answers (an error), never hangs.

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
using test::is;
using test::server;

namespace {

/// One answer of type T, and how many came.
template <class T>
struct one_answer {
  std::mutex mtx;
  std::condition_variable cv;
  std::optional<T> value;
  int count = 0;

  std::function<void(T)> callback() {
    return [this](T x) {
      std::lock_guard<std::mutex> guard{mtx};
      value = std::move(x);
      ++count;
      cv.notify_all();
    };
  }

  T wait(std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock{mtx};
    if (!cv.wait_for(lock, timeout, [&] { return count > 0; })) throw std::runtime_error("no answer");
    return *value;
  }
};

/// A snapshot without what changes between two reads of an idle runtime.
json settled(json snap) {
  for (auto& s : snap["servers"])
    s.erase("restarts");
  return snap;
}

class AsyncOps : public test::runtime_fixture {
protected:
  AsyncOps() : runtime_fixture("mcprt-async-ops") {}

  void start_with(const json& servers) {
    save(user_settings(), {{"mcpServers", servers}});
    auto o = options();
    o.watch = false;
    runtime_fixture::start(o);
    wait_connected("echo", 30s);
  }
};

} // namespace

TEST_F(AsyncOps, TheSnapshotAnswersWhatTheBlockingOneDoes) {
  start_with({{"echo", server()}, {"gated", {{"command", "/bin/false"}, {"trust", false}}}});
  // Two reads agree only while nothing moves: echo connects before gated's
  // first start has failed, and a pool entry that is still spawning in one
  // read may be gone in the next.
  auto blocking = wait_snapshot([](const json& snap) {
    if (snap["reconcile"].value("in_progress", true)) return false;
    for (auto& e : snap["pool"]["entries"])
      if (e.value("status", "") == "spawning") return false;
    return true;
  });
  one_answer<json> a;
  rt->snapshot_async(a.callback());
  auto async = a.wait();
  EXPECT_EQ(settled(async), settled(blocking));
  ASSERT_EQ(async["servers"].size(), 2u) << async.dump(2);
  EXPECT_EQ(async["servers"][0]["name"], "echo");
  EXPECT_EQ(async["servers"][0]["status"], "connected");
  EXPECT_TRUE(async["pool"].is_object());
  // Shown ids only: the internal connection id never leaves.
  EXPECT_EQ(async["servers"][0]["fingerprint"].get<std::string>().rfind("echo::", 0), 0u);
  EXPECT_EQ(async["pool"]["entries"][0]["id"], async["servers"][0]["fingerprint"]);
  EXPECT_EQ(a.count, 1);
}

TEST_F(AsyncOps, ReloadApproveRejectAndRestartAnswerThroughTheirCallbacks) {
  start_with({{"echo", server()}});
  one_answer<caf::expected<bool>> reload;
  rt->reload_async(reload.callback());
  auto r = reload.wait();
  ASSERT_TRUE(r) << sys->render(r.error());
  EXPECT_TRUE(*r);

  // echo is a user-scope server: it needs no approval, and approving it
  // fails as the blocking form does.
  one_answer<caf::expected<bool>> approve;
  rt->approve_async("echo", approve.callback());
  auto blocking = rt->approve("echo");
  auto ap = approve.wait();
  ASSERT_FALSE(ap);
  ASSERT_FALSE(blocking);
  EXPECT_EQ(ap.error(), blocking.error());

  one_answer<caf::expected<bool>> reject;
  rt->reject_async("nope", reject.callback());
  auto rj = reject.wait();
  ASSERT_FALSE(rj);
  EXPECT_TRUE(is(rj.error(), errc::unknown_server)) << sys->render(rj.error());

  auto before = rt->snapshot()["servers"][0]["pid"];
  one_answer<caf::expected<std::vector<restart_result>>> restart;
  rt->restart_async("echo", restart.callback());
  auto rs = restart.wait(30s);
  ASSERT_TRUE(rs) << sys->render(rs.error());
  ASSERT_EQ(rs->size(), 1u);
  EXPECT_TRUE((*rs)[0].restarted) << (*rs)[0].reason;
  EXPECT_EQ((*rs)[0].id.rfind("echo::", 0), 0u) << "a restart result shows the keyed id";
  wait_snapshot([&](const json& s) { return s["servers"][0]["status"] == "connected" && s["servers"][0]["pid"] != before; });
}

TEST_F(AsyncOps, ReplayAnswersTheEventsAfterAnId) {
  start_with({{"echo", server()}});
  auto all = rt->replay(0);
  ASSERT_GE(all.size(), 2u);
  one_answer<std::vector<event>> a;
  rt->replay_async(all.front().seq, a.callback());
  auto after = a.wait();
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front().seq, all[1].seq);
}

TEST_F(AsyncOps, AfterShutdownEveryOperationStillAnswersOnce) {
  start_with({{"echo", server()}});
  rt->shutdown();
  one_answer<json> snap;
  one_answer<caf::expected<bool>> reload;
  one_answer<caf::expected<std::vector<restart_result>>> restart;
  rt->snapshot_async(snap.callback());
  rt->reload_async(reload.callback());
  rt->restart_async("echo", restart.callback());
  EXPECT_TRUE(snap.wait().contains("error"));
  EXPECT_FALSE(reload.wait());
  EXPECT_FALSE(restart.wait());
  EXPECT_EQ(snap.count + reload.count + restart.count, 3);
}

TEST_F(AsyncOps, ASessionOpensAndClosesWithoutBlocking) {
  start_with({{"echo", server()}});
  one_answer<std::string> opened;
  rt->open_session_async({}, opened.callback());
  auto id = opened.wait();
  ASSERT_FALSE(id.empty());
  EXPECT_NE(id, session);
  auto r = rt->call_tool(id, "echo", "echo", {{"text", "hi"}}, 20s);
  ASSERT_TRUE(r) << sys->render(r.error());
  // Both sessions hold the one pool entry; closing the new one lets go of
  // its reference before `done` runs.
  wait_snapshot([](const json& s) { return s["pool"]["entries"].size() == 1 && s["pool"]["entries"][0]["refs"] == 2; });
  std::mutex mtx;
  std::condition_variable cv;
  bool closed = false;
  rt->close_session_async(id, [&] {
    std::lock_guard<std::mutex> guard{mtx};
    closed = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock{mtx};
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return closed; }));
  }
  EXPECT_EQ(rt->snapshot()["pool"]["entries"][0]["refs"], 1);
  auto gone = rt->call_tool(id, "echo", "echo", {{"text", "hi"}}, 5s);
  ASSERT_FALSE(gone);
  EXPECT_TRUE(is(gone.error(), errc::unknown_session)) << sys->render(gone.error());
  // Closing it again, or a session never opened, still answers.
  one_answer<bool> again;
  rt->close_session_async(id, [&again] { again.callback()(true); });
  EXPECT_TRUE(again.wait());
}
