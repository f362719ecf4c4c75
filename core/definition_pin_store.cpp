#include "core/definition_pin_store.hpp"

#include "core/approvals_store.hpp"
#include "core/untrusted_text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mcprt {

namespace {

constexpr const char* pins_label = "definitions file";

// Empty when `rec` is a well-formed record, else what is wrong.
std::string pin_record_problem(const json& rec) {
  if (!rec.is_object()) return "is not an object";
  auto hash = rec.find("hash");
  if (hash == rec.end() || !hash->is_string() || hash->get_ref<const std::string&>().empty())
    return "has no non-empty string \"hash\"";
  auto pins = rec.find("pins");
  if (pins == rec.end() || !pins_from_json(*pins)) return "has no \"pins\" of the form {\"tools\": {NAME: {FIELD: DIGEST}}}";
  if (auto held = rec.find("held"); held != rec.end()) {
    if (!held->is_object() || !held->contains("digest") || !(*held)["digest"].is_string()
        || !held->contains("changes") || !(*held)["changes"].is_string())
      return "has a \"held\" that is not {\"digest\": TEXT, \"changes\": TEXT}";
  }
  return {};
}

json_file_store::validator pins_validator(const fs::path& file) {
  return [file = "'" + file.string() + "'"](json& doc, std::vector<std::string>& problems) {
    json kept = json::object();
    for (auto& [root, servers] : doc.items()) {
      if (!servers.is_object()) {
        problems.push_back(std::string{pins_label} + " " + file + ": the record for project \""
                           + escape_for_display(root.substr(0, 200)) + "\" is not an object; ignoring it");
        continue;
      }
      auto& project = kept[root] = json::object();
      for (auto& [name, rec] : servers.items()) {
        auto why = pin_record_problem(rec);
        if (!why.empty()) {
          problems.push_back(std::string{pins_label} + " " + file + ": the record for server \""
                             + escape_for_display(name.substr(0, 200)) + "\" " + why + "; ignoring it");
          continue;
        }
        project[name] = std::move(rec);
      }
    }
    doc = std::move(kept);
  };
}

} // namespace

definition_pin_store::definition_pin_store(fs::path file) : store_(file, pins_label, pins_validator(file)) {}

fs::path definition_pin_store::default_path(const fs::path& home, std::string_view config_dir) {
  return home / fs::path{config_dir} / "mcp-definitions.json";
}

std::optional<pin_record> definition_pin_store::get(const std::string& project_root, const std::string& server) {
  auto& data = store_.read();
  auto project = data.find(approvals_store::normalize_project_root(project_root));
  if (project == data.end()) return std::nullopt;
  auto rec = project->find(server);
  if (rec == project->end()) return std::nullopt;
  pin_record r;
  r.hash = rec->at("hash").get<std::string>();
  r.pins = pins_from_json(rec->at("pins")).value_or(definition_pins{});
  if (auto held = rec->find("held"); held != rec->end()) {
    r.held_digest = held->at("digest").get<std::string>();
    r.held_changes = held->at("changes").get<std::string>();
  }
  return r;
}

bool definition_pin_store::pin(const std::string& project_root, const std::string& server, const std::string& hash,
                               definition_kind kind, const kind_pins& listing) {
  bool pinned = false;
  auto root = approvals_store::normalize_project_root(project_root);
  store_.update([&](json& data) {
    auto& rec = data[root][server];
    if (!rec.is_object() || rec.value("hash", "") != hash) rec = json{{"hash", hash}, {"pins", json::object()}};
    auto& pins = rec["pins"];
    if (pins.contains(pins_key(kind))) return;
    json k = json::object();
    for (auto& [name, pin] : listing)
      k[name] = pin;
    pins[pins_key(kind)] = std::move(k);
    pinned = true;
  });
  return pinned;
}

bool definition_pin_store::hold(const std::string& project_root, const std::string& server, const std::string& hash,
                                const std::string& digest, const std::string& changes) {
  bool changed = false;
  auto root = approvals_store::normalize_project_root(project_root);
  store_.update([&](json& data) {
    auto project = data.find(root);
    if (project == data.end()) return;
    auto rec = project->find(server);
    if (rec == project->end() || rec->value("hash", "") != hash) return;
    if (digest.empty()) {
      changed = rec->erase("held") > 0;
      return;
    }
    json held{{"digest", digest}, {"changes", changes}};
    if (rec->value("held", json()) == held) return;
    (*rec)["held"] = std::move(held);
    changed = true;
  });
  return changed;
}

bool definition_pin_store::forget(const std::string& project_root, const std::string& server) {
  bool had = false;
  auto root = approvals_store::normalize_project_root(project_root);
  // A read first: a decision for a server never pinned writes nothing.
  auto& data = store_.read();
  auto project = data.find(root);
  if (project == data.end() || !project->contains(server)) return false;
  store_.update([&](json& d) {
    auto p = d.find(root);
    if (p == d.end()) return;
    had = p->erase(server) > 0;
    if (p->empty()) d.erase(p);
  });
  return had;
}

} // namespace mcprt
