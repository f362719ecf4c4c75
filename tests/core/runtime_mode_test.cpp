#include <gtest/gtest.h>

#include <algorithm>

#include "core/runtime_mode.hpp"

using namespace mcprt;

TEST(RuntimeMode, DefaultsToPoolWithoutBudget) {
  auto r = resolve_runtime_mode(nullptr, nullptr, nullptr);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.mode.pool);
  EXPECT_FALSE(r.mode.budget);
  EXPECT_EQ(r.mode.mode, budget_mode::off);
}

TEST(RuntimeMode, ABudgetAloneMeansWarn) {
  auto r = resolve_runtime_mode(nullptr, "8", nullptr);
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(r.mode.budget, 8u);
  EXPECT_EQ(r.mode.mode, budget_mode::warn);
}

TEST(RuntimeMode, BadBudgetsAreRejectedWithTheirSource) {
  for (auto bad : {"0x10", "1e2", "1.0", "0", "-3", "abc"}) {
    auto r = resolve_runtime_mode(nullptr, bad, nullptr);
    ASSERT_EQ(r.errors.size(), 1u) << bad;
    EXPECT_NE(r.errors[0].find("MCPRT_BUDGET"), std::string::npos) << r.errors[0];
    EXPECT_FALSE(r.mode.budget);
  }
  auto flag = resolve_runtime_mode(nullptr, nullptr, nullptr, std::string("ten"));
  ASSERT_EQ(flag.errors.size(), 1u);
  EXPECT_NE(flag.errors[0].find("--budget"), std::string::npos);
}

TEST(RuntimeMode, EnforceWithoutABudgetIsRefused) {
  auto r = resolve_runtime_mode(nullptr, nullptr, "enforce");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("enforce needs a budget"), std::string::npos);
}

TEST(RuntimeMode, FlagsWinOverEnvironment) {
  auto r = resolve_runtime_mode(nullptr, "3", "warn", std::string("5"), std::string("enforce"));
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(r.mode.budget, 5u);
  EXPECT_EQ(r.mode.mode, budget_mode::enforce);
}

TEST(RuntimeMode, UnknownModeIsAnError) {
  auto r = resolve_runtime_mode(nullptr, "3", "strict");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("strict"), std::string::npos);
}

TEST(RuntimeMode, KillSwitchDropsThePoolCapabilities) {
  auto pooled = resolve_runtime_mode(nullptr, nullptr, nullptr).mode;
  auto caps = capabilities(pooled);
  EXPECT_NE(std::find(caps.begin(), caps.end(), "mcp_workspace_pool"), caps.end());
  EXPECT_NE(std::find(caps.begin(), caps.end(), "mcp_pool_restart"), caps.end());
  auto solo = resolve_runtime_mode("1", nullptr, nullptr).mode;
  EXPECT_FALSE(solo.pool);
  caps = capabilities(solo);
  EXPECT_EQ(std::find(caps.begin(), caps.end(), "mcp_workspace_pool"), caps.end());
  EXPECT_EQ(std::find(caps.begin(), caps.end(), "mcp_pool_restart"), caps.end());
  EXPECT_FALSE(resolve_runtime_mode("0", nullptr, nullptr).mode.pool == false);
  EXPECT_FALSE(resolve_runtime_mode(nullptr, nullptr, nullptr, std::nullopt, std::nullopt, true).mode.pool);
}
