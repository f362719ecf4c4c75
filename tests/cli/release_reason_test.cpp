// Releases that the settings caused, through the real daemon: a server the
// settings exclude stops at once and gives its budget slot back (no 30 s
// drain), and a server refused for budget connects by itself once a slot
// frees, without a reload.

#include <gtest/gtest.h>

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

class release_reason_test : public graceful_daemon_test {
protected:
  json budget_cell() const {
    auto s = snapshot();
    return s["budgets"].size() == 1 ? s["budgets"][0] : json::object();
  }
};

TEST_F(release_reason_test, excluding_a_server_stops_its_process_and_frees_its_slot_at_once) {
  write_file(user_settings(), json{{"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}.dump(2));
  // The default drain delay (30 s) is what an unchanged pool would wait.
  start({"--budget", "1", "--budget-mode", "enforce"});
  ASSERT_TRUE(connected("echo")) << snapshot().dump(2);
  auto pid = server("echo")["pid"].get<pid_t>();
  ASSERT_EQ(budget_cell()["reserved_count"], 1) << snapshot().dump(2);

  auto excluded_at = clock_type::now();
  write_file(user_settings(),
             json{{"mcp", {{"excluded", {"echo"}}}}, {"mcpServers", {{"echo", test_server_config({"--tools", "1"})}}}}
               .dump(2));
  // Far below the drain delay: the process goes when the settings say so.
  EXPECT_TRUE(gone_within(pid, 10s)) << "echo (pid " << pid << ") still runs";
  EXPECT_TRUE(wait_until([&] { return budget_cell()["reserved_count"] == 0; }, 10s)) << snapshot().dump(2);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - excluded_at);
  std::cout << "[ figures  ] excluded -> process gone and slot free: " << took.count() << " ms (debounce 50 ms)\n";
  EXPECT_TRUE(snapshot()["pool"]["entries"].empty()) << snapshot().dump(2);
  EXPECT_EQ(server("echo").value("reason", ""), "excluded") << snapshot().dump(2);
}

TEST_F(release_reason_test, a_server_refused_for_budget_connects_by_itself_once_a_slot_frees) {
  auto both = json{{"mcpServers",
                    {{"alpha", test_server_config({"--name-prefix", "alpha_"})},
                     {"beta", test_server_config({"--name-prefix", "beta_"})}}}};
  write_file(user_settings(), both.dump(2));
  start({"--budget", "1", "--budget-mode", "enforce"});
  std::string live, refused;
  ASSERT_TRUE(wait_until([&] {
    auto a = server("alpha").value("status", ""), b = server("beta").value("status", "");
    if (a == "connected" && b != "connected" && !budget_cell()["refused"].empty()) live = "alpha", refused = "beta";
    if (b == "connected" && a != "connected" && !budget_cell()["refused"].empty()) live = "beta", refused = "alpha";
    return !live.empty();
  })) << snapshot().dump(2);
  EXPECT_EQ(budget_cell()["refused"], json::array({refused})) << snapshot().dump(2);
  auto pid = server(live)["pid"].get<pid_t>();

  // The live one leaves the settings: its slot frees, and the refused one
  // takes it without a reload.
  both["mcpServers"].erase(live);
  write_file(user_settings(), both.dump(2));
  EXPECT_TRUE(connected(refused, 15s)) << snapshot().dump(2);
  EXPECT_TRUE(gone_within(pid, 10s));
  EXPECT_EQ(budget_cell()["reserved"], json::array({refused})) << snapshot().dump(2);
  EXPECT_TRUE(budget_cell()["refused"].empty()) << snapshot().dump(2);
}

} // namespace
} // namespace mcprt_cli_test
