#include "core/client_features.hpp"

#include <gtest/gtest.h>

using namespace mcprt;

TEST(ClientFeatures, PolicyNamesRoundTrip) {
  for (auto p : {elicitation_policy::decline, elicitation_policy::accept_defaults, elicitation_policy::ask})
    EXPECT_EQ(parse_elicitation_policy(to_string(p)), p);
  EXPECT_EQ(parse_elicitation_policy("Decline"), std::nullopt);
  EXPECT_EQ(parse_elicitation_policy(""), std::nullopt);
}

TEST(ClientFeatures, FileUriEscapesWhatAUriParserWouldMisread) {
  EXPECT_EQ(file_uri("/home/me/project"), "file:///home/me/project");
  EXPECT_EQ(file_uri("/a b/c#d?e%f"), "file:///a%20b/c%23d%3Fe%25f");
  EXPECT_EQ(file_uri("/caf\xC3\xA9"), "file:///caf%C3%A9");
}

TEST(ClientFeatures, RootForAFolderIsNamedByItsLastComponent) {
  EXPECT_EQ(root_for_folder("/work/my project"), (mcp_root{"file:///work/my%20project", "my project"}));
  EXPECT_EQ(root_for_folder("/work/x/"), (mcp_root{"file:///work/x", "x"}));
  EXPECT_EQ(root_for_folder("/"), (mcp_root{"file:///", "/"}));
}
