#pragma once

// The fixture every runtime test starts from: a temporary home and
// workspace, a real actor system, an event log fed by a subscriber, and
// waits on the snapshot that re-check after every event (never a sleep).
// A test class derives, sets what differs (`dir_prefix`, `options()`), and
// calls start().

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "../actors/process_support.hpp"
#include "event_log.hpp"
#include "mcprt/runtime.hpp"

namespace mcprt::test {

/// Whether `e` is mcprt's error `x`.
inline bool is(const caf::error& e, errc x) {
  return e.category() == caf::atom("mcprt") && e.code() == static_cast<uint8_t>(x);
}

/// The spec of a server that runs the test server with `args`.
inline nlohmann::json server(std::vector<std::string> args = {}) {
  return {{"command", MCPRT_TEST_SERVER}, {"args", args}};
}

class runtime_fixture : public ::testing::Test {
protected:
  using json = nlohmann::json;
  using path = std::filesystem::path;

  explicit runtime_fixture(std::string dir_prefix = "mcprt-runtime") : dir_prefix_(std::move(dir_prefix)) {}

  test::process_test_config cfg;
  std::unique_ptr<caf::actor_system> sys = std::make_unique<caf::actor_system>(cfg);
  path dir, home, ws;
  std::shared_ptr<test::event_log> log = std::make_shared<test::event_log>();
  event_subscriber_actor sink;
  std::unique_ptr<runtime> rt;
  std::string session;
  /// Off for tests that start processes of their own (a peer server).
  bool expect_no_children = true;

  void SetUp() override {
    namespace fs = std::filesystem;
    dir = fs::temp_directory_path() / (dir_prefix_ + "-" + std::to_string(::getpid()) + "-"
                                       + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    home = dir / "home";
    ws = dir / "ws";
    fs::create_directories(home);
    fs::create_directories(ws);
    sink = sys->spawn(test::collector, log);
  }

  void TearDown() override {
    if (rt) {
      rt->shutdown();
      rt.reset();
    }
    before_system_ends();
    if (expect_no_children) {
      EXPECT_TRUE(test::child_pids().empty()) << "a server process outlived the runtime";
    }
    if (sink) caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
    sys.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }

  /// What must go before the actor system (a host's parked responders).
  virtual void before_system_ends() {}

  virtual runtime_options options() {
    runtime_options o;
    o.workspace = ws;
    o.home = home;
    o.debounce = std::chrono::milliseconds(50);
    o.drain_delay = std::chrono::milliseconds(1000);
    return o;
  }

  void start(runtime_options o) {
    auto r = runtime::start(*sys, std::move(o));
    ASSERT_TRUE(r) << sys->render(r.error());
    rt = std::move(*r);
    ASSERT_TRUE(rt->subscribe(sink));
    session = rt->open_session();
  }

  void start() { start(options()); }

  /// Saves like an editor: write a temp file next to it, rename it over.
  static void save(const path& p, const json& content) {
    std::filesystem::create_directories(p.parent_path());
    auto tmp = p.parent_path() / (p.filename().string() + ".tmp~");
    {
      std::ofstream out(tmp);
      out << content.dump(2);
    }
    std::filesystem::rename(tmp, p);
  }

  path user_settings() const { return home / ".mcprt" / "settings.json"; }
  path project_file() const { return ws / ".mcp.json"; }

  std::optional<event> wait_event(const std::function<bool(const event&)>& pred, std::size_t from = 0,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return log->wait(pred, from, timeout);
  }

  std::size_t mark() { return log->mark(); }

  /// Waits until the snapshot satisfies `pred`: re-checked after every event.
  json wait_snapshot(const std::function<bool(const json&)>& pred,
                     std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto from = mark();
      auto snap = rt->snapshot();
      if (pred(snap)) return snap;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ADD_FAILURE() << "snapshot never matched; last: " << snap.dump(2);
        return snap;
      }
      wait_event([](const event&) { return true; }, from, left);
    }
  }

  static const json* find_server(const json& snap, const std::string& name) {
    for (auto& s : snap["servers"])
      if (s["name"] == name) return &s;
    return nullptr;
  }

  /// Every one of `names` connected, with a process.
  static std::function<bool(const json&)> connected(std::vector<std::string> names) {
    return [names](const json& snap) {
      for (auto& n : names) {
        auto s = find_server(snap, n);
        if (!s || (*s)["status"] != "connected" || (*s)["pid"].is_null()) return false;
      }
      return true;
    };
  }

  /// `name` connected (any transport: a remote server has no pid).
  void wait_connected(const std::string& name, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    wait_snapshot(
      [&](const json& snap) {
        auto s = find_server(snap, name);
        return s && (*s)["status"] == "connected";
      },
      timeout);
  }

  static int pid_of(const json& snap, const std::string& name) {
    auto s = find_server(snap, name);
    return s && (*s)["pid"].is_number() ? (*s)["pid"].get<int>() : -1;
  }

private:
  std::string dir_prefix_;
};

} // namespace mcprt::test
