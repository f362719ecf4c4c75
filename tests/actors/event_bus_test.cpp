// The event bus on CAF's test coordinator: deterministic, no threads, no
// real time.

#include <chrono>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "actors/event_bus.hpp"
#include "actor_test_support.hpp"

using namespace mcprt;
using namespace mcprt::testing;
using nlohmann::json;

namespace {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

/// A subscriber that forwards each event to `target` tagged with its name
/// (typed actors cannot send() to an untyped handle, hence anon_send).
event_subscriber_actor::behavior_type forwarder(event_subscriber_actor::pointer, caf::actor target,
                                                std::string tag) {
  return {
    [=](event& ev) { caf::anon_send(target, tag, std::move(ev)); },
  };
}

std::vector<uint64_t> seqs(const std::vector<event>& evs) {
  std::vector<uint64_t> out;
  for (auto& e : evs)
    out.push_back(e.seq);
  return out;
}

/// A client_update naming `server`: a payload whose rendering tells events
/// apart.
event_payload update_of(const std::string& server, const std::string& connection_id = {}) {
  events::client_update u;
  u.server = server;
  u.connection_id = connection_id;
  return u;
}

std::vector<event_kind> kinds(const std::vector<event>& evs) {
  std::vector<event_kind> out;
  for (auto& e : evs)
    out.push_back(e.kind);
  return out;
}

class EventBus : public actor_test {
protected:
  event_bus_actor bus;

  void SetUp() override { bus = track(spawn_event_bus(sys, 4)); }

  void publish(event_payload payload) { self->send(bus, atom::publish_v, std::move(payload)); }

  /// The kind's empty payload: for tests about delivery, not content.
  void publish(event_kind k) { publish(empty_payload(k)); }

  std::optional<uint64_t> subscribe(event_subscriber_actor sink, std::vector<event_kind> ks = {}) {
    return ask<uint64_t>(bus, atom::subscribe_v, std::move(sink), std::move(ks));
  }

  event_subscriber_actor spawn_forwarder(const std::string& tag) {
    return track(sys.spawn(forwarder, caf::actor_cast<caf::actor>(self), tag));
  }

  /// Tagged events forwarded to the scoped actor, in arrival order.
  std::vector<std::pair<std::string, event>> drain_tagged() {
    std::vector<std::pair<std::string, event>> out;
    for (bool more = true; more;)
      self->receive([&](std::string& tag, event& ev) { out.emplace_back(tag, std::move(ev)); },
                    caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return out;
  }
};

} // namespace

TEST_F(EventBus, StampsMonotonicSeqFromOneAndWallClockTimestamps) {
  ASSERT_EQ(subscribe(self_sink()), 0u);
  auto before = now_ms();
  for (int i = 0; i < 5; ++i)
    publish(update_of("s" + std::to_string(i)));
  sched.run();
  auto after = now_ms();
  auto evs = drain<event>();
  ASSERT_EQ(seqs(evs), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  for (std::size_t i = 0; i < evs.size(); ++i) {
    EXPECT_EQ(evs[i].kind, event_kind::client_update);
    EXPECT_EQ(evs[i].data.value["server"], "s" + std::to_string(i));
    ASSERT_TRUE(std::holds_alternative<events::client_update>(evs[i].payload));
    EXPECT_EQ(std::get<events::client_update>(evs[i].payload).server, "s" + std::to_string(i));
    EXPECT_GE(evs[i].timestamp_ms, before);
    EXPECT_LE(evs[i].timestamp_ms, after);
    if (i > 0) {
      EXPECT_GE(evs[i].timestamp_ms, evs[i - 1].timestamp_ms);
    }
  }
}

TEST_F(EventBus, SubscribeAnswersTheLastPublishedSeq) {
  publish(event_kind::settings_changed);
  publish(event_kind::settings_changed);
  publish(event_kind::settings_error);
  EXPECT_EQ(subscribe(self_sink()), 3u);
  sched.run();
  // Subscribing later delivers nothing old (replay is separate).
  EXPECT_TRUE(drain<event>().empty());
  publish(event_kind::reconcile_started);
  sched.run();
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{4}));
}

TEST_F(EventBus, DeliversOnlyTheKindsInTheFilter) {
  ASSERT_TRUE(subscribe(self_sink(), {event_kind::budget_warning, event_kind::child_refused_batch}));
  publish(event_kind::client_update);
  publish(event_kind::budget_warning);
  publish(event_kind::settings_changed);
  publish(event_kind::child_refused_batch);
  sched.run();
  auto evs = drain<event>();
  EXPECT_EQ(kinds(evs),
            (std::vector<event_kind>{event_kind::budget_warning, event_kind::child_refused_batch}));
  EXPECT_EQ(seqs(evs), (std::vector<uint64_t>{2, 4}));
}

TEST_F(EventBus, SubscribingAgainReplacesTheFilterWithoutDuplicates) {
  ASSERT_TRUE(subscribe(self_sink(), {event_kind::budget_warning}));
  publish(event_kind::client_update);
  sched.run();
  EXPECT_TRUE(drain<event>().empty());
  EXPECT_EQ(subscribe(self_sink(), {}), 1u); // now every kind
  publish(event_kind::client_update);
  publish(event_kind::budget_warning);
  sched.run();
  // One subscription: each event arrives once.
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(subscribe(self_sink(), {event_kind::settings_error}), 3u);
  publish(event_kind::client_update);
  publish(event_kind::settings_error);
  sched.run();
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{5}));
}

TEST_F(EventBus, UnsubscribeStopsDeliveryToThatSubscriberOnly) {
  auto other = spawn_forwarder("other");
  ASSERT_TRUE(subscribe(self_sink()));
  ASSERT_TRUE(subscribe(other));
  publish(event_kind::client_update);
  sched.run();
  EXPECT_EQ(drain<event>().size(), 1u);
  EXPECT_EQ(drain_tagged().size(), 1u);
  self->send(bus, atom::unsubscribe_v, self_sink());
  // Unsubscribing an unknown sink is a no-op.
  self->send(bus, atom::unsubscribe_v, spawn_forwarder("never"));
  publish(event_kind::client_update);
  sched.run();
  EXPECT_TRUE(drain<event>().empty());
  auto tagged = drain_tagged();
  ASSERT_EQ(tagged.size(), 1u);
  EXPECT_EQ(tagged[0].first, "other");
  EXPECT_EQ(tagged[0].second.seq, 2u);
  // Subscribing again after unsubscribing works as before.
  EXPECT_EQ(subscribe(self_sink()), 2u);
  publish(event_kind::client_update);
  sched.run();
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(drain_tagged().size(), 1u);
}

TEST_F(EventBus, DeadSubscriberIsDroppedAndOthersKeepReceiving) {
  auto doomed = spawn_forwarder("doomed");
  auto survivor = spawn_forwarder("survivor");
  ASSERT_TRUE(subscribe(doomed));
  ASSERT_TRUE(subscribe(survivor));
  ASSERT_TRUE(subscribe(self_sink()));
  publish(event_kind::client_update);
  sched.run();
  EXPECT_EQ(drain_tagged().size(), 2u);
  EXPECT_EQ(drain<event>().size(), 1u);

  self->send_exit(doomed, caf::exit_reason::kill);
  sched.run(); // the bus gets the down message
  for (int i = 0; i < 3; ++i)
    publish(event_kind::client_update);
  sched.run();
  auto tagged = drain_tagged();
  ASSERT_EQ(tagged.size(), 3u);
  for (auto& [tag, ev] : tagged)
    EXPECT_EQ(tag, "survivor");
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{2, 3, 4}));
  // The bus is alive and well.
  EXPECT_EQ(subscribe(self_sink()), 4u);
}

TEST_F(EventBus, SubscriberDyingBeforeDeliveryDoesNotDisturbOthers) {
  auto doomed = spawn_forwarder("doomed");
  ASSERT_TRUE(subscribe(doomed));
  ASSERT_TRUE(subscribe(self_sink()));
  // Killed and published in one go: the events may reach the dead actor
  // before the bus learns it is gone; they are just dropped.
  self->send_exit(doomed, caf::exit_reason::kill);
  publish(event_kind::client_update);
  publish(event_kind::client_update);
  sched.run();
  EXPECT_TRUE(drain_tagged().empty());
  EXPECT_EQ(seqs(drain<event>()), (std::vector<uint64_t>{1, 2}));
}

TEST_F(EventBus, ReplayAnswersNewerEventsStillInTheRing) {
  // The fixture's bus keeps 4 events.
  for (int i = 1; i <= 6; ++i)
    publish(update_of("s" + std::to_string(i)));
  auto all = ask<std::vector<event>>(bus, atom::replay_v, uint64_t{0});
  ASSERT_TRUE(all);
  EXPECT_EQ(seqs(*all), (std::vector<uint64_t>{3, 4, 5, 6}));
  EXPECT_EQ(all->front().data.value["server"], "s3");
  auto newer = ask<std::vector<event>>(bus, atom::replay_v, uint64_t{4});
  ASSERT_TRUE(newer);
  EXPECT_EQ(seqs(*newer), (std::vector<uint64_t>{5, 6}));
  auto none = ask<std::vector<event>>(bus, atom::replay_v, uint64_t{6});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto future = ask<std::vector<event>>(bus, atom::replay_v, uint64_t{100});
  ASSERT_TRUE(future);
  EXPECT_TRUE(future->empty());
}

TEST_F(EventBus, PublishingWithoutSubscribersFillsTheRing) {
  auto big = track(spawn_event_bus(sys)); // default capacity 1024
  for (int i = 0; i < 1030; ++i)
    self->send(big, atom::publish_v, update_of("s" + std::to_string(i)));
  auto evs = ask<std::vector<event>>(big, atom::replay_v, uint64_t{0});
  ASSERT_TRUE(evs);
  ASSERT_EQ(evs->size(), 1024u);
  EXPECT_EQ(evs->front().seq, 7u);
  EXPECT_EQ(evs->back().seq, 1030u);
  EXPECT_EQ(evs->back().data.value["server"], "s1029");
}

TEST_F(EventBus, ZeroCapacityKeepsNothingButStillDelivers) {
  auto none = track(spawn_event_bus(sys, 0));
  ASSERT_EQ(ask<uint64_t>(none, atom::subscribe_v, self_sink(), std::vector<event_kind>{}), 0u);
  self->send(none, atom::publish_v, update_of("s"));
  sched.run();
  EXPECT_EQ(drain<event>().size(), 1u);
  auto evs = ask<std::vector<event>>(none, atom::replay_v, uint64_t{0});
  ASSERT_TRUE(evs);
  EXPECT_TRUE(evs->empty());
}

// -- payloads from outside ---------------------------------------------------
// Payloads carry text that servers and settings files wrote. Whatever they
// hold, subscribers and the replay ring get payloads that dump as valid
// UTF-8, and the bus itself lives on.

namespace {

bool dumps_valid_utf8(const json& j) {
  try {
    auto text = j.dump();
    // nlohmann only throws on invalid UTF-8 when dumping; a dump that
    // succeeds is valid.
    return !text.empty();
  } catch (const json::exception&) {
    return false;
  }
}

} // namespace

TEST_F(EventBus, PayloadsWithInvalidUtf8AreMadeSafeAndTheBusLivesOn) {
  ASSERT_TRUE(subscribe(self_sink()));
  events::client_update bad;
  bad.server = "echo";
  bad.error = "last stderr: caf\xe9 \xff";
  publish(bad);
  publish(events::settings_error{"/ws/.mcp.json\xfe", "project", 1, 2, "unexpected \xff"});
  events::pool_entry_failed failed{"echo::1", "echo\xc3", "\xff", {"line \xfe", "ok"}};
  publish(failed);
  publish(update_of("after"));
  sched.run();
  auto got = drain<event>();
  ASSERT_EQ(seqs(got), (std::vector<uint64_t>{1, 2, 3, 4}));
  for (auto& e : got)
    EXPECT_TRUE(dumps_valid_utf8(e.data.value)) << e.seq;
  EXPECT_EQ(got[0].data.value["error"], "last stderr: caf\xEF\xBF\xBD \xEF\xBF\xBD");
  // The typed payload is scrubbed too, not only its rendering.
  EXPECT_EQ(std::get<events::client_update>(got[0].payload).error, "last stderr: caf\xEF\xBF\xBD \xEF\xBF\xBD");
  EXPECT_EQ(got[1].data.value["message"], "unexpected \xEF\xBF\xBD");
  EXPECT_EQ(got[2].data.value["stderr"][0], "line \xEF\xBF\xBD");
  EXPECT_EQ(got[3].data.value["server"], "after");
  auto replayed = ask<std::vector<event>>(bus, atom::replay_v, uint64_t{0});
  ASSERT_TRUE(replayed);
  for (auto& e : *replayed)
    EXPECT_TRUE(dumps_valid_utf8(e.data.value)) << e.seq;
}

TEST_F(EventBus, ConnectionIdsAreShownThroughTheRuntimesFunction) {
  event_bus_options opts;
  opts.replay_capacity = 8;
  opts.show_connection_id = [](const std::string& id) { return "shown:" + id; };
  auto keyed = track(spawn_event_bus(sys, opts));
  ASSERT_TRUE(ask<uint64_t>(keyed, atom::subscribe_v, self_sink(), std::vector<event_kind>{}));
  self->send(keyed, atom::publish_v, update_of("echo", "echo::0011223344556677"));
  self->send(keyed, atom::publish_v,
             event_payload{events::pool_entry_failed{"echo::0011223344556677", "echo", "", {}}});
  sched.run();
  auto got = drain<event>();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data.value["connection_id"], "shown:echo::0011223344556677");
  EXPECT_EQ(got[1].data.value["id"], "shown:echo::0011223344556677");
  EXPECT_EQ(std::get<events::client_update>(got[0].payload).connection_id, "shown:echo::0011223344556677");
  auto replayed = ask<std::vector<event>>(keyed, atom::replay_v, uint64_t{0});
  ASSERT_TRUE(replayed && replayed->size() == 2u);
  EXPECT_EQ((*replayed)[0].data.value["connection_id"], "shown:echo::0011223344556677");
}

TEST_F(EventBus, AThrowingIdFunctionCostsThePayloadNotTheBus) {
  event_bus_options opts;
  opts.show_connection_id = [](const std::string&) -> std::string { throw std::runtime_error("boom"); };
  auto keyed = track(spawn_event_bus(sys, opts));
  ASSERT_TRUE(ask<uint64_t>(keyed, atom::subscribe_v, self_sink(), std::vector<event_kind>{}));
  self->send(keyed, atom::publish_v, update_of("a", "a::1"));
  self->send(keyed, atom::publish_v, event_payload{events::reconcile_started{"b", 1, 1}});
  sched.run();
  auto got = drain<event>();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].data.value.contains("error"));
  EXPECT_FALSE(got[0].data.value.contains("connection_id"));
  EXPECT_EQ(got[0].kind, event_kind::client_update);
  EXPECT_TRUE(std::get<events::client_update>(got[0].payload).connection_id.empty());
  EXPECT_EQ(got[1].data.value["session"], "b");
}
