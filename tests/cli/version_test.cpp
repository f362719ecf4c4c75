// `mcprt --version` prints the version of project() in CMakeLists.txt (the
// one place it is set; MCPRT_PROJECT_VERSION comes from there too).

#include <string>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using version_test = cli_test;

TEST_F(version_test, version_flag_prints_the_project_version) {
  auto r = mcprt({"--version"});
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, std::string("mcprt ") + MCPRT_PROJECT_VERSION + "\n") << describe(r);
}

} // namespace
} // namespace mcprt_cli_test
