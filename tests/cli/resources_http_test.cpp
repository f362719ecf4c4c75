// Black-box: the daemon's resource, prompt and completion routes over real
// HTTP on loopback, with server-everything as a real child (and our test
// server, which advertises none of it).

#include "tests/cli/daemon_test_util.hpp"

namespace mcprt_cli_test {
namespace {

using namespace std::chrono_literals;

class resources_http_test : public graceful_daemon_test {
protected:
  fs::path everything = fs::path(MCPRT_SOURCE_DIR) / "tests/peers/node_modules/.bin/mcp-server-everything";
};

TEST_F(resources_http_test, read_a_resource_get_a_prompt_and_complete_over_http) {
  if (!fs::exists(everything)) GTEST_SKIP() << "npm peers not installed (scripts/setup.sh installs them)";
  write_file(user_settings(),
             json{{"mcpServers",
                   {{"everything", {{"command", "node"}, {"args", {everything.string(), "stdio"}}}},
                    {"plain", test_server_config({"--tools", "1"})}}}}
               .dump(2));
  ASSERT_TRUE(start());
  ASSERT_TRUE(connected("everything", 60s)) << snapshot().dump(2);

  auto r = post("/workspace/mcp/everything/resources/read", R"({"uri": "demo://resource/dynamic/text/3"})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = body_of(r);
  EXPECT_EQ(j["contents"][0]["uri"], "demo://resource/dynamic/text/3") << j.dump();

  r = post("/workspace/mcp/everything/prompts/get", R"({"name": "args-prompt", "arguments": {"city": "Bergen"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_of(r)["messages"][0]["content"]["text"], "What's weather in Bergen?") << r->body;

  r = post("/workspace/mcp/everything/complete",
           R"({"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "S"}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_of(r)["completion"]["values"], json({"Sales", "Support"})) << r->body;

  auto list = get("/workspace/mcp/everything/resources");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_FALSE(body_of(list)["resources"].empty()) << list->body;
  auto templates = get("/workspace/mcp/everything/resource-templates");
  ASSERT_TRUE(templates);
  ASSERT_EQ(templates->status, 200) << templates->body;
  EXPECT_FALSE(body_of(templates)["resourceTemplates"].empty()) << templates->body;

  // Bad parameters are the caller's error; a missing capability says so.
  r = post("/workspace/mcp/everything/resources/read", R"({"uri": 5})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_TRUE(is_json_error(r));
  EXPECT_EQ(body_of(r)["error"], "bad_request") << r->body;
  r = post("/workspace/mcp/everything/resources/read", "[1]");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  ASSERT_TRUE(connected("plain"));
  r = post("/workspace/mcp/plain/prompts/get", R"({"name": "x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 501) << r->body;
  EXPECT_EQ(body_of(r)["error"], "not_advertised") << r->body;
  r = post("/workspace/mcp/nobody/resources/read", R"({"uri": "a://b"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  // The routes keep the API's method rules.
  r = post("/workspace/mcp/everything/resources");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405) << r->body;
}

} // namespace
} // namespace mcprt_cli_test
