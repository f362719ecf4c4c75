#include "core/input_store.hpp"

#include "core/approvals_store.hpp"
#include "core/untrusted_text.hpp"

#include <stdexcept>
#include <utility>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mcprt {

namespace {

constexpr const char* inputs_label = "inputs file";
constexpr std::size_t max_id_bytes = 64;

bool id_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'
         || c == '-';
}

// Why `value` cannot be stored, or empty. Never quotes it: it is a secret.
std::string value_problem(const std::string& value) {
  if (value.size() > input_store::max_value_bytes)
    return "is " + std::to_string(value.size()) + " bytes long, more than the "
           + std::to_string(input_store::max_value_bytes) + " allowed";
  if (value.find('\0') != std::string::npos) return "holds a NUL character";
  if (first_invalid_utf8(value)) return "is not valid UTF-8";
  return {};
}

// A project root from the file, quoted in a warning (not a secret).
std::string shown_input_text(const std::string& text) {
  return escape_for_display(text.substr(0, 200));
}

// Keeps only what get() can hand out as is: string values of valid ids,
// within the bounds. Each dropped record is a problem, which backs the file
// up before the next write drops it for good. No message quotes a value, nor
// an id that is not valid (it may be a value pasted in the wrong place).
json_file_store::validator inputs_validator(const fs::path& file) {
  return [file = "'" + file.string() + "'"](json& doc, std::vector<std::string>& problems) {
    json kept = json::object();
    for (auto& [root, inputs] : doc.items()) {
      auto where = std::string{inputs_label} + " " + file + ": ";
      auto project_name = "project \"" + shown_input_text(root) + "\"";
      if (!inputs.is_object()) {
        problems.push_back(where + "the record for " + project_name + " is a " + inputs.type_name()
                           + ", not an object; ignoring it");
        continue;
      }
      auto& project = kept[root] = json::object();
      std::size_t over_limit = 0;
      for (auto& [id, value] : inputs.items()) {
        if (auto why = input_id_problem(id)) {
          problems.push_back(where + "an input id in " + project_name + " is not valid (" + *why
                             + "); ignoring it and its value");
          continue;
        }
        auto input_name = "the value of input \"" + id + "\" in " + project_name;
        if (!value.is_string()) {
          problems.push_back(where + input_name + " is a " + value.type_name() + ", not a string; ignoring it");
          continue;
        }
        auto why = value_problem(value.get_ref<const std::string&>());
        if (!why.empty()) {
          problems.push_back(where + input_name + " " + why + "; ignoring it");
          continue;
        }
        if (project.size() >= input_store::max_ids_per_project) {
          ++over_limit;
          continue;
        }
        project[id] = std::move(value);
      }
      if (over_limit > 0)
        problems.push_back(where + project_name + " has " + std::to_string(over_limit)
                           + " more inputs than the " + std::to_string(input_store::max_ids_per_project)
                           + " kept; ignoring them");
    }
    doc = std::move(kept);
  };
}

} // namespace

std::optional<std::string> input_id_problem(std::string_view id) {
  if (id.empty()) return "an input id cannot be empty";
  if (id.size() > max_id_bytes)
    return "an input id has at most " + std::to_string(max_id_bytes) + " characters, this one has "
           + std::to_string(id.size());
  for (char c : id)
    if (!id_char(c)) return "an input id may only hold letters A-Z and a-z, digits, '_', '.' and '-'";
  return std::nullopt;
}

input_store::input_store(fs::path file) : store_(file, inputs_label, inputs_validator(file)) {}

fs::path input_store::default_path(const fs::path& home, std::string_view config_dir) {
  return home / fs::path{config_dir} / "mcp-inputs.json";
}

void input_store::reload() {
  store_.reload();
}

std::vector<std::string> input_store::take_warnings() {
  return store_.take_warnings();
}

std::optional<std::string> input_store::get(const std::string& project_root, const std::string& id) {
  auto& data = store_.read();
  auto project = data.find(approvals_store::normalize_project_root(project_root));
  if (project == data.end()) return std::nullopt;
  auto value = project->find(id);
  if (value == project->end()) return std::nullopt;
  // The validator kept only string values.
  return value->get<std::string>();
}

std::vector<std::string> input_store::ids(const std::string& project_root) {
  std::vector<std::string> out;
  auto& data = store_.read();
  auto project = data.find(approvals_store::normalize_project_root(project_root));
  if (project == data.end()) return out;
  // nlohmann::json keeps an object's keys in a std::map: already sorted.
  for (auto& [id, value] : project->items())
    out.push_back(id);
  return out;
}

void input_store::set(const std::string& project_root, const std::string& id, const std::string& value) {
  if (auto why = input_id_problem(id)) throw std::invalid_argument("input_store::set: " + *why);
  auto why = value_problem(value);
  if (!why.empty()) throw std::invalid_argument("input_store::set: the value of input \"" + id + "\" " + why);
  auto root = approvals_store::normalize_project_root(project_root);
  store_.update([&](json& data) {
    auto& project = data[root];
    if (!project.is_object()) project = json::object();
    // Judged against what is on disk now, under the lock.
    if (!project.contains(id) && project.size() >= max_ids_per_project)
      throw std::invalid_argument("input_store::set: project \"" + escape_for_display(root) + "\" already has "
                                  + std::to_string(max_ids_per_project)
                                  + " stored inputs; remove one before adding another");
    project[id] = value;
  });
}

bool input_store::unset(const std::string& project_root, const std::string& id) {
  auto root = approvals_store::normalize_project_root(project_root);
  bool removed = false;
  store_.update([&](json& data) {
    auto project = data.find(root);
    if (project == data.end()) return;
    removed = project->erase(id) > 0;
    if (project->empty()) data.erase(project);
  });
  return removed;
}

} // namespace mcprt
