// The cancel route of a tool call (issue 15): its path names the call id,
// it takes POST only, and it does not shadow a server's routes.

#include "core/http_rules.hpp"

#include <gtest/gtest.h>

using namespace mcprt::http;

TEST(HttpCallCancelRoute, NamesTheCallIdAndTakesPostOnly) {
  auto r = resolve_route("POST", "/workspace/mcp/calls/job-42/cancel");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::call_cancel);
  EXPECT_EQ(r.match->server, "job-42");
  r = resolve_route("GET", "/workspace/mcp/calls/job-42/cancel");
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(r.refused->status, 405);
  EXPECT_EQ(r.allow, "POST");
  r = resolve_route("POST", "/workspace/mcp/calls//cancel");
  EXPECT_FALSE(r.match);
  // A server named "calls" keeps its routes.
  r = resolve_route("POST", "/workspace/mcp/calls/resources/read");
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.match->id, route_id::resource_read);
  EXPECT_EQ(r.match->server, "calls");
}
