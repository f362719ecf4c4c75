// Another loop run on the reactor's thread (io::guest_loop): when it runs,
// on which thread, and how it is let go, with a real reactor and an eventfd
// as the guest's descriptor. And what the reactor thread writes during a
// turn (held until the turn's work is done) with a real `cat`.

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "io/reactor.hpp"

using namespace std::chrono_literals;
using mcprt::io::guest_loop;
using mcprt::io::reactor;

namespace {

/// Counts its runs; `script` says what each run answers.
class counting_guest final : public guest_loop {
public:
  counting_guest() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~counting_guest() override { ::close(fd_); }

  int fd() const override { return fd_; }

  std::optional<time_point> run_ready(bool readable) noexcept override {
    std::uint64_t v;
    bool had = ::read(fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v);
    std::lock_guard<std::mutex> guard{mtx};
    runs.push_back({std::this_thread::get_id(), readable, had});
    cv.notify_all();
    if (finish_after && runs.size() >= finish_after) return std::nullopt;
    if (again_soon) {
      again_soon = false;
      wish = true;
    }
    return std::chrono::steady_clock::now() + next_in;
  }

  bool wants_turn() const noexcept override {
    std::lock_guard<std::mutex> guard{mtx};
    return std::exchange(wish, false);
  }

  void released(bool orphaned) noexcept override {
    std::lock_guard<std::mutex> guard{mtx};
    releases.push_back(orphaned);
    cv.notify_all();
  }

  void poke() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
  }

  template <class Pred>
  bool wait(Pred p) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, 10s, [&] { return p(); });
  }

  struct run {
    std::thread::id thread;
    bool readable;
    bool had_data;
  };
  mutable std::mutex mtx;
  std::condition_variable cv;
  std::vector<run> runs;
  std::vector<bool> releases;
  std::size_t finish_after = 0;
  std::chrono::milliseconds next_in{60000};
  bool again_soon = false;
  mutable bool wish = false;

private:
  int fd_;
};

TEST(ReactorGuest, RunsOnTheReactorThreadWhenItsDescriptorIsReadable) {
  reactor r;
  auto g = std::make_shared<counting_guest>();
  r.host(g);
  // A first run comes unasked (the guest may have work already).
  ASSERT_TRUE(g->wait([&] { return g->runs.size() >= 1; }));
  g->poke();
  ASSERT_TRUE(g->wait([&] { return g->runs.size() >= 2; }));
  std::lock_guard<std::mutex> guard{g->mtx};
  EXPECT_NE(g->runs[1].thread, std::this_thread::get_id());
  EXPECT_EQ(g->runs[1].thread, g->runs[0].thread);
  EXPECT_TRUE(g->runs[1].readable);
  EXPECT_TRUE(g->runs[1].had_data);
}

TEST(ReactorGuest, RunsAgainAtItsDeadlineWithoutData) {
  reactor r;
  auto g = std::make_shared<counting_guest>();
  g->next_in = 20ms;
  r.host(g);
  ASSERT_TRUE(g->wait([&] { return g->runs.size() >= 3; }));
  std::lock_guard<std::mutex> guard{g->mtx};
  EXPECT_FALSE(g->runs[2].readable);
  EXPECT_FALSE(g->runs[2].had_data);
}

TEST(ReactorGuest, AGuestThatWantsATurnGetsOneAtOnce) {
  reactor r;
  auto g = std::make_shared<counting_guest>();
  g->again_soon = true; // its first run asks for another; the deadline is a minute away
  r.host(g);
  ASSERT_TRUE(g->wait([&] { return g->runs.size() >= 2; }));
  std::lock_guard<std::mutex> guard{g->mtx};
  EXPECT_FALSE(g->runs[1].readable);
}

TEST(ReactorGuest, AGuestThatIsDoneIsReleasedOnceAndNotRunAgain) {
  reactor r;
  auto g = std::make_shared<counting_guest>();
  g->finish_after = 2;
  r.host(g);
  ASSERT_TRUE(g->wait([&] { return !g->runs.empty(); }));
  g->poke();
  ASSERT_TRUE(g->wait([&] { return !g->releases.empty(); }));
  // Data after the release reaches nobody: another guest's first run
  // comes in a turn after it.
  g->poke();
  auto other = std::make_shared<counting_guest>();
  r.host(other);
  ASSERT_TRUE(other->wait([&] { return !other->runs.empty(); }));
  std::lock_guard<std::mutex> guard{g->mtx};
  EXPECT_EQ(g->runs.size(), 2u);
  ASSERT_EQ(g->releases.size(), 1u);
  EXPECT_FALSE(g->releases[0]);
}

TEST(ReactorGuest, AStoppingReactorReleasesItsGuestsAsOrphans) {
  auto g = std::make_shared<counting_guest>();
  {
    reactor r;
    r.host(g);
    ASSERT_TRUE(g->wait([&] { return !g->runs.empty(); }));
  }
  std::lock_guard<std::mutex> guard{g->mtx};
  ASSERT_EQ(g->releases.size(), 1u);
  EXPECT_TRUE(g->releases[0]);
}

// Writes made on the reactor thread in one turn (a callback's, here; an
// actor's run there, in the runtime) are held and sent together before the
// thread waits again: in order, and before what is written after them.
TEST(ReactorTurnWrites, WritesFromTheReactorThreadGoOutInOrderBeforeItWaits) {
  reactor r;
  std::mutex mtx;
  std::condition_variable cv;
  std::string out;
  std::atomic<reactor::process_id> id{0};
  bool answered = false;
  mcprt::io::process_events ev;
  ev.on_stdout = [&](std::string_view bytes) {
    std::lock_guard<std::mutex> guard{mtx};
    out.append(bytes);
    if (!answered && out.find('\n') != std::string::npos) {
      answered = true;
      r.write(id, "b\n");
      r.write(id, "c\n");
      r.write(id, "d\n");
    }
    cv.notify_all();
  };
  auto s = r.spawn({"cat", {}, {}, {}}, std::move(ev));
  id = s.id;
  r.write(s.id, "a\n");
  auto has = [&](const std::string& want) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, 10s, [&] { return out.size() >= want.size(); }) && out == want;
  };
  EXPECT_TRUE(has("a\nb\nc\nd\n")) << out;
  r.write(s.id, "e\n");
  EXPECT_TRUE(has("a\nb\nc\nd\ne\n")) << out;
  r.kill(s.id);
}

} // namespace
