#include "core/elicitation.hpp"

#include <cmath>
#include <limits>
#include <optional>

namespace mcprt {

using nlohmann::json;

namespace {

// The allowed values a select offers, from `enum` (plain or legacy titled)
// or `oneOf` / `anyOf` of `{const, title}`; nullopt when the schema names
// none or more than the limit allows (then no default can be trusted).
struct options_view {
  bool present = false;
  bool usable = true;
  std::vector<const json*> values;
};

options_view options_of(const json& schema, const elicitation_limits& limits) {
  options_view out;
  auto collect = [&](const json& arr, bool consts) {
    out.present = true;
    if (!arr.is_array() || arr.size() > limits.max_options) {
      out.usable = false;
      return;
    }
    for (const auto& v : arr) {
      if (!consts) {
        out.values.push_back(&v);
      } else if (v.is_object()) {
        auto c = v.find("const");
        if (c != v.end()) out.values.push_back(&*c);
      }
    }
  };
  if (auto e = schema.find("enum"); e != schema.end())
    collect(*e, false);
  else if (auto o = schema.find("oneOf"); o != schema.end())
    collect(*o, true);
  else if (auto a = schema.find("anyOf"); a != schema.end())
    collect(*a, true);
  return out;
}

bool is_option(const options_view& opts, const json& v) {
  if (!opts.present) return true;
  if (!opts.usable) return false;
  for (const auto* o : opts.values)
    if (*o == v) return true;
  return false;
}

// The default of one property schema, when it has one of its own type.
std::optional<json> default_of(const json& schema, const elicitation_limits& limits) {
  if (!schema.is_object()) return std::nullopt;
  auto d = schema.find("default");
  auto t = schema.find("type");
  if (d == schema.end() || t == schema.end() || !t->is_string()) return std::nullopt;
  const auto& type = t->get_ref<const std::string&>();
  if (type == "string") {
    if (!d->is_string() || !is_option(options_of(schema, limits), *d)) return std::nullopt;
    return *d;
  }
  if (type == "boolean") {
    if (!d->is_boolean()) return std::nullopt;
    return *d;
  }
  if (type == "number") {
    if (!d->is_number()) return std::nullopt;
    return *d;
  }
  if (type == "integer") {
    if (d->is_number_integer()) return *d;
    if (d->is_number_float()) {
      // 30.0 is an integer in JSON Schema; 30.5 is not.
      double v = d->get<double>();
      if (std::isfinite(v) && std::trunc(v) == v && v >= -9.2e18 && v <= 9.2e18)
        return json(static_cast<std::int64_t>(v));
    }
    return std::nullopt;
  }
  if (type == "array") {
    // A multi-select: the default lists chosen options.
    auto items = schema.find("items");
    if (items == schema.end() || !items->is_object() || !d->is_array() ||
        d->size() > limits.max_options)
      return std::nullopt;
    auto opts = options_of(*items, limits);
    for (const auto& v : *d)
      if (!v.is_string() || !is_option(opts, v)) return std::nullopt;
    return *d;
  }
  return std::nullopt;
}

} // namespace

elicitation_defaults defaults_of_requested_schema(const json& requested_schema,
                                                  const elicitation_limits& limits) {
  elicitation_defaults out;
  if (!requested_schema.is_object()) {
    out.problem = "requestedSchema is not an object";
    return out;
  }
  auto props = requested_schema.find("properties");
  if (props != requested_schema.end() && !props->is_object()) {
    out.problem = "requestedSchema.properties is not an object";
    return out;
  }
  if (props != requested_schema.end() && props->size() > limits.max_properties) {
    out.problem = "requestedSchema has more than " + std::to_string(limits.max_properties) +
                  " properties";
    return out;
  }
  if (props != requested_schema.end())
    for (const auto& [name, schema] : props->items())
      if (auto d = default_of(schema, limits)) out.content[name] = std::move(*d);
  auto required = requested_schema.find("required");
  if (required != requested_schema.end() && required->is_array()) {
    if (required->size() > limits.max_properties) {
      out.content = json::object();
      out.problem = "requestedSchema requires more than " +
                    std::to_string(limits.max_properties) + " properties";
      return out;
    }
    for (const auto& r : *required)
      if (!r.is_string() || !out.content.contains(r.get_ref<const std::string&>()))
        out.missing_required.push_back(r.is_string() ? r.get<std::string>() : std::string());
  }
  return out;
}

json accept_defaults_answer(const json& params, const elicitation_limits& limits) {
  const json decline = {{"action", "decline"}};
  if (!params.is_object()) return decline;
  auto mode = params.find("mode");
  if (mode != params.end() && !(mode->is_string() && *mode == "form")) return decline;
  auto schema = params.find("requestedSchema");
  if (schema == params.end()) return decline;
  auto defaults = defaults_of_requested_schema(*schema, limits);
  if (!defaults.complete()) return decline;
  return {{"action", "accept"}, {"content", std::move(defaults.content)}};
}

} // namespace mcprt
