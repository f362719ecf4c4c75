// `runtime::authorize_async` against a real mcprt-test-server with
// --oauth whose registration endpoint never answers: nothing waits on a
// thread for the URL. The call returns before anything can be known, the
// answer comes when the wait for the URL runs out, a second authorization
// of the same server ends the first one's wait at once, and shutdown ends
// what is still running.

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime_fixture.hpp"
#include "tests/support/remote_fronts.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
using test::is;

namespace {

/// The authorization answers that came, in order.
struct authorization_answers {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<caf::expected<std::string>> got;

  std::function<void(caf::expected<std::string>)> callback() {
    return [this](caf::expected<std::string> r) {
      std::lock_guard<std::mutex> guard{mtx};
      got.push_back(std::move(r));
      cv.notify_all();
    };
  }

  std::size_t count() {
    std::lock_guard<std::mutex> guard{mtx};
    return got.size();
  }

  std::optional<caf::expected<std::string>> wait(std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock{mtx};
    if (!cv.wait_for(lock, timeout, [&] { return !got.empty(); })) return std::nullopt;
    return got.front();
  }
};

class Authorize : public test::runtime_fixture {
protected:
  Authorize() : runtime_fixture("mcprt-authorize") {
    // The OAuth server is the test's own process.
    expect_no_children = false;
  }

  void SetUp() override {
    runtime_fixture::SetUp();
    remote = std::make_unique<test::helper_process>(std::vector<std::string>{
      MCPRT_TEST_SERVER, "--http", "0", "--tools", "1", "--oauth", "--oauth-register-hang"});
    auto line = remote->line_with("listening on http://", 30s);
    ASSERT_TRUE(line) << "the OAuth test server did not say where it listens";
    auto url = line->substr(line->find("http://"));
    save(user_settings(), {{"mcpServers", {{"remote", {{"httpUrl", url}}}}}});
    auto o = options();
    o.watch = false;
    start(o);
  }

  void TearDown() override {
    runtime_fixture::TearDown();
    remote.reset();
  }

  std::unique_ptr<test::helper_process> remote;
};

} // namespace

TEST_F(Authorize, TheWaitForTheUrlRunsOutWithoutAThreadWaiting) {
  authorization_answers a;
  authorize_options o;
  o.url_timeout = 300ms;
  rt->authorize_async("remote", o, a.callback());
  // Registration never answers, so nothing could be known yet: had the
  // call waited for the URL, the answer would be here already.
  EXPECT_EQ(a.count(), 0u);
  auto r = a.wait();
  ASSERT_TRUE(r);
  ASSERT_FALSE(*r);
  EXPECT_TRUE(is(r->error(), errc::needs_auth)) << sys->render(r->error());
  EXPECT_NE(sys->render(r->error()).find("no authorization URL within 300 ms"), std::string::npos)
    << sys->render(r->error());
  EXPECT_EQ(a.count(), 1u);
}

TEST_F(Authorize, ASecondAuthorizationEndsTheFirstsWait) {
  authorization_answers first, second;
  authorize_options o;
  o.url_timeout = 60s; // only the second authorization can end the first one's wait
  rt->authorize_async("remote", o, first.callback());
  rt->authorize_async("remote", o, second.callback());
  auto r = first.wait();
  ASSERT_TRUE(r) << "the replaced authorization never answered";
  ASSERT_FALSE(*r);
  EXPECT_TRUE(is(r->error(), errc::needs_auth)) << sys->render(r->error());
  EXPECT_NE(sys->render(r->error()).find("cancelled"), std::string::npos) << sys->render(r->error());
  EXPECT_EQ(second.count(), 0u);
  // Shutdown ends the one still waiting: it authorization_answers, and nothing is left
  // running (TearDown's actor system would wait for a forgotten timer).
  rt->shutdown();
  auto s = second.wait();
  ASSERT_TRUE(s) << "shutdown left an authorization unanswered";
  EXPECT_FALSE(*s);
}

TEST_F(Authorize, ForgettingAnswersThroughItsCallback) {
  std::mutex mtx;
  std::condition_variable cv;
  std::optional<caf::expected<bool>> forgot;
  rt->forget_authorization_async("remote", [&](caf::expected<bool> r) {
    std::lock_guard<std::mutex> guard{mtx};
    forgot = std::move(r);
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock{mtx};
  ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return forgot.has_value(); }));
  ASSERT_TRUE(*forgot) << sys->render(forgot->error());
  EXPECT_FALSE(**forgot) << "nothing was stored";
  lock.unlock();
  std::optional<caf::expected<bool>> unknown;
  rt->forget_authorization_async("nope", [&](caf::expected<bool> r) {
    std::lock_guard<std::mutex> guard{mtx};
    unknown = std::move(r);
    cv.notify_all();
  });
  lock.lock();
  ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return unknown.has_value(); }));
  ASSERT_FALSE(*unknown);
  EXPECT_TRUE(is(unknown->error(), errc::unknown_server)) << sys->render(unknown->error());
}
