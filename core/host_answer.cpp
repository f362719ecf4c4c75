#include "core/host_answer.hpp"

#include <string_view>

#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;

namespace {

constexpr std::size_t max_fields = 256;

/// At most `max` bytes of `s`, never half a UTF-8 sequence at the end.
std::string cut_answer_text(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return replace_invalid_utf8(std::string_view(s).substr(0, n));
}

host_answer bad(std::string why) {
  host_answer out;
  out.error = std::move(why);
  return out;
}

bool is_flat_value(const json& v) {
  if (v.is_string() || v.is_number() || v.is_boolean()) return true;
  if (!v.is_array() || v.size() > max_fields) return false;
  for (auto& x : v)
    if (!x.is_string()) return false;
  return true;
}

} // namespace

json bounded_host_params(const json& params, std::size_t max_bytes) {
  if (!params.is_object()) return json::object();
  auto text = dump_json(params);
  if (text.size() <= max_bytes) return params;
  json out{{"truncated", true}, {"bytes", text.size()}};
  if (auto m = params.find("message"); m != params.end() && m->is_string())
    out["message"] = cut_answer_text(m->get<std::string>(), max_host_text_bytes);
  return out;
}

host_answer check_elicitation_answer(const json& body) {
  if (!body.is_object()) return bad("expected a JSON object {\"action\", \"content\"}");
  auto action = body.find("action");
  if (action == body.end() || !action->is_string())
    return bad("\"action\" must be \"accept\", \"decline\" or \"cancel\"");
  auto a = action->get<std::string>();
  if (a != "accept" && a != "decline" && a != "cancel")
    return bad("\"action\" must be \"accept\", \"decline\" or \"cancel\"");
  json result{{"action", a}};
  auto content = body.find("content");
  if (content != body.end() && !content->is_null()) {
    if (!content->is_object()) return bad("\"content\" must be an object");
    if (content->size() > max_fields) return bad("\"content\" has more than 256 fields");
    for (auto& [k, v] : content->items())
      if (!is_flat_value(v))
        return bad("\"content\"." + escape_for_display(cut_answer_text(k, 128))
                   + " must be a string, a number, a boolean or an array of at most 256 strings");
    if (a == "accept") result["content"] = *content;
  }
  host_answer out;
  out.result = std::move(result);
  return out;
}

host_answer check_sampling_answer(const json& body) {
  if (!body.is_object()) return bad("expected a JSON object (a CreateMessageResult or {\"error\": {\"message\"}})");
  if (auto e = body.find("error"); e != body.end()) {
    if (!e->is_object() || !e->contains("message") || !(*e)["message"].is_string())
      return bad("\"error\" must be an object with a string \"message\"");
    host_answer out;
    out.refusal = cut_answer_text((*e)["message"].get<std::string>(), max_host_text_bytes);
    return out;
  }
  auto role = body.find("role");
  if (role == body.end() || !role->is_string() || (*role != "assistant" && *role != "user"))
    return bad("\"role\" must be \"assistant\" or \"user\"");
  auto content = body.find("content");
  bool content_ok = content != body.end() && content->is_object();
  if (content != body.end() && content->is_array() && !content->empty() && content->size() <= max_fields) {
    content_ok = true;
    for (auto& c : *content)
      content_ok = content_ok && c.is_object();
  }
  if (!content_ok) return bad("\"content\" must be an object or an array of at most 256 objects");
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return bad("\"model\" must be a string");
  json result{{"role", *role}, {"content", *content}, {"model", *model}};
  if (auto s = body.find("stopReason"); s != body.end() && !s->is_null()) {
    if (!s->is_string()) return bad("\"stopReason\" must be a string");
    result["stopReason"] = *s;
  }
  host_answer out;
  out.result = std::move(result);
  return out;
}

} // namespace mcprt
