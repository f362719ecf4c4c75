#pragma once

// The gateway shows an MCP client the tools, prompts and
// resources of all the workspace's servers as one server. This is the pure
// part: from what each server listed, the one catalog the client sees, and
// where each of the client's requests goes. Everything here comes from
// servers we do not trust, so every entry is checked, every count bounded,
// and no JSON shape makes it throw.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tool_sets.hpp"

namespace mcprt {

/// One configured server as the gateway sees it for one client session.
struct gateway_server_view {
  std::string name;       // configured server name
  std::string prefix;     // effective prefix; the caller resolves the default (default_gateway_prefix)
  bool available = false; // connected and admitted for this session; otherwise only its prefix counts
  /// From the repository's settings (project scope): a name a more trusted
  /// scope's server also exposes stays with that server.
  bool project = false;
  nlohmann::json capabilities = nlohmann::json::object(); // the server's initialize capabilities
  // Raw entries as the server listed them (tools after the session's filter).
  std::vector<nlohmann::json> tools, prompts, resources, resource_templates;
  /// Tools the runtime holds back (their definitions changed since the
  /// server's approval): never listed, but a call of one by its
  /// `<prefix><name>` reaches the runtime, which refuses it saying why.
  std::vector<std::string> held_tools;
};

/// An entry the catalog does not show, and why.
/// - `name_conflict`: its exposed name (or URI, for resources and
///   templates) is shown for `kept_by` (a server of a more trusted scope,
///   else one earlier by name, or the same server's earlier entry); one
///   record per entry.
/// - `invalid`: no usable name / uri / uriTemplate (missing, not a string,
///   empty, too long, a control character in it) or the entry is not an
///   object;
/// - `over_limit`: the catalog already holds gateway_limits::max_entries of
///   that kind (or, for templates, max_template_bytes_total bytes of them).
///   `invalid` and `over_limit` come as one record per server and kind, with
///   `count` and empty names, so a hostile list cannot grow this list beyond
///   one record per entry it sent.
struct gateway_left_out {
  std::string server;
  std::string kind; // "tool", "prompt", "resource", "resource_template"
  std::string name; // the server's own name, or the URI / template
  std::string exposed;
  std::string reason; // "name_conflict", "invalid", "over_limit", or a tool set's (tool_set_exclusion)
  std::string kept_by;
  std::size_t count = 1;
  std::string rule; // for "excluded": the set's exclude entry that matched
};

/// A tool shown under a shorter name than `<prefix><name>`, which is
/// longer than max_exposed_tool_name.
struct gateway_renamed {
  std::string server;
  std::string name;      // the server's own
  std::string full;      // prefix + name
  std::string exposed;   // what the client sees
};

/// Where a request goes: the server, and the name the server itself uses
/// (its own tool or prompt name; for resources the URI or template).
struct gateway_route {
  std::string server;
  std::string name;
  friend bool operator==(const gateway_route& a, const gateway_route& b) {
    return a.server == b.server && a.name == b.name;
  }
};

/// Which of the client's lists changed: send notifications/<kind>/list_changed
/// for each (resources covers the templates too, as in MCP).
struct gateway_list_changes {
  bool tools = false, prompts = false, resources = false;
  bool any() const { return tools || prompts || resources; }
};

struct gateway_limits {
  /// Entries of one kind in the whole catalog; what a client is shown
  /// stays bounded whatever the servers list.
  std::size_t max_entries = 10000;
  /// MCP (2025-11-25) asks for tool names of 1 to 128 characters from
  /// [A-Za-z0-9_.-]; that is 128 bytes, so no valid name is refused.
  /// Servers that stretch the rule (non-ASCII names) still get through;
  /// only absurd names are refused, which keeps map keys and prefix
  /// guesses cheap.
  std::size_t max_name_bytes = 512;
  std::size_t max_uri_bytes = 8192;
  /// Matching a URI costs up to (URI length) x (template length) for each
  /// template tried, so templates stay short and their sum is bounded: a
  /// hostile server's templates slow every read by at most
  /// max_uri_bytes x max_template_bytes_total steps.
  std::size_t max_template_bytes = 1024;
  std::size_t max_template_bytes_total = 8192;
};

/// "<server>__": the prefix a server gets when its entry sets none.
std::string default_gateway_prefix(std::string_view server);

/// RFC 6570 templates, read backwards: is `uri` an expansion of
/// `uri_template`? Expressions of every operator (level 1 `{var}`,
/// `{+var}`, `{#var}`, `{.var}`, `{/var}`, `{;var}`, `{?a,b}`, `{&a}`,
/// with `:n` and `*` modifiers) match the characters their expansion can
/// hold, and an undefined variable may expand to nothing. That decides
/// whether a URI belongs to a template; it does not extract values (so
/// `{?a}` also accepts `?b=1`). Bytes >= 0x80 count as unreserved (IRIs).
/// An invalid template matches nothing. Linear in the URI for each
/// template position: no backtracking blow-up.
bool uri_template_matches(std::string_view uri_template, std::string_view uri);

/// Whether `uri_template` parses as an RFC 6570 template (braces balanced,
/// known operators, variable names of [A-Za-z0-9_.%]).
bool uri_template_valid(std::string_view uri_template);

/// The catalog of one gateway session. Servers are taken in byte order of
/// their names, and each server's entries in its own order; the first to
/// claim an exposed name (or a URI) keeps it. Servers that are not
/// available contribute nothing but their prefix (for guess_server_of_tool).
///
/// Tool names the client sees are at most max_exposed_tool_name bytes: a
/// longer `<prefix><name>` is shown as shortened_tool_name of it, the next
/// attempt when that is taken (by another tool's name or shortening), so
/// every tool keeps a name of its own. `tools/list` is in byte order of the
/// names shown: a server that reorders its list, or one tool more, does not
/// reshuffle what a client (and its prompt cache) holds.
class gateway_catalog {
public:
  /// A server with an empty name, or with a name already seen, is ignored
  /// (settings give neither). With `set`, only its servers and tools are
  /// shown (prompts and resources of its servers); what it keeps out is in
  /// left_out with the set's reason.
  static gateway_catalog build(std::vector<gateway_server_view> servers, const gateway_limits& limits = {},
                               const tool_set* set = nullptr);

  /// {"tools": [...]}: each tool as its server listed it, `name` replaced
  /// by the exposed name. Prompts alike. Resources and templates unchanged.
  nlohmann::json tools_list() const;
  nlohmann::json prompts_list() const;
  nlohmann::json resources_list() const;
  nlohmann::json resource_templates_list() const; // {"resourceTemplates": [...]}

  std::optional<gateway_route> tool(std::string_view exposed) const;
  /// A held-back tool (gateway_server_view::held_tools) by the name it
  /// would be shown under, when no shown tool has that name.
  std::optional<gateway_route> held_tool(std::string_view exposed) const;
  /// The tool as tools/list shows it (its inputSchema among the rest), or
  /// null when the catalog has no such tool.
  const nlohmann::json* tool_object(std::string_view exposed) const;
  std::optional<gateway_route> prompt(std::string_view exposed) const;
  /// resources/read, subscribe, unsubscribe: the server that listed `uri`,
  /// else the first server (by name, then in its order) with a template
  /// matching it.
  std::optional<std::string> resource_server(std::string_view uri) const;
  /// completion/complete's `ref`: ref/prompt by exposed name (route name:
  /// the server's own prompt name); ref/resource by a listed template, a
  /// listed URI, then a template matching it (route name: the uri as given).
  std::optional<gateway_route> completion(const nlohmann::json& ref) const;

  /// Which configured server a tool name that is not (or no longer) shown
  /// belongs to, so the caller can say "server X is out: reason, remedy".
  /// A shown tool gives its own server. Otherwise the longest non-empty
  /// prefix the name starts with (and is longer than); among servers with
  /// that prefix an unavailable one first, then by name. Only when no such
  /// prefix matches, an unavailable server with the empty prefix (an
  /// available one would show the tool if it had it).
  std::optional<std::string> guess_server_of_tool(std::string_view exposed) const;

  const std::vector<gateway_left_out>& left_out() const { return left_out_; }
  const std::vector<gateway_renamed>& renamed() const { return renamed_; }

  /// What the gateway advertises in initialize. tools, prompts and
  /// resources always, with listChanged: a client reads capabilities once
  /// and servers may arrive later. resources.subscribe when an available
  /// server offers it. logging always: the gateway answers
  /// logging/setLevel itself, remembers the level for servers that come
  /// later, and has its own messages to log. completions when an available
  /// server offers them (a completion nobody can route is an error anyway).
  nlohmann::json capabilities() const;

  /// Available servers (by name) offering a capability: a top-level key
  /// ("logging", "completions") or a dotted path ("resources.subscribe");
  /// offered means present and neither null nor false.
  std::vector<std::string> servers_with(std::string_view capability) const;

  /// Which lists differ, comparing the whole exposed lists (order and
  /// every field), so a client is told exactly once per real change.
  static gateway_list_changes diff(const gateway_catalog& before, const gateway_catalog& after);

private:
  struct server_entry {
    std::string name, prefix;
    bool available = false;
    nlohmann::json capabilities;
  };
  struct template_entry {
    std::string uri_template, server;
  };
  std::vector<server_entry> servers_; // by name
  nlohmann::json tools_ = nlohmann::json::array(), prompts_ = nlohmann::json::array(),
                 resources_ = nlohmann::json::array(), templates_ = nlohmann::json::array();
  std::map<std::string, gateway_route, std::less<>> tool_routes_, prompt_routes_, held_routes_;
  std::map<std::string, std::string, std::less<>> resource_owner_, template_owner_;
  std::vector<template_entry> template_order_; // valid templates, in matching order
  std::size_t max_uri_bytes_ = 0;
  std::vector<gateway_left_out> left_out_;
  std::vector<gateway_renamed> renamed_;
};

} // namespace mcprt
