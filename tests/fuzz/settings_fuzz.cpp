// Settings files come from whoever wrote the repository: any bytes must give
// a document or a settings_error, and everything shown from them must be
// printable. This runs the pure half of what the daemon and `mcprt explain`
// do with a file: text -> document (every scope) -> the gating actor's
// re-parse of the kept content -> the watcher's diff -> assembled scopes ->
// gating -> approval hash and fingerprint -> `explain --json` and the table.
// It aborts on anything a caller could not show safely.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fingerprint.hpp"
#include "core/gating.hpp"
#include "core/json_locate.hpp"
#include "core/settings.hpp"
#include "core/settings_schema.hpp"
#include "core/untrusted_text.hpp"
#include "tests/fuzz/fuzz_checks.hpp"
#include "core/workspace_view.hpp"

using namespace mcprt;
using mcprt::fuzz::printable;
using mcprt::fuzz::require;

namespace {

/// Printable, line breaks allowed (a table is several lines).
bool printable_lines(const std::string& s) {
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line))
    if (!printable(line)) return false;
  return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const config_scope scopes[] = {config_scope::user, config_scope::project, config_scope::workspace,
                                 config_scope::session};
  std::vector<settings_document> docs;
  for (auto scope : scopes) {
    auto doc = parse_settings_text("/ws/fuzz.json", scope, text);
    if (doc.error) {
      require(doc.error->line >= 1 && doc.error->column >= 1);
      require(printable(doc.error->message));
      require(doc.servers.empty());
    } else {
      // The gating actor rebuilds the document from the content the watcher
      // kept: it must come to the same servers, or a good file would lose
      // them on the way.
      auto again = parse_settings_value("/ws/fuzz.json", scope, doc.content, &doc);
      require(again.ok() && servers_equal(again.servers, doc.servers));
      auto fresh = parse_settings_value("/ws/fuzz.json", scope, doc.content);
      require(fresh.ok() && servers_equal(fresh.servers, doc.servers));
      // Taken over from a document of the same content: every entry moves,
      // none is parsed anew, nothing is left behind.
      auto previous = doc;
      std::vector<std::string> parsed;
      auto taken = take_settings_value("/ws/fuzz.json", scope, doc.content, previous, parsed);
      require(taken.ok() && servers_equal(taken.servers, doc.servers));
      require(parsed.empty() && previous.servers.empty());
      // From the user scope's document of the same text: another scope
      // shares no entry with it, so all is parsed anew and all left behind.
      if (!docs.empty() && docs[0].ok()) {
        auto other = docs[0];
        auto taken_over = take_settings_value("/ws/fuzz.json", scope, doc.content, other, parsed);
        require(taken_over.ok() && servers_equal(taken_over.servers, doc.servers));
        require(parsed.size() == doc.servers.size() && other.servers.size() == docs[0].servers.size());
      }
      for (auto& [name, cfg] : doc.servers) {
        require(!server_name_problem(name));
        (void)approval_hash(cfg);
        (void)connection_id(cfg);
        (void)filter_key(cfg);
      }
      // The watcher's diff against an empty and against the same content.
      auto keys = changed_keys(nlohmann::json::object(), doc.content);
      (void)should_notify(keys);
      require(changed_keys(doc.content, doc.content).empty());
      (void)dump_json(nlohmann::json{{"keys", keys}});
    }
    docs.push_back(std::move(doc));
  }

  // Other clients' formats: the same guarantees, and a Claude Code user
  // file keeps nothing but its servers.
  for (auto format : {settings_format::vscode, settings_format::claude_user, settings_format::mcp_json}) {
    auto doc = parse_settings_text("/ws/.vscode/mcp.json", config_scope::user, text, format);
    if (doc.error) {
      require(doc.error->line >= 1 && doc.error->column >= 1);
      require(printable(doc.error->message));
      require(doc.servers.empty());
      continue;
    }
    require(!doc.allowed && !doc.excluded);
    if (format == settings_format::claude_user) require(doc.content.size() <= 1);
    auto again = parse_settings_value(doc.path, doc.scope, doc.content, &doc, format);
    require(again.ok() && servers_equal(again.servers, doc.servers));
    auto fresh = parse_settings_value(doc.path, doc.scope, doc.content, nullptr, format);
    require(fresh.ok() && servers_equal(fresh.servers, doc.servers));
  }

  // Where an error would be placed, for paths the text may or may not hold.
  std::vector<std::string> path{"mcpServers"};
  if (!docs[0].servers.empty()) path.push_back(docs[0].servers.begin()->first);
  path.push_back("args");
  path.push_back("0");
  for (std::size_t n = 0; n <= path.size(); ++n) {
    auto at = locate_json_value(text, {path.begin(), path.begin() + static_cast<std::ptrdiff_t>(n)});
    require(!at || *at <= text.size());
  }
  (void)position_of(text, text.size() / 2);

  workspace_view view;
  view.workspace = "/ws";
  view.home = "/home/u";
  for (auto& d : docs)
    view.documents.push_back(d);
  std::vector<const settings_document*> layers{&docs[0], &docs[1], &docs[2]};
  view.merged = assemble(layers, docs[3].servers);
  for (auto& d : docs)
    if (d.error) view.errors.push_back(*d.error);
  gating_input in;
  in.servers = &view.merged.servers;
  in.settings_allowed = view.merged.allowed;
  in.settings_excluded = view.merged.excluded;
  // Every other server approved, so that variables are expanded too.
  in.approval = [](const server_config& c) {
    return c.name.size() % 2 ? approval_state::approved : approval_state::pending;
  };
  static const std::string secret = "fuzz-secret-value-41d7";
  variable_context ctx;
  ctx.env = [](const std::string& name) -> std::optional<std::string> {
    if (name.size() % 3 == 0) return std::nullopt;
    return name.size() % 3 == 1 ? secret : std::string("line\r\nbreak");
  };
  ctx.workspace_folder = "/ws";
  ctx.user_home = "/home/u";
  in.variables = &ctx;
  view.gating = compute_gating(in);
  for (auto& [name, e] : variable_errors_of(view.gating, view.merged.servers, view.documents)) {
    require(printable(e.message));
    view.errors.push_back(e);
  }

  auto shown = explain_json(view, true).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  require(!nlohmann::json::parse(shown, nullptr, false).is_discarded());
  std::ostringstream table;
  write_explain_table(view, true, table);
  require(printable_lines(table.str()));
  // An expanded value is a secret: what explain shows never holds one
  // (unless the file itself wrote it).
  if (text.find(secret) == std::string_view::npos) {
    require(shown.find(secret) == std::string::npos);
    require(table.str().find(secret) == std::string::npos);
  }
  return 0;
}
