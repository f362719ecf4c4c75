#pragma once

// Deterministic actor tests on CAF's test coordinator: no threads, no real
// time. Requests come from a scoped actor; `sched.run()` runs every actor
// until nothing is left to do; replies and events are then already in the
// scoped actor's mailbox, so reading them never blocks.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "messages/workspace.hpp"

namespace mcprt::testing {

struct test_coordinator_config : caf::actor_system_config {
  test_coordinator_config() {
    set("scheduler.policy", caf::atom("testing"));
    add_mcprt_types(*this);
  }
};

/// Whether `e` is mcprt's error `x`.
inline bool is(const caf::error& e, errc x) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(x);
}

class actor_test : public ::testing::Test {
protected:
  test_coordinator_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& sched =
    dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  std::optional<caf::scoped_actor> self_holder{std::in_place, sys};
  caf::scoped_actor& self = *self_holder;
  /// Actors to stop at the end of the test.
  std::vector<caf::actor> started;

  template <class Handle>
  Handle track(Handle h) {
    started.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  void TearDown() override {
    for (auto& a : started)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    started.clear();
    sched.run();
    self_holder.reset();
    sched.run();
  }

  /// Sends a request, runs the system and returns the reply (nullopt, and a
  /// test failure, on an error or when no reply arrived).
  template <class R, class Handle, class... Ts>
  std::optional<R> ask(const Handle& h, Ts&&... xs) {
    auto rh = self->request(h, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    if (!self->has_next_message()) {
      ADD_FAILURE() << "no reply";
      return std::nullopt;
    }
    std::optional<R> result;
    std::move(rh).receive([&](R& x) { result = std::move(x); },
                          [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return result;
  }

  /// Everything of type T already in the scoped actor's mailbox, in order.
  template <class T>
  std::vector<T> drain() {
    std::vector<T> out;
    for (bool more = true; more;)
      self->receive([&](T& x) { out.push_back(std::move(x)); },
                    caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return out;
  }

  /// Whether `watched` ends when `end_it` runs (then the system runs). It
  /// must still be up before. An actor left up is killed, so a regression
  /// fails the test instead of hanging the binary at its end.
  template <class Handle, class EndIt>
  bool ends_with(const Handle& watched, EndIt&& end_it) {
    self->monitor(watched);
    auto down = [&] {
      auto seen = false;
      self->receive([&](caf::down_msg&) { seen = true; }, caf::after(std::chrono::seconds(0)) >> [] {});
      return seen;
    };
    if (down()) {
      ADD_FAILURE() << "the actor had ended already";
      return false;
    }
    end_it();
    sched.run();
    auto ended = down();
    if (!ended) caf::anon_send_exit(watched, caf::exit_reason::kill);
    return ended;
  }

  /// The scoped actor as a bus subscriber.
  event_subscriber_actor self_sink() { return caf::actor_cast<event_subscriber_actor>(self); }
};

} // namespace mcprt::testing
