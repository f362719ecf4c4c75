// Variables in a server entry come from whoever wrote the settings file:
// any bytes, as one string and as a JSON entry, must expand within the
// bound or give a problem whose message is printable and never holds a
// value (the environment's here is a fixed secret-looking string, and the
// input's another).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/untrusted_text.hpp"
#include "tests/fuzz/fuzz_checks.hpp"
#include "core/variables.hpp"

using namespace mcprt;
using mcprt::fuzz::printable;
using mcprt::fuzz::require;

namespace {

const std::string env_value = "SeCrEt-env-" + std::string(200, 'e') + "-${HOME}";
const std::string input_value = "SeCrEt-input-${input:a}";

variable_context make_context() {
  variable_context ctx;
  // Some names are set (A, HOME, PATH, a long value); E is set but empty.
  ctx.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "E") return std::string();
    if (name.size() == 1 || name == "HOME" || name == "PATH") return env_value;
    return std::nullopt;
  };
  ctx.input = [](const std::string& id) -> std::optional<std::string> {
    if (id.size() <= 2) return input_value;
    return std::nullopt;
  };
  ctx.workspace_folder = "/ws/SeCrEt-folder";
  ctx.user_home = "/home/SeCrEt-user";
  return ctx;
}

/// A problem shows no value: none of the values' markers may appear in it,
/// unless the input holds that marker itself (a name as written may).
void check_problem(const expansion_problem& p, std::string_view text) {
  auto m = p.message();
  require(printable(m));
  require(printable(p.variable) && printable(p.key_path));
  for (const char* marker : {"SeCrEt-env", "SeCrEt-input", "SeCrEt-folder", "SeCrEt-user"})
    require(text.find(marker) != std::string_view::npos
            || (m.find(marker) == std::string::npos && p.variable.find(marker) == std::string::npos));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const variable_context ctx = make_context();
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto r = expand_variables(text, ctx);
  if (r.problem) {
    require(r.value.empty());
    check_problem(*r.problem, text);
    require(r.problem->key_path.empty());
  } else {
    require(r.value.size() <= max_expanded_bytes);
    // Without "${" nothing changes.
    if (!has_variables(text)) require(r.value == text);
  }

  auto spec = nlohmann::json::parse(text, nullptr, false);
  if (spec.is_discarded()) {
    // Not JSON: the text as each expandable value.
    spec = nlohmann::json{{"command", text}, {"args", {text}}, {"env", {{"K", text}}}, {"timeout", 5}};
  }
  auto s = expand_server_spec(spec, ctx);
  if (s.problem) {
    check_problem(*s.problem, text);
    require(s.spec == spec);
  } else if (spec.is_object()) {
    // Every other key as it was.
    for (auto& [key, value] : spec.items()) {
      require(s.spec.contains(key));
      if (key != "command" && key != "args" && key != "env" && key != "cwd" && key != "url" && key != "httpUrl"
          && key != "headers")
        require(s.spec.at(key) == value);
    }
    require(s.spec.size() == spec.size());
    // Each expanded string within its bound, all of them within the entry's.
    std::size_t total = 0;
    auto count = [&](const nlohmann::json& before, const nlohmann::json& after) {
      if (!before.is_string() || !has_variables(before.get_ref<const std::string&>())) {
        require(before == after);
        return;
      }
      require(after.is_string() && after.get_ref<const std::string&>().size() <= max_expanded_bytes);
      total += after.get_ref<const std::string&>().size();
    };
    for (auto& [key, value] : spec.items()) {
      const auto& after = s.spec.at(key);
      if (key == "command" || key == "cwd" || key == "url" || key == "httpUrl") {
        count(value, after);
      } else if ((key == "args" && value.is_array()) || ((key == "env" || key == "headers") && value.is_object())) {
        require(after.size() == value.size());
        for (auto i = value.cbegin(), j = after.cbegin(); i != value.cend(); ++i, ++j) {
          if (value.is_object()) require(i.key() == j.key());
          count(*i, *j);
        }
      }
    }
    require(total <= max_expanded_spec_bytes);
  } else {
    require(s.spec == spec);
  }
  return 0;
}
