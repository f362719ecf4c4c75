// The runtime's event forwarder (client_update → bus event) is supervised:
// killed, it is replaced, every live connection re-subscribes to the new
// one (which learns each connection's current status at once), and events
// keep flowing. Real mcprt-test-server processes, waits on events with
// deadlines.

#include <gtest/gtest.h>

#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "mcprt/runtime_access.hpp"
#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class EventForwarding : public test::runtime_fixture {
protected:
  EventForwarding() : runtime_fixture("mcprt-forwarding") {}

  void SetUp() override {
    runtime_fixture::SetUp();
    save(user_settings(), {{"mcpServers", {{"echo", {{"command", MCPRT_TEST_SERVER}, {"args", json::array()}}}}}});
    auto o = options();
    o.watch = false;
    start(o);
  }

  static std::function<bool(const event&)> echo_is(const std::string& status) {
    return [status](const event& e) {
      return e.kind == event_kind::client_update && e.data.value.value("server", "") == "echo" &&
             e.data.value.value("status", "") == status;
    };
  }

  /// Kills the forwarder in force and waits until it is gone.
  void kill_forwarder() {
    auto old = runtime_access::event_forwarder(*rt);
    ASSERT_TRUE(old);
    caf::scoped_actor self{*sys};
    self->monitor(old);
    caf::anon_send_exit(old, caf::exit_reason::kill);
    bool down = false;
    self->receive([&](caf::down_msg&) { down = true; }, caf::after(30s) >> [] {});
    ASSERT_TRUE(down) << "the forwarder did not die";
  }
};

} // namespace

TEST_F(EventForwarding, AKilledForwarderIsReplacedAndEventsKeepFlowing) {
  ASSERT_TRUE(wait_event(echo_is("connected"), 0));
  auto old = runtime_access::event_forwarder(*rt);
  auto from = mark();
  kill_forwarder();
  // The live connection re-subscribes to the successor, which reports its
  // current status at once: no change is needed for the event to come.
  ASSERT_TRUE(wait_event(echo_is("connected"), from)) << "no event after the forwarder died";
  EXPECT_NE(runtime_access::event_forwarder(*rt), old);

  // Changes after the replacement flow as before: a restart of the server
  // goes through connecting to connected on a new connection.
  from = mark();
  auto restarted = rt->restart("echo");
  ASSERT_TRUE(restarted) << sys->render(restarted.error());
  ASSERT_TRUE(wait_event(echo_is("connecting"), from));
  ASSERT_TRUE(wait_event(echo_is("connected"), from));
}

TEST_F(EventForwarding, ItIsReplacedEveryTimeItDies) {
  ASSERT_TRUE(wait_event(echo_is("connected"), 0));
  for (int i = 0; i < 3; ++i) {
    auto from = mark();
    kill_forwarder();
    ASSERT_TRUE(wait_event(echo_is("connected"), from)) << "round " << i;
  }
  auto from = mark();
  ASSERT_TRUE(rt->restart("echo"));
  EXPECT_TRUE(wait_event(echo_is("connected"), from));
}

TEST_F(EventForwarding, ShutdownStopsTheForwarderWithItsSupervisor) {
  auto forwarder = runtime_access::event_forwarder(*rt);
  caf::scoped_actor self{*sys};
  self->monitor(forwarder);
  rt->shutdown();
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; }, caf::after(30s) >> [] {});
  EXPECT_TRUE(down);
}
