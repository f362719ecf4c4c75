#pragma once

// Definitions pinned at approval: the first listing of an approved
// server's tools (prompts, resources) after its approval is what the owner
// approved. A digest of each entry's fields is kept with the approval; a
// later listing is compared with it, and what differs (a new entry, a
// changed field) is held back until the owner approves again. Pure logic:
// the gating actor stores the pins, a session's reconciler filters by them.

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/server_config.hpp"

namespace mcprt {

enum class definition_kind { tool, prompt, resource };

/// "tool", "prompt", "resource".
std::string to_string(definition_kind k);

/// The key a kind's pins are stored under: "tools", "prompts", "resources".
std::string pins_key(definition_kind k);

/// The fields of an entry that are pinned: a tool's name, title,
/// description, inputSchema, outputSchema and annotations; a prompt's name,
/// title, description and arguments; a resource's uri, name, title,
/// description, mimeType and annotations.
const std::vector<std::string>& pinned_fields(definition_kind k);

/// One entry's pin: a digest (SHA-256 over the canonical JSON, sorted keys)
/// per pinned field the entry was listed with. A field it did not have is
/// absent, so adding one is a change.
using definition_pin = std::map<std::string, std::string>;

/// One kind's pins, by name (a resource by its uri).
using kind_pins = std::map<std::string, definition_pin>;

/// Every kind pinned so far, by pins_key. A kind that is absent was not
/// listed since the approval: its first listing pins it.
using definition_pins = std::map<std::string, kind_pins>;

/// The name an entry is known by (a resource: its uri); empty when it has
/// none (such an entry is never shown).
std::string definition_name(definition_kind k, const nlohmann::json& def);

definition_pin pin_of(definition_kind k, const nlohmann::json& def);

/// The pins of a listing. Of two entries with one name the first is kept,
/// as the catalog keeps it.
kind_pins pin_listing(definition_kind k, const std::vector<nlohmann::json>& defs);

/// A digest of a whole listing's pins: equal listings, equal digests.
std::string listing_digest(const kind_pins& pins);

struct definition_change {
  enum class what { added, removed, changed };
  definition_kind kind = definition_kind::tool;
  std::string name;
  what change = what::changed;
  /// The fields that differ (added, removed or changed), for `changed`.
  std::vector<std::string> fields;
  /// The entry as offered now (null for `removed`), to quote its new text.
  nlohmann::json now;
};

/// A listing compared with the pins.
struct definitions_check {
  /// Names not to show or call: added since the approval, or changed.
  std::set<std::string> held;
  /// Sorted by name; empty when the listing is what was approved.
  std::vector<definition_change> changes;
};

definitions_check check_definitions(definition_kind k, const kind_pins& pinned,
                                    const std::vector<nlohmann::json>& offered);

/// The changes in words, for an event, a log line and `explain`: what was
/// added, removed or changed and, for a changed description or title, its
/// new text. Everything the server wrote is escaped (escape_for_display)
/// and each quoted text cut to `max_quote_bytes`; the whole to
/// `max_bytes`, ending in "..." when cut.
std::string describe_changes(const std::vector<definition_change>& changes, std::size_t max_bytes = 2048,
                             std::size_t max_quote_bytes = 200);

/// The message of a call to a held-back tool.
std::string held_back_call_message(const std::string& server, const std::string& tool, bool added);

// -- which servers are pinned ----------------------------------------------------

/// `mcp.pinDefinitions`: which servers' definitions are pinned.
enum class pin_mode { project, all, off };

std::string to_string(pin_mode m);
std::optional<pin_mode> parse_pin_mode(std::string_view s);

struct pin_policy {
  bool on = false;
  /// Why, in a few words, for `explain`.
  std::string why;
  /// A setting that asked for less and is not honoured (empty: none).
  std::string warning;
};

/// Whether a server's definitions are pinned. A server of a gated scope (a
/// repository's `.mcp.json` or workspace settings) is pinned unless the
/// user settings say `"off"`: neither its own `"pinDefinitions": false` nor
/// the workspace settings' `mcp.pinDefinitions` can turn it off (they come
/// with the repository), and each gives a warning. A server of the user's
/// own scopes is pinned when its entry says `"pinDefinitions": true`, or,
/// without that key, when `mcp.pinDefinitions` is `"all"` (in user or
/// workspace settings: turning it on is always honoured).
pin_policy pinning_for(config_scope scope, std::optional<bool> entry, std::optional<pin_mode> user_mode,
                       std::optional<pin_mode> workspace_mode);

// -- the store ---------------------------------------------------------------------

/// The JSON form of a server's pins (`{"tools": {NAME: {FIELD: DIGEST}}}`)
/// and back; nullopt for anything of another shape.
nlohmann::json pins_to_json(const definition_pins& pins);
std::optional<definition_pins> pins_from_json(const nlohmann::json& j);

} // namespace mcprt
