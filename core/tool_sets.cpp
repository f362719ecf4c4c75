#include "core/tool_sets.hpp"

#include <cstdint>

#include "core/patterns.hpp"
#include "core/settings.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

namespace {

using nlohmann::json;

bool set_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'
         || c == '.';
}

bool read_globs(const json& entry, const char* key, const std::string& where, std::vector<std::string>& out,
                tool_sets_parse& r, const std::string& set_name) {
  auto i = entry.find(key);
  if (i == entry.end() || i->is_null()) return true;
  auto read = read_pattern_list(*i, where + "." + key, {"mcp", "toolSets", set_name, key});
  if (read.error.empty()) {
    // An empty pattern in a set is a mistake to name, not to drop: it
    // would silently change what the set shows.
    for (std::size_t n = 0; n < read.patterns.size(); ++n)
      if (read.patterns[n].empty()) {
        read.error = where + "." + key + "[" + std::to_string(n) + "]: empty";
        read.error_path = {"mcp", "toolSets", set_name, key, std::to_string(n)};
        break;
      }
  }
  if (!read.error.empty()) {
    r.error = std::move(read.error);
    r.error_path = std::move(read.error_path);
    return false;
  }
  out = std::move(read.patterns);
  return true;
}

/// `TOOL` or `SERVER/TOOL`: does it match the server's tool?
bool tool_glob_matches(std::string_view glob, std::string_view server, std::string_view tool) {
  auto slash = glob.find('/');
  if (slash == std::string_view::npos) return glob_match(glob, tool);
  return glob_match(glob.substr(0, slash), server) && glob_match(glob.substr(slash + 1), tool);
}

/// Could an entry of this form keep a whole server out (`SERVER/*`)?
bool excludes_whole_server(std::string_view glob, std::string_view server) {
  auto slash = glob.find('/');
  return slash != std::string_view::npos && glob.substr(slash + 1) == "*" && glob_match(glob.substr(0, slash), server);
}

uint64_t fnv1a(std::string_view s, unsigned attempt) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : s)
    mix(static_cast<unsigned char>(c));
  for (int i = 0; i < 4; ++i)
    mix(static_cast<unsigned char>((attempt >> (8 * i)) & 0xff));
  return h;
}

} // namespace

bool valid_tool_set_name(std::string_view name) {
  if (name.empty() || name.size() > max_tool_set_name_bytes || name == "." || name == "..") return false;
  for (char c : name)
    if (!set_name_char(c)) return false;
  return true;
}

tool_sets_parse parse_tool_sets(const json& mcp, std::string_view source, std::string_view scope) {
  tool_sets_parse r;
  auto sets = mcp.find("toolSets");
  if (sets == mcp.end() || sets->is_null()) return r;
  auto fail = [&](std::string msg, std::vector<std::string> path) {
    r.sets.clear();
    r.error = std::move(msg);
    r.error_path = std::move(path);
    return r;
  };
  if (!sets->is_object()) return fail("mcp.toolSets: expected an object of named sets", {"mcp", "toolSets"});
  if (sets->size() > max_tool_sets_per_file)
    return fail("mcp.toolSets: more than " + std::to_string(max_tool_sets_per_file) + " sets in one file",
                {"mcp", "toolSets"});
  for (auto& [name, entry] : sets->items()) {
    // The name is a key of the file: shown escaped, and only when valid.
    if (!valid_tool_set_name(name))
      return fail(std::string("mcp.toolSets: a set's name is 1 to 64 of A-Z a-z 0-9 _ . - (it is a path segment of "
                              "/mcp/<set>): '")
                    + escape_for_display(name.substr(0, 80)) + "'",
                  {"mcp", "toolSets", name});
    auto where = "mcp.toolSets." + name;
    if (!entry.is_object())
      return fail(where + ": expected an object with servers, tools, exclude", {"mcp", "toolSets", name});
    for (auto& [key, value] : entry.items()) {
      (void)value;
      if (key != "servers" && key != "tools" && key != "exclude" && key != "description")
        return fail(where + ": unknown key '" + escape_for_display(key.substr(0, 80)) + "' (known: servers, tools, exclude, description)",
                    {"mcp", "toolSets", name, key});
    }
    tool_set s;
    s.name = name;
    s.source = std::string(source);
    s.scope = std::string(scope);
    if (auto d = entry.find("description"); d != entry.end() && !d->is_null()) {
      if (!d->is_string() || d->get_ref<const std::string&>().size() > 1024)
        return fail(where + ".description: expected a string of at most 1024 bytes",
                    {"mcp", "toolSets", name, "description"});
      s.description = replace_invalid_utf8(d->get<std::string>());
    }
    if (!read_globs(entry, "servers", where, s.servers, r, name) || !read_globs(entry, "tools", where, s.tools, r, name)
        || !read_globs(entry, "exclude", where, s.exclude, r, name)) {
      r.sets.clear();
      return r;
    }
    r.sets.emplace(name, std::move(s));
  }
  return r;
}

std::optional<tool_set_exclusion> server_out_of_set(const tool_set& set, std::string_view server) {
  if (!set.servers.empty() && !matches_any(set.servers, server)) return tool_set_exclusion{"server_not_in_set", ""};
  for (auto& e : set.exclude)
    if (excludes_whole_server(e, server)) return tool_set_exclusion{"excluded", e};
  return std::nullopt;
}

std::optional<tool_set_exclusion> tool_out_of_set(const tool_set& set, std::string_view server,
                                                  std::string_view tool) {
  if (auto out = server_out_of_set(set, server)) return out;
  for (auto& e : set.exclude)
    if (tool_glob_matches(e, server, tool)) return tool_set_exclusion{"excluded", e};
  if (set.tools.empty()) return std::nullopt;
  for (auto& t : set.tools)
    if (tool_glob_matches(t, server, tool)) return std::nullopt;
  return tool_set_exclusion{"not_in_set", ""};
}

std::string shortened_tool_name(std::string_view exposed, unsigned attempt, std::size_t max_bytes) {
  if (attempt == 0 && exposed.size() <= max_bytes) return std::string(exposed);
  static constexpr char hex[] = "0123456789abcdef";
  auto h = fnv1a(exposed, attempt);
  std::string tail = "_";
  for (int i = 0; i < 8; ++i)
    tail += hex[(h >> (60 - 4 * i)) & 0xf];
  std::size_t keep = max_bytes > tail.size() ? max_bytes - tail.size() : 0;
  if (keep > exposed.size()) keep = exposed.size();
  // Never cut a UTF-8 sequence: back up to the start of the one cut into.
  while (keep > 0 && keep < exposed.size() && (static_cast<unsigned char>(exposed[keep]) & 0xc0) == 0x80)
    --keep;
  return std::string(exposed.substr(0, keep)) + tail;
}

} // namespace mcprt
