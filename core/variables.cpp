#include "core/variables.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/server_config.hpp"

namespace mcprt {

namespace {

using kind = expansion_problem::kind;

bool name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool name_char(char c) {
  return name_start(c) || (c >= '0' && c <= '9');
}

bool input_id_char(char c) {
  return name_char(c) || c == '.' || c == '-';
}

/// Length of the NAME at the start of `s` (0 when there is none).
std::size_t name_length(std::string_view s) {
  if (s.empty() || !name_start(s[0])) return 0;
  std::size_t n = 1;
  while (n < s.size() && name_char(s[n]))
    ++n;
  return n;
}

bool is_name(std::string_view s) {
  return !s.empty() && name_length(s) == s.size();
}

bool is_input_id(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!input_id_char(c)) return false;
  return true;
}

/// Text from the file as a message may show it: escaped and cut, exactly as
/// config_error::path_string shows one key.
std::string shown_variable_text(std::string_view text) {
  config_error e;
  e.path.emplace_back(text);
  return e.path_string();
}

/// The `variable` of an unsupported reference: the whole text for the
/// `NAME` shape and VS Code's `prefix:argument` forms (`config:`,
/// `command:`, ...: nothing a default could hide in), else the name and its
/// operator, then "..." (`${TOKEN:sk_live_...}`, a mistyped `:-`, must not
/// put its text in a message).
std::string shown_unsupported(std::string_view inner) {
  auto n = name_length(inner);
  auto rest = inner.substr(n);
  auto prefix = inner.substr(0, n);
  bool vscode_form = prefix == "env" || prefix == "input" || prefix == "config" || prefix == "command";
  if (!rest.empty() && rest[0] == ':' && vscode_form) {
    bool plain = true;
    for (char c : rest.substr(1))
      plain = plain && input_id_char(c);
    if (plain) return shown_variable_text(inner);
  }
  std::size_t op = 0;
  while (op < rest.size() && std::string_view(":-=?+").find(rest[op]) != std::string_view::npos)
    ++op;
  return shown_variable_text(inner.substr(0, n + op)) + (op < rest.size() ? "..." : "");
}

std::optional<std::string> lookup(const std::function<std::optional<std::string>(const std::string&)>& f,
                                  std::string_view key) {
  if (!f) return std::nullopt;
  return f(std::string(key));
}

std::string basename_of(std::string_view path) {
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

/// A predefined name's value ("" = none), or nullopt when `name` is not one.
std::optional<std::string> predefined(std::string_view name, const variable_context& ctx) {
  if (name == "workspaceFolder") return ctx.workspace_folder;
  if (name == "workspaceFolderBasename") return basename_of(ctx.workspace_folder);
  if (name == "userHome") return ctx.user_home;
  if (name == "pathSeparator") return std::string("/");
  return std::nullopt;
}

bool is_predefined(std::string_view name) {
  return name == "workspaceFolder" || name == "workspaceFolderBasename" || name == "userHome"
         || name == "pathSeparator";
}

/// What one `${inner}` stands for.
struct resolved {
  std::optional<std::string> value;
  std::optional<expansion_problem> problem;
  std::string name; // shown in a too_long problem
  bool secret = false; // from the environment or an input, not the file
};

resolved problem(kind what, std::string variable) {
  resolved r;
  r.problem = expansion_problem{what, std::move(variable), {}, {}};
  return r;
}

/// `inner` starts with a name character (or is "/").
resolved resolve(std::string_view inner, const variable_context& ctx) {
  if (inner == "/") return {std::string("/"), std::nullopt, "/"};
  auto n = name_length(inner);
  auto name = inner.substr(0, n);
  auto rest = inner.substr(n);

  auto variable_value = [&](std::string_view var) -> std::optional<std::string> {
    if (auto p = predefined(var, ctx)) {
      if (p->empty()) return std::nullopt;
      return p;
    }
    auto v = lookup(ctx.env, var);
    return v;
  };

  if (rest.empty()) {
    auto v = variable_value(name);
    if (!v) return problem(kind::missing_variable, shown_variable_text(name));
    return {std::move(v), std::nullopt, std::string(name), !is_predefined(name)};
  }
  if (rest.size() >= 2 && rest[0] == ':' && rest[1] == '-') {
    auto fallback = rest.substr(2);
    if (fallback.find("${") != std::string_view::npos) return problem(kind::unsupported, shown_unsupported(inner));
    auto v = variable_value(name);
    if (!v || v->empty()) return {std::string(fallback), std::nullopt, std::string(name)};
    return {std::move(v), std::nullopt, std::string(name), !is_predefined(name)};
  }
  if (rest[0] == ':') {
    auto arg = rest.substr(1);
    if (name == "env" && is_name(arg)) {
      auto v = lookup(ctx.env, arg);
      if (!v) return problem(kind::missing_variable, shown_variable_text(inner));
      return {std::move(v), std::nullopt, std::string(inner), true};
    }
    if (name == "input" && is_input_id(arg)) {
      auto v = lookup(ctx.input, arg);
      if (!v) return problem(kind::missing_input, shown_variable_text(inner));
      return {std::move(v), std::nullopt, std::string(inner), true};
    }
  }
  return problem(kind::unsupported, shown_unsupported(inner));
}

/// Appends `piece` unless `out` would pass `limit`.
bool append(std::string& out, std::string_view piece, std::size_t limit) {
  if (piece.size() > limit - out.size()) return false;
  out.append(piece);
  return true;
}

expanded_text too_long(std::string variable) {
  return {{}, expansion_problem{kind::too_long, std::move(variable), {}, {}}};
}

/// expand_variables with a bound of its own (<= max_expanded_bytes).
expanded_text expand_bounded(std::string_view text, const variable_context& ctx, std::size_t limit) {
  std::string out;
  std::size_t pos = 0;
  // The first `}` at or after the last search; kept across literal `${`s so
  // that a run of them does not search the same tail over and over.
  std::size_t close = 0;
  bool close_known = false;
  while (pos < text.size()) {
    auto open = text.find("${", pos);
    if (open == std::string_view::npos) break;
    if (!append(out, text.substr(pos, open - pos), limit)) return too_long("");
    auto body = open + 2;
    if (!close_known || close < body) {
      close = text.find('}', body);
      close_known = true;
    }
    if (close == std::string_view::npos) {
      // No `}` after this `${`: none can close a later one either.
      pos = open;
      break;
    }
    auto inner = text.substr(body, close - body);
    if (inner != "/" && (inner.empty() || !name_start(inner[0]))) {
      if (!append(out, "${", limit)) return too_long("");
      pos = body;
      continue;
    }
    auto r = resolve(inner, ctx);
    if (r.problem) return {{}, std::move(r.problem)};
    if (!append(out, *r.value, limit)) return too_long(shown_variable_text(r.name));
    if (r.secret && ctx.substitutions && !r.value->empty())
      ctx.substitutions->emplace_back(std::move(*r.value), "${" + std::string(inner) + "}");
    pos = close + 1;
  }
  if (pos < text.size() && !append(out, text.substr(pos), limit)) return too_long("");
  return {std::move(out), std::nullopt};
}

const char* const expandable_strings[] = {"command", "cwd", "url", "httpUrl", "proxy", "caFile"};
const char* const expandable_maps[] = {"env", "headers"};

} // namespace

std::string expansion_problem::message() const {
  std::string out = key_path.empty() ? std::string() : key_path + ": ";
  switch (what) {
  case kind::missing_variable:
    if (is_predefined(variable)) return out + "variable " + variable + " has no value here";
    if (variable.rfind("env:", 0) == 0) return out + "variable " + variable + " is not set";
    return out + "variable " + variable + " is not set and has no default";
  case kind::missing_input: {
    std::string_view id = variable;
    if (id.rfind("input:", 0) == 0) id.remove_prefix(6);
    return out + "input '" + std::string(id) + "' has no stored value (run `mcprt input set " + std::string(id)
           + "`)";
  }
  case kind::unsupported:
    return out + "unsupported variable " + variable;
  case kind::too_long:
    return out + "longer than " + std::to_string(max_expanded_bytes)
           + " bytes once its variables are expanded (or the entry's expanded strings add up to more than "
           + std::to_string(max_expanded_spec_bytes) + ")";
  case kind::invalid_value:
    return out + "not valid once its variables are expanded: " + detail;
  }
  return out + "variable problem";
}

bool has_variables(std::string_view text) {
  return text.find("${") != std::string_view::npos;
}

expanded_text expand_variables(std::string_view text, const variable_context& ctx) {
  return expand_bounded(text, ctx, max_expanded_bytes);
}

bool spec_has_variables(const nlohmann::json& spec) {
  if (!spec.is_object()) return false;
  auto has = [](const nlohmann::json& v) { return v.is_string() && has_variables(v.get_ref<const std::string&>()); };
  for (auto* k : expandable_strings)
    if (auto i = spec.find(k); i != spec.end() && has(*i)) return true;
  if (auto args = spec.find("args"); args != spec.end() && args->is_array())
    for (auto& a : *args)
      if (has(a)) return true;
  for (auto* k : expandable_maps)
    if (auto m = spec.find(k); m != spec.end() && m->is_object())
      for (auto& [name, v] : m->items())
        if (has(v)) return true;
  return false;
}

expanded_spec expand_server_spec(const nlohmann::json& spec, const variable_context& ctx) {
  if (!spec_has_variables(spec)) return {spec, std::nullopt};
  nlohmann::json out = spec;
  std::size_t budget = max_expanded_spec_bytes;

  // Expands one string in place; false (and `problem` set) on failure.
  std::optional<expansion_problem> problem;
  auto expand_one = [&](nlohmann::json& value, const std::vector<std::string>& path, bool index_last) {
    if (!value.is_string()) return true;
    const auto& text = value.get_ref<const std::string&>();
    if (!has_variables(text)) return true;
    auto r = expand_bounded(text, ctx, std::min(max_expanded_bytes, budget));
    if (r.problem) {
      config_error where;
      where.path = path;
      where.index_last = index_last;
      r.problem->key_path = where.path_string();
      problem = std::move(r.problem);
      return false;
    }
    budget -= r.value.size();
    value = std::move(r.value);
    return true;
  };

  auto fail = [&] { return expanded_spec{spec, std::move(problem)}; };
  for (auto& [key, value] : out.items()) {
    bool plain = false;
    for (auto* k : expandable_strings)
      plain = plain || key == k;
    bool map = false;
    for (auto* k : expandable_maps)
      map = map || key == k;
    if (plain) {
      if (!expand_one(value, {key}, false)) return fail();
    } else if (key == "args" && value.is_array()) {
      for (std::size_t i = 0; i < value.size(); ++i)
        if (!expand_one(value[i], {key, std::to_string(i)}, true)) return fail();
    } else if (map && value.is_object()) {
      for (auto& [name, v] : value.items())
        if (!expand_one(v, {key, name}, false)) return fail();
    }
  }
  return {std::move(out), std::nullopt};
}

std::function<std::optional<std::string>(const std::string&)> process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

} // namespace mcprt
