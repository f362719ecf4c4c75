// --conformance: what the server scenarios of the official MCP conformance
// suite (@modelcontextprotocol/conformance 0.1.16) call, with the names,
// contents and behaviour of the suite's own reference server
// (examples/servers/typescript/everything-server.ts), so that the same
// scenarios can run against mcprt's gateway fronting this server.
#include "server_core.hpp"

namespace mcprt_test_server {

namespace {

using namespace std::chrono_literals;

// A 1x1 red PNG and a minimal WAV, as the reference server sends them.
constexpr const char* k_test_image =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
constexpr const char* k_test_audio = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
constexpr const char* k_watched_content = "Watched resource content";
// The pause between a tool's notifications ("~50ms" in the scenarios), so
// a client sees them arrive during the call, not all at once.
constexpr auto k_step = 50ms;

json text_item(const std::string& text) {
  return {{"type", "text"}, {"text", text}};
}

json text_result(const std::string& text) {
  return {{"content", json::array({text_item(text)})}};
}

json error_result(const std::string& text) {
  return {{"content", json::array({text_item(text)})}, {"isError", true}};
}

json image_item() {
  return {{"type", "image"}, {"data", k_test_image}, {"mimeType", "image/png"}};
}

json no_arguments() {
  return {{"type", "object"}, {"properties", json::object()}};
}

json one_string_argument(const char* name, const char* description) {
  return {{"type", "object"},
          {"properties", {{name, {{"type", "string"}, {"description", description}}}}},
          {"required", json::array({name})}};
}

json tool(const char* name, const char* description, json schema = no_arguments()) {
  return {{"name", name}, {"description", description}, {"inputSchema", std::move(schema)}};
}

json tools() {
  return json::array(
    {tool("test_simple_text", "Tests simple text content response"),
     tool("test_image_content", "Tests image content response"),
     tool("test_audio_content", "Tests audio content response"),
     tool("test_embedded_resource", "Tests embedded resource content response"),
     tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
     tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
     tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
     tool("test_error_handling", "Tests error response handling"),
     tool("test_reconnection",
          "Tests SSE stream disconnection and client reconnection (SEP-1699); here it simply answers"),
     tool("test_sampling", "Tests server-initiated sampling (LLM completion request)",
          one_string_argument("prompt", "The prompt to send to the LLM")),
     tool("test_elicitation", "Tests server-initiated elicitation (user input request)",
          one_string_argument("message", "The message to show the user")),
     tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
     tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
     // 2026-07-28 scenarios (0.2.0-alpha.12), answered the 2025 way: the
     // inputs a tool needs are requests to the client during the call,
     // which a gateway in front turns into InputRequiredResults.
     tool("test_missing_capability", "Asks the client for sampling (a 2026 client that did not declare it: -32021)"),
     tool("test_streaming_elicitation", "Asks the client for input during the call"),
     tool("test_logging_tool", "Logs one message during the call"),
     tool("test_trigger_tool_change", "Adds or removes test_dynamic_tool and sends tools/list_changed"),
     tool("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt and sends prompts/list_changed"),
     tool("test_input_required_result_elicitation", "Asks the user's name (SEP-2322 through a gateway)"),
     tool("test_input_required_result_sampling", "Asks for a completion (SEP-2322 through a gateway)"),
     tool("test_input_required_result_list_roots", "Asks for the client's roots (SEP-2322 through a gateway)"),
     tool("test_input_required_result_request_state", "Asks for a confirmation (SEP-2322 through a gateway)"),
     tool("test_input_required_result_tampered_state", "Asks for a confirmation (SEP-2322 through a gateway)"),
     tool("test_input_required_result_multi_round", "Asks twice, one question a round (SEP-2322 through a gateway)"),
     tool("test_input_required_result_multiple_inputs",
          "Asks for input, a completion and roots at once (SEP-2322 through a gateway)"),
     tool("test_input_required_result_capabilities",
          "Asks only for what the client can answer (SEP-2322 through a gateway)"),
     // SEP-2243: a parameter mirrored into an Mcp-Param-Region header.
     tool("test_header_param", "Echoes its region, which a 2026-07-28 client also sends as Mcp-Param-Region",
          {{"type", "object"},
           {"properties", {{"region", {{"type", "string"}, {"x-mcp-header", "Region"}}}}},
           {"required", json::array({"region"})}}),
     // SEP-1613 and SEP-2106 (0.2.0's scenario, a superset of 0.1.16's):
     // the schema goes out exactly as written.
     tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
          json::parse(R"({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                  "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                           "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                           "phone": {"type": "string"}, "email": {"type": "string"}},
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
          })"))});
}

json elicitation_request(const std::string& message, json properties, json required = json::array()) {
  return {
    {"message", message},
    {"requestedSchema", {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}}}};
}

json sep1034_defaults_request() {
  return elicitation_request(
    "Please review and update the form fields with defaults",
    {{"name", {{"type", "string"}, {"description", "User name"}, {"default", "John Doe"}}},
     {"age", {{"type", "integer"}, {"description", "User age"}, {"default", 30}}},
     {"score", {{"type", "number"}, {"description", "User score"}, {"default", 95.5}}},
     {"status",
      {{"type", "string"},
       {"description", "User status"},
       {"enum", {"active", "inactive", "pending"}},
       {"default", "active"}}},
     {"verified", {{"type", "boolean"}, {"description", "Verification status"}, {"default", true}}}});
}

json titled(const char* value, const char* title) {
  return {{"const", value}, {"title", title}};
}

json sep1330_enums_request() {
  return elicitation_request(
    "Please select options from the enum fields",
    {{"untitledSingle",
      {{"type", "string"}, {"description", "Select one option"}, {"enum", {"option1", "option2", "option3"}}}},
     {"titledSingle",
      {{"type", "string"},
       {"description", "Select one option with titles"},
       {"oneOf", json::array({titled("value1", "First Option"), titled("value2", "Second Option"),
                              titled("value3", "Third Option")})}}},
     {"legacyEnum",
      {{"type", "string"},
       {"description", "Select one option (legacy)"},
       {"enum", {"opt1", "opt2", "opt3"}},
       {"enumNames", {"Option One", "Option Two", "Option Three"}}}},
     {"untitledMulti",
      {{"type", "array"},
       {"description", "Select multiple options"},
       {"minItems", 1},
       {"maxItems", 3},
       {"items", {{"type", "string"}, {"enum", {"option1", "option2", "option3"}}}}}},
     {"titledMulti",
      {{"type", "array"},
       {"description", "Select multiple options with titles"},
       {"minItems", 1},
       {"maxItems", 3},
       {"items",
        {{"anyOf", json::array({titled("value1", "First Choice"), titled("value2", "Second Choice"),
                                titled("value3", "Third Choice")})}}}}}});
}

json resource(const char* name, const char* uri, const char* title, const char* description, const char* mime) {
  return {{"name", name}, {"uri", uri}, {"title", title}, {"description", description}, {"mimeType", mime}};
}

json resources() {
  return json::array({resource("static-text", "test://static-text", "Static Text Resource",
                               "A static text resource for testing", "text/plain"),
                      resource("static-binary", "test://static-binary", "Static Binary Resource",
                               "A static binary resource (image) for testing", "image/png"),
                      resource("watched-resource", "test://watched-resource", "Watched Resource",
                               "A resource clients may subscribe to", "text/plain")});
}

json resource_templates() {
  return json::array({{{"name", "template"},
                       {"uriTemplate", "test://template/{id}/data"},
                       {"title", "Resource Template"},
                       {"description", "A resource template with parameter substitution"},
                       {"mimeType", "application/json"}}});
}

json read_resource(const std::string& uri) {
  auto one = [&](json content) { return json{{"contents", json::array({std::move(content)})}}; };
  if (uri == "test://static-text")
    return one(
      {{"uri", uri}, {"mimeType", "text/plain"}, {"text", "This is the content of the static text resource."}});
  if (uri == "test://static-binary") return one({{"uri", uri}, {"mimeType", "image/png"}, {"blob", k_test_image}});
  if (uri == "test://watched-resource")
    return one({{"uri", uri}, {"mimeType", "text/plain"}, {"text", k_watched_content}});
  const std::string head = "test://template/", tail = "/data";
  if (uri.size() > head.size() + tail.size() && uri.compare(0, head.size(), head) == 0
      && uri.compare(uri.size() - tail.size(), tail.size(), tail) == 0) {
    auto id = uri.substr(head.size(), uri.size() - head.size() - tail.size());
    if (id.find('/') == std::string::npos) {
      json data = {{"id", id}, {"templateTest", true}, {"data", "Data for ID: " + id}};
      return one({{"uri", uri}, {"mimeType", "application/json"}, {"text", data.dump()}});
    }
  }
  throw rpc_error{-32002, "Resource not found: " + uri};
}

json prompt_argument(const char* name, const char* description) {
  return {{"name", name}, {"description", description}, {"required", true}};
}

json prompts() {
  return json::array(
    {{{"name", "test_simple_prompt"},
      {"title", "Simple Test Prompt"},
      {"description", "A simple prompt without arguments"}},
     {{"name", "test_prompt_with_arguments"},
      {"title", "Prompt With Arguments"},
      {"description", "A prompt with required arguments"},
      {"arguments", json::array({prompt_argument("arg1", "First test argument"),
                                 prompt_argument("arg2", "Second test argument")})}},
     {{"name", "test_prompt_with_embedded_resource"},
      {"title", "Prompt With Embedded Resource"},
      {"description", "A prompt that includes an embedded resource"},
      {"arguments", json::array({prompt_argument("resourceUri", "URI of the resource to embed")})}},
     {{"name", "test_prompt_with_image"},
      {"title", "Prompt With Image"},
      {"description", "A prompt that includes image content"}}});
}

std::string string_argument(const json& args, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || !it->is_string())
    throw rpc_error{-32602, std::string("missing string argument ") + name};
  return it->get<std::string>();
}

json user_message(json content) {
  return {{"role", "user"}, {"content", std::move(content)}};
}

json prompt_named(const std::string& name, const json& args) {
  if (name == "test_simple_prompt")
    return {{"messages", json::array({user_message(text_item("This is a simple prompt for testing."))})}};
  if (name == "test_prompt_with_arguments") {
    auto arg1 = string_argument(args, "arg1"), arg2 = string_argument(args, "arg2");
    return {
      {"messages",
       json::array({user_message(text_item("Prompt with arguments: arg1='" + arg1 + "', arg2='" + arg2 + "'"))})}};
  }
  if (name == "test_prompt_with_embedded_resource") {
    auto uri = string_argument(args, "resourceUri");
    json embedded = {
      {"type", "resource"},
      {"resource",
       {{"uri", uri}, {"mimeType", "text/plain"}, {"text", "Embedded resource content for testing."}}}};
    return {{"messages", json::array({user_message(std::move(embedded)),
                                      user_message(text_item("Please process the embedded resource above."))})}};
  }
  if (name == "test_prompt_with_image")
    return {{"messages", json::array({user_message(image_item()),
                                      user_message(text_item("Please analyze the image above."))})}};
  throw rpc_error{-32602, "Unknown prompt: " + name};
}

// Suggestions for test_prompt_with_arguments' arguments, filtered by the
// typed prefix, so a test can tell a forwarded completion from an empty one.
json complete(const json& params) {
  auto ref = params.value("ref", json::object());
  auto argument = params.value("argument", json::object());
  if (!ref.is_object() || !argument.is_object() || !ref.contains("type"))
    throw rpc_error{-32602, "completion/complete needs ref and argument"};
  json values = json::array();
  if (ref.value("type", "") == "ref/prompt" && ref.value("name", "") == "test_prompt_with_arguments") {
    auto prefix = argument.value("value", std::string());
    for (const char* candidate : {"alpha", "beta", "gamma"})
      if (std::string(candidate).rfind(prefix, 0) == 0) values.push_back(candidate);
  }
  auto total = values.size();
  return {{"completion", {{"values", std::move(values)}, {"total", total}, {"hasMore", false}}}};
}

int level_index(const std::string& level) {
  int i = 0;
  for (const char* l : k_log_levels) {
    if (level == l) return i;
    ++i;
  }
  return -1;
}

std::string uri_of(const json& params) {
  auto it = params.find("uri");
  if (it == params.end() || !it->is_string()) throw rpc_error{-32602, "needs a string uri"};
  return it->get<std::string>();
}

} // namespace

json handler::conformance_initialize_capabilities() const {
  return {{"tools", {{"listChanged", true}}},
          {"resources", {{"subscribe", true}, {"listChanged", true}}},
          {"prompts", {{"listChanged", true}}},
          {"logging", json::object()},
          {"completions", json::object()}};
}

void handler::send_log(peer& p, const std::string& level, const json& data) {
  if (level_index(level) < p.log_level.load()) return;
  p.send({{"jsonrpc", "2.0"},
          {"method", "notifications/message"},
          {"params", {{"level", level}, {"logger", k_server_name}, {"data", data}}}});
}

std::optional<json> handler::conformance_request(const std::shared_ptr<peer>& p, const std::string& method,
                                                 const json& params) {
  if (method == "tools/list") {
    auto list = tools();
    if (p->extra_tool) list.push_back(tool("test_dynamic_tool", "Added by test_trigger_tool_change"));
    return json{{"tools", std::move(list)}};
  }
  if (method == "tools/call") return conformance_call_tool(p, params);
  if (method == "resources/list") return json{{"resources", resources()}};
  if (method == "resources/templates/list") return json{{"resourceTemplates", resource_templates()}};
  if (method == "resources/read") return read_resource(uri_of(params));
  if (method == "resources/subscribe" || method == "resources/unsubscribe") {
    auto uri = uri_of(params);
    bool subscribe = method == "resources/subscribe";
    send_log(*p, "info",
             std::string(subscribe ? "Subscribed to resource: " : "Unsubscribed from resource: ") + uri);
    return json::object();
  }
  if (method == "prompts/list") {
    auto list = prompts();
    if (p->extra_prompt)
      list.push_back({{"name", "test_dynamic_prompt"}, {"description", "Added by test_trigger_prompt_change"}});
    return json{{"prompts", std::move(list)}};
  }
  if (method == "prompts/get") {
    auto name = params.find("name");
    if (name == params.end() || !name->is_string()) throw rpc_error{-32602, "prompts/get needs a string name"};
    auto args = params.value("arguments", json::object());
    if (!args.is_object()) throw rpc_error{-32602, "arguments must be an object"};
    return prompt_named(name->get<std::string>(), args);
  }
  if (method == "logging/setLevel") {
    auto level = params.value("level", json());
    int index = level.is_string() ? level_index(level.get<std::string>()) : -1;
    if (index < 0)
      throw rpc_error{-32602,
                      "level must be one of debug, info, notice, warning, error, critical, alert, emergency"};
    p->log_level = index;
    send_log(*p, "info", "Log level set to: " + level.get<std::string>());
    return json::object();
  }
  if (method == "completion/complete") return complete(params);
  return std::nullopt;
}

json handler::conformance_call_tool(const std::shared_ptr<peer>& p, const json& params) {
  auto name_it = params.find("name");
  if (name_it == params.end() || !name_it->is_string()) throw rpc_error{-32602, "tools/call needs a string name"};
  const auto& name = name_it->get_ref<const std::string&>();
  auto args = params.value("arguments", json::object());
  if (args.is_null()) args = json::object();
  if (!args.is_object()) throw rpc_error{-32602, "arguments must be an object"};

  if (name == "test_simple_text") return text_result("This is a simple text response for testing.");
  if (name == "test_image_content") return {{"content", json::array({image_item()})}};
  if (name == "test_audio_content")
    return {{"content", json::array({{{"type", "audio"}, {"data", k_test_audio}, {"mimeType", "audio/wav"}}})}};
  if (name == "test_embedded_resource")
    return {{"content", json::array({{{"type", "resource"},
                                      {"resource",
                                       {{"uri", "test://embedded-resource"},
                                        {"mimeType", "text/plain"},
                                        {"text", "This is an embedded resource content."}}}}})}};
  if (name == "test_multiple_content_types") {
    json data = {{"test", "data"}, {"value", 123}};
    return {{"content", json::array({text_item("Multiple content types test:"),
                                     image_item(),
                                     {{"type", "resource"},
                                      {"resource",
                                       {{"uri", "test://mixed-content-resource"},
                                        {"mimeType", "application/json"},
                                        {"text", data.dump()}}}}})}};
  }
  if (name == "test_tool_with_logging") {
    const char* steps[] = {"Tool execution started", "Tool processing data", "Tool execution completed"};
    for (int i = 0; i < 3; ++i) {
      if (i > 0 && !life_.wait_for_or_stop(k_step)) return error_result("interrupted by shutdown");
      send_log(*p, "info", steps[i]);
    }
    return text_result("Tool with logging executed successfully");
  }
  if (name == "test_tool_with_progress") {
    // Notifications only for a caller that asked for them; the answer
    // names the token so a test can see which one arrived.
    std::optional<json> token;
    if (auto meta = params.find("_meta");
        meta != params.end() && meta->is_object() && meta->contains("progressToken"))
      token = (*meta)["progressToken"];
    for (int step = 0; step <= 100; step += 50) {
      if (step > 0 && !life_.wait_for_or_stop(k_step)) return error_result("interrupted by shutdown");
      if (token)
        p->send({{"jsonrpc", "2.0"},
                 {"method", "notifications/progress"},
                 {"params",
                  {{"progressToken", *token},
                   {"progress", step},
                   {"total", 100},
                   {"message", "Completed step " + std::to_string(step) + " of 100"}}}});
    }
    if (!token) return text_result("no progress token");
    return text_result(token->is_string() ? token->get<std::string>() : token->dump());
  }
  if (name == "test_error_handling") return error_result("This tool intentionally returns an error for testing");
  if (name == "test_reconnection")
    return text_result(
      "Reconnection test completed successfully. If you received this, the client properly "
      "reconnected after stream closure.");
  if (name == "json_schema_2020_12_tool")
    return text_result("JSON Schema 2020-12 tool called with: " + args.dump());

  // Server-to-client requests, answered before this call is.
  auto ask = [&](const char* capability, const char* method, const json& request) -> std::optional<json> {
    if (!p->client_offers(capability)) return std::nullopt;
    return ask_client(p, method, request);
  };
  auto failure = [&](const char* capability, const std::optional<json>& reply) {
    if (!p->client_offers(capability))
      return error_result(std::string("the client did not declare the ") + capability + " capability");
    if (!reply) return error_result("the client did not answer in time");
    if (reply->contains("error"))
      return error_result("the client answered with an error: " + reply->at("error").dump());
    return error_result("the client's result is not an object: " + reply->at("result").dump());
  };
  auto answered = [](const std::optional<json>& reply) {
    return reply && reply->contains("result") && reply->at("result").is_object();
  };
  if (name == "test_sampling") {
    auto prompt = args.find("prompt");
    if (prompt == args.end() || !prompt->is_string())
      return error_result("test_sampling: argument 'prompt' must be a string");
    json request = {{"messages", json::array({user_message(text_item(prompt->get<std::string>()))})},
                    {"maxTokens", 100}};
    auto reply = ask("sampling", "sampling/createMessage", request);
    if (!answered(reply)) return failure("sampling", reply);
    const auto& result = reply->at("result");
    std::string text = "No response";
    if (result.contains("content") && result.at("content").is_object()
        && result.at("content").value("text", json()).is_string())
      text = result.at("content").at("text").get<std::string>();
    return text_result("LLM response: " + text);
  }
  auto elicitation_outcome = [&](const char* label, const json& request) {
    auto reply = ask("elicitation", "elicitation/create", request);
    if (!answered(reply)) return failure("elicitation", reply);
    const auto& result = reply->at("result");
    auto action = result.value("action", json("?"));
    auto content = result.value("content", json::object());
    return text_result(std::string(label)
                       + "action=" + (action.is_string() ? action.get<std::string>() : action.dump())
                       + ", content=" + content.dump());
  };
  if (name == "test_elicitation") {
    auto message = args.find("message");
    if (message == args.end() || !message->is_string())
      return error_result("test_elicitation: argument 'message' must be a string");
    return elicitation_outcome(
      "User response: ",
      elicitation_request(message->get<std::string>(),
                          {{"response", {{"type", "string"}, {"description", "User's response"}}}}, {"response"}));
  }
  if (name == "test_elicitation_sep1034_defaults")
    return elicitation_outcome("Elicitation completed: ", sep1034_defaults_request());
  if (name == "test_header_param") return text_result("region: " + args.value("region", std::string("?")));
  if (name == "test_logging_tool") {
    send_log(*p, "info", "test_logging_tool ran");
    return text_result("logged");
  }
  if (name == "test_trigger_tool_change" || name == "test_trigger_prompt_change") {
    bool tools_changed = name == "test_trigger_tool_change";
    auto& flag = tools_changed ? p->extra_tool : p->extra_prompt;
    flag = !flag;
    p->send({{"jsonrpc", "2.0"},
             {"method", tools_changed ? "notifications/tools/list_changed" : "notifications/prompts/list_changed"}});
    return text_result(tools_changed ? "tools changed" : "prompts changed");
  }
  // What the client answered an elicitation with: its content's `field`.
  auto elicited = [&](const std::string& message, const char* field, const char* type,
                      std::string* out) -> std::optional<json> {
    auto reply = ask("elicitation", "elicitation/create",
                     elicitation_request(message, {{field, {{"type", type}}}}, {field}));
    if (!answered(reply)) return failure("elicitation", reply);
    const auto& result = reply->at("result");
    auto content = result.value("content", json::object());
    auto v = content.is_object() ? content.value(field, json()) : json();
    *out = v.is_string() ? v.get<std::string>() : v.dump();
    return std::nullopt;
  };
  auto sampled = [&](const std::string& prompt, int max_tokens, std::string* out) -> std::optional<json> {
    auto reply = ask("sampling", "sampling/createMessage",
                     {{"messages", json::array({user_message(text_item(prompt))})}, {"maxTokens", max_tokens}});
    if (!answered(reply)) return failure("sampling", reply);
    const auto& result = reply->at("result");
    *out = result.contains("content") && result["content"].is_object() && result["content"].value("text", json()).is_string()
             ? result["content"]["text"].get<std::string>()
             : std::string("(no text)");
    return std::nullopt;
  };
  if (name == "test_missing_capability" || name == "test_input_required_result_sampling") {
    std::string text;
    if (auto e = sampled("What is the capital of France?", 100, &text)) return *e;
    return text_result("Sampling response: " + text);
  }
  if (name == "test_streaming_elicitation" || name == "test_input_required_result_elicitation") {
    std::string who;
    if (auto e = elicited("What is your name?", "name", "string", &who)) return *e;
    return text_result("Hello, " + who + "!");
  }
  if (name == "test_input_required_result_request_state" || name == "test_input_required_result_tampered_state") {
    std::string ok;
    if (auto e = elicited("Please confirm", "ok", "boolean", &ok)) return *e;
    return text_result("state-ok: confirmed=" + ok);
  }
  if (name == "test_input_required_result_multi_round") {
    std::string who, color;
    if (auto e = elicited("Step 1: What is your name?", "name", "string", &who)) return *e;
    if (auto e = elicited("Step 2: What is your favorite color?", "color", "string", &color)) return *e;
    return text_result("Hello, " + who + "! Your favorite color is " + color + ".");
  }
  if (name == "test_input_required_result_list_roots" || name == "test_input_required_result_multiple_inputs") {
    std::string who, greeting;
    if (name == "test_input_required_result_multiple_inputs") {
      if (auto e = elicited("What is your name?", "name", "string", &who)) return *e;
      if (auto e = sampled("Generate a greeting", 50, &greeting)) return *e;
    }
    auto reply = ask("roots", "roots/list", json::object());
    if (!answered(reply)) return failure("roots", reply);
    return text_result("roots: " + reply->at("result").value("roots", json::array()).dump()
                       + (who.empty() ? "" : ", name: " + who + ", greeting: " + greeting));
  }
  if (name == "test_input_required_result_capabilities") {
    // Each input only from a client that can give it.
    std::string text;
    if (p->client_offers("sampling"))
      if (auto e = sampled("Summarize: the capabilities check", 50, &text)) return *e;
    return text_result("capabilities checked: " + text);
  }
  if (name == "test_elicitation_sep1330_enums")
    return elicitation_outcome("Elicitation completed: ", sep1330_enums_request());
  throw rpc_error{-32602, "Unknown tool: " + name};
}

} // namespace mcprt_test_server
