// Resources, prompts and completion through the embeddable runtime, against
// the reference server-everything (static and templated resources, prompts
// with arguments, completable arguments, subscriptions) and our own test
// server (which advertises none of it). Waits are on events with deadlines.

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "runtime_fixture.hpp"

using namespace mcprt;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::optional<fs::path> everything_bin() {
  auto p = fs::path(MCPRT_SOURCE_DIR) / "tests" / "peers" / "node_modules" / ".bin" / "mcp-server-everything";
  if (!fs::exists(p)) return std::nullopt;
  return p;
}

using test::is;

class RuntimeResources : public test::runtime_fixture {
protected:
  RuntimeResources() : runtime_fixture("mcprt-resources") {}

  void start(const json& user_servers, const json& project_servers = nullptr) {
    save(user_settings(), {{"mcpServers", user_servers}});
    if (!project_servers.is_null()) save(project_file(), {{"mcpServers", project_servers}});
    auto o = options();
    o.watch = false;
    runtime_fixture::start(o);
  }

  std::string render(const caf::error& e) { return sys->render(e); }
};

} // namespace

TEST_F(RuntimeResources, ServerEverythingListsReadsPromptsCompletesAndReportsUpdates) {
  auto bin = everything_bin();
  if (!bin) GTEST_SKIP() << "npm peers not installed (scripts/setup.sh installs them)";
  start({{"everything", {{"command", "node"}, {"args", {bin->string(), "stdio"}}}}});
  wait_connected("everything");

  auto list = rt->resources(session, "everything");
  ASSERT_TRUE(list) << render(list.error());
  ASSERT_TRUE((*list)["resources"].is_array()) << list->dump();
  std::string static_uri;
  for (auto& r : (*list)["resources"])
    if (r.value("uri", "").rfind("demo://resource/static/document/", 0) == 0) static_uri = r["uri"];
  ASSERT_FALSE(static_uri.empty()) << list->dump();
  EXPECT_FALSE(list->contains("nextCursor"));

  auto templates = rt->resource_templates(session, "everything");
  ASSERT_TRUE(templates) << render(templates.error());
  bool text_template = false;
  for (auto& t : (*templates)["resourceTemplates"])
    text_template |= t.value("uriTemplate", "") == "demo://resource/dynamic/text/{resourceId}";
  EXPECT_TRUE(text_template) << templates->dump();

  auto read = rt->read_resource(session, "everything", "demo://resource/dynamic/text/7");
  ASSERT_TRUE(read) << render(read.error());
  ASSERT_EQ((*read)["contents"].size(), 1u) << read->dump();
  EXPECT_EQ((*read)["contents"][0]["uri"], "demo://resource/dynamic/text/7");
  EXPECT_FALSE((*read)["contents"][0].value("text", "").empty()) << read->dump();
  auto doc = rt->read_resource(session, "everything", static_uri);
  ASSERT_TRUE(doc) << render(doc.error());
  EXPECT_EQ((*doc)["contents"][0]["uri"], static_uri);

  auto prompt = rt->get_prompt(session, "everything", "args-prompt", {{"city", "Oslo"}, {"state", "Viken"}});
  ASSERT_TRUE(prompt) << render(prompt.error());
  EXPECT_EQ((*prompt)["messages"][0]["content"]["text"], "What's weather in Oslo, Viken?") << prompt->dump();

  auto done = rt->complete(session, "everything", {{"type", "ref/prompt"}, {"name", "completable-prompt"}},
                           {{"name", "department"}, {"value", "E"}});
  ASSERT_TRUE(done) << render(done.error());
  EXPECT_EQ((*done)["completion"]["values"], json({"Engineering"})) << done->dump();
  // The context narrows the second argument by the first.
  auto names = rt->complete(session, "everything", {{"type", "ref/prompt"}, {"name", "completable-prompt"}},
                            {{"name", "name"}, {"value", ""}}, {{"arguments", {{"department", "Sales"}}}});
  ASSERT_TRUE(names) << render(names.error());
  EXPECT_EQ((*names)["completion"]["values"], json({"David", "Eve", "Frank"})) << names->dump();

  // The server's own error comes back as such, and the session stays up.
  auto missing = rt->get_prompt(session, "everything", "no-such-prompt");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(is(missing.error(), errc::tool_error)) << render(missing.error());
  auto bad = rt->get_prompt(session, "everything", "args-prompt", {{"city", 3}});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(is(bad.error(), errc::bad_request)) << render(bad.error());
  auto unknown = rt->mcp_request(session, "everything", "tools/call", {{"name", "echo"}});
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(is(unknown.error(), errc::bad_request)) << render(unknown.error());

  // Subscribed, the server's updates arrive as typed events. It sends them
  // once at once when its simulated updates are switched on, then every 5 s.
  const std::string watched = "demo://resource/dynamic/text/1";
  auto from = log->mark();
  auto sub = rt->subscribe_resource(session, "everything", watched);
  ASSERT_TRUE(sub) << render(sub.error());
  auto toggled = rt->call_tool(session, "everything", "toggle-subscriber-updates", json::object());
  ASSERT_TRUE(toggled) << render(toggled.error());
  auto updated = log->wait(
    [&](const event& e) { return e.kind == event_kind::resource_updated; }, from, 30s);
  ASSERT_TRUE(updated) << "no resource_updated event";
  EXPECT_EQ(updated->data.value, (json{{"server", "everything"}, {"uri", watched}}));
  EXPECT_EQ(std::get<events::resource_updated>(updated->payload).uri, watched);

  // Unsubscribed, no more: the next periodic round (5 s) is not reported.
  ASSERT_TRUE(rt->unsubscribe_resource(session, "everything", watched));
  auto after = log->mark();
  auto late = log->wait([&](const event& e) { return e.kind == event_kind::resource_updated; }, after, 7s);
  EXPECT_FALSE(late) << late->data.value.dump();
}

TEST_F(RuntimeResources, AServerWithoutTheCapabilityAndAServerThatIsOutAreRefused) {
  json plain = {{"command", MCPRT_TEST_SERVER}, {"args", json::array()}};
  start({{"plain", plain}}, {{"pending", plain}});
  wait_connected("plain");

  auto r = rt->resources(session, "plain");
  ASSERT_FALSE(r);
  EXPECT_TRUE(is(r.error(), errc::not_advertised)) << render(r.error());
  EXPECT_NE(render(r.error()).find("resources"), std::string::npos) << render(r.error());
  auto p = rt->get_prompt(session, "plain", "x");
  ASSERT_FALSE(p);
  EXPECT_TRUE(is(p.error(), errc::not_advertised)) << render(p.error());
  auto c = rt->complete(session, "plain", {{"type", "ref/prompt"}, {"name", "x"}}, {{"name", "a"}, {"value", ""}});
  ASSERT_FALSE(c);
  EXPECT_TRUE(is(c.error(), errc::not_advertised)) << render(c.error());

  // A project server waits for approval: the same error as a tool call.
  auto out = rt->read_resource(session, "pending", "file:///x");
  ASSERT_FALSE(out);
  EXPECT_TRUE(is(out.error(), errc::unavailable)) << render(out.error());
  EXPECT_NE(render(out.error()).find("mcprt approve pending"), std::string::npos) << render(out.error());
  auto call = rt->call_tool(session, "pending", "echo", {{"text", "hi"}});
  ASSERT_FALSE(call);
  EXPECT_EQ(render(call.error()), render(out.error()));

  auto nobody = rt->read_resource(session, "nobody", "file:///x");
  ASSERT_FALSE(nobody);
  EXPECT_TRUE(is(nobody.error(), errc::unknown_server)) << render(nobody.error());
}
