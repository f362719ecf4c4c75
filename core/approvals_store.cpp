#include "core/approvals_store.hpp"

#include "core/untrusted_text.hpp"

#include <stdexcept>
#include <system_error>
#include <utility>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mcprt {

std::string to_string(approval_state s) {
  switch (s) {
    case approval_state::pending: return "pending";
    case approval_state::approved: return "approved";
    case approval_state::rejected: return "rejected";
  }
  return "pending";
}

std::optional<approval_state> parse_approval_state(std::string_view s) {
  if (s == "pending") return approval_state::pending;
  if (s == "approved") return approval_state::approved;
  if (s == "rejected") return approval_state::rejected;
  return std::nullopt;
}

namespace {

// Empty when `rec` is a well-formed server record, else what is wrong.
std::string approval_record_problem(const json& rec) {
  if (!rec.is_object()) return std::string{"is a "} + rec.type_name() + ", not an object";
  auto hash = rec.find("hash");
  if (hash == rec.end() || !hash->is_string() || hash->get_ref<const std::string&>().empty())
    return "has no non-empty string \"hash\"";
  auto status = rec.find("status");
  if (status == rec.end() || !status->is_string()) return "has no string \"status\"";
  auto parsed = parse_approval_state(status->get_ref<const std::string&>());
  if (!parsed || *parsed == approval_state::pending)
    return "has status \"" + escape_for_display(status->get<std::string>().substr(0, 40))
           + "\" (expected \"approved\" or \"rejected\")";
  return {};
}

// Text from the file, quoted in a warning that reaches a terminal or a log.
std::string shown_approval_text(const std::string& text) {
  return escape_for_display(text.substr(0, 200));
}

constexpr const char* approvals_label = "approvals file";

// Keeps only well-formed records, so that state() can trust every field it
// finds; each dropped record is a problem, which backs the file up before
// the next write drops it for good.
json_file_store::validator approvals_validator(const fs::path& file) {
  return [file = "'" + file.string() + "'"](json& doc, std::vector<std::string>& problems) {
    json kept = json::object();
    for (auto& [root, servers] : doc.items()) {
      if (!servers.is_object()) {
        problems.push_back(std::string{approvals_label} + " " + file + ": the record for project \"" + shown_approval_text(root)
                           + "\" is a " + servers.type_name() + ", not an object; ignoring it");
        continue;
      }
      auto& project = kept[root] = json::object();
      for (auto& [name, rec] : servers.items()) {
        auto why = approval_record_problem(rec);
        if (!why.empty()) {
          problems.push_back(std::string{approvals_label} + " " + file + ": the record for server \"" + shown_approval_text(name)
                             + "\" in project \"" + shown_approval_text(root) + "\" " + why + "; ignoring it");
          continue;
        }
        project[name] = std::move(rec);
      }
    }
    doc = std::move(kept);
  };
}

} // namespace

approvals_store::approvals_store(fs::path file) : store_(file, approvals_label, approvals_validator(file)) {}

fs::path approvals_store::default_path(const fs::path& home, std::string_view config_dir) {
  return home / fs::path{config_dir} / "mcp-approvals.json";
}

std::string approvals_store::normalize_project_root(const std::string& project_root) {
  std::error_code ec;
  auto p = fs::absolute(fs::path{project_root}, ec);
  if (ec) p = fs::path{project_root};
  p = p.lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p.string();
}

void approvals_store::reload() {
  store_.reload();
}

std::vector<std::string> approvals_store::take_warnings() {
  return store_.take_warnings();
}

approval_state approvals_store::state(const std::string& project_root, const std::string& server,
                                      const std::string& config_hash) {
  auto& data = store_.read();
  auto project = data.find(normalize_project_root(project_root));
  if (project == data.end()) return approval_state::pending;
  auto rec = project->find(server);
  if (rec == project->end()) return approval_state::pending;
  // The validator kept only well-formed records, so these fields exist and
  // parse.
  if (rec->at("hash").get_ref<const std::string&>() != config_hash) return approval_state::pending;
  return parse_approval_state(rec->at("status").get_ref<const std::string&>()).value_or(approval_state::pending);
}

void approvals_store::set(const std::string& project_root, const std::string& server,
                          const std::string& config_hash, approval_state decided) {
  if (decided == approval_state::pending)
    throw std::invalid_argument(
      "approvals_store::set: a decision must be approved or "
      "rejected, not pending");
  if (config_hash.empty()) throw std::invalid_argument("approvals_store::set: empty config hash");
  auto root = normalize_project_root(project_root);
  store_.update([&](json& data) {
    data[root][server] = json{{"hash", config_hash}, {"status", to_string(decided)}};
  });
}

} // namespace mcprt
