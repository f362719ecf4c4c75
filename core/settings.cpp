#include "core/settings.hpp"

#include "core/fingerprint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json_locate.hpp"
#include "core/patterns.hpp"
#include "core/untrusted_text.hpp"

namespace mcprt {

using nlohmann::json;
namespace fs = std::filesystem;

std::optional<profile> profile::parse(std::string_view name) {
  if (name == "mcprt") return profile{"mcprt", ".mcprt"};
  if (name == "qwen") return profile{"qwen", ".qwen"};
  if (name == "gemini") return profile{"gemini", ".gemini"};
  // Other clients' directories hold their own state: mcprt keeps its
  // approvals and tokens under .mcprt for them.
  if (name == "vscode") return profile{"vscode", ".mcprt"};
  if (name == "cursor") return profile{"cursor", ".mcprt"};
  if (name == "claude") return profile{"claude", ".mcprt"};
  return std::nullopt;
}

const std::vector<std::string>& profile::names() {
  static const std::vector<std::string> all{"mcprt", "qwen", "gemini", "vscode", "cursor", "claude"};
  return all;
}

std::string to_string(settings_format f) {
  switch (f) {
    case settings_format::settings: return "settings";
    case settings_format::mcp_json: return "mcp.json";
    case settings_format::vscode: return "vscode";
    case settings_format::claude_user: return "claude";
  }
  return "settings";
}

settings_format default_format(config_scope scope) {
  return scope == config_scope::user || scope == config_scope::workspace ? settings_format::settings
                                                                         : settings_format::mcp_json;
}

settings_format format_of(const std::vector<settings_source>& sources, const std::string& path,
                          config_scope scope) {
  for (auto& s : sources)
    if (s.scope == scope && s.path.string() == path) return s.format;
  return default_format(scope);
}

std::optional<fs::path> resolve_home(std::string_view home_flag, const char* home_env, std::string* error) {
  std::string_view chosen = home_flag;
  if (chosen.empty() && home_env) chosen = home_env;
  if (chosen.empty()) {
    if (error) *error = "no home directory: set $HOME or pass --home";
    return std::nullopt;
  }
  std::error_code ec;
  auto home = fs::absolute(fs::path(chosen), ec);
  if (ec) {
    if (error) *error = "cannot resolve the home directory: " + ec.message();
    return std::nullopt;
  }
  return home.lexically_normal();
}

std::vector<settings_source> settings_sources(const fs::path& home, const fs::path& workspace, const profile& p) {
  using f = settings_format;
  auto user = config_scope::user;
  auto project = config_scope::project;
  if (p.name == "vscode")
    return {{user, home / ".config" / "Code" / "User" / "mcp.json", f::vscode},
            {project, workspace / ".vscode" / "mcp.json", f::vscode}};
  if (p.name == "cursor")
    return {{user, home / ".cursor" / "mcp.json", f::mcp_json}, {project, workspace / ".cursor" / "mcp.json", f::mcp_json}};
  if (p.name == "claude")
    return {{user, home / ".claude.json", f::claude_user}, {project, workspace / ".mcp.json", f::mcp_json}};
  return {{user, home / p.dir_name / "settings.json", f::settings},
          {project, workspace / ".mcp.json", f::mcp_json},
          {config_scope::workspace, workspace / p.dir_name / "settings.json", f::settings}};
}

namespace {

/// The text a position is counted in: without the byte-order mark, which
/// editors do not show as a character.
struct settings_text {
  std::string_view text; // as read
  std::size_t bom = 0;   // bytes of byte-order mark at its start

  explicit settings_text(std::string_view t) : text(t) {
    if (text.substr(0, 3) == "\xEF\xBB\xBF") bom = 3;
  }
  std::string_view body() const { return text.substr(bom); }

  /// Position of a byte offset in `text`.
  text_position at(std::size_t offset) const {
    return position_of(body(), offset > bom ? offset - bom : 0);
  }
};

settings_document failed_document(settings_document doc, settings_error err) {
  doc.content = json::object();
  doc.servers.clear();
  doc.allowed.reset();
  doc.excluded.reset();
  doc.tool_sets.clear();
  doc.pin_definitions.reset();
  doc.error = std::move(err);
  return doc;
}

// Reads an array of strings at `mcp.<key>`; returns false (and fills `err`)
// when present with the wrong type.
bool read_list(const json& mcp, const char* key, std::optional<std::vector<std::string>>& out,
               std::string& err, std::vector<std::string>& err_path) {
  auto i = mcp.find(key);
  if (i == mcp.end() || i->is_null()) return true;
  auto read = read_pattern_list(*i, std::string("mcp.") + key, {"mcp", key});
  if (!read.error.empty()) {
    err = std::move(read.error);
    err_path = std::move(read.error_path);
    return false;
  }
  // Empty entries would match nothing and only confuse the lists.
  auto& xs = read.patterns;
  xs.erase(std::remove(xs.begin(), xs.end(), std::string()), xs.end());
  out = std::move(xs);
  return true;
}

/// Where a parse may take unchanged entries from: copied out of a document
/// that stays, or moved out of one that is being replaced (then the names
/// parsed anew are recorded).
struct earlier_parse {
  const settings_document* copy_from = nullptr;
  settings_document* take_from = nullptr;
  std::vector<std::string>* fresh = nullptr;
};

/// The servers of `entries` into `out`, built on the map `from` held:
/// unchanged entries stay where they are, untouched. The entries edited or
/// gone end up in `from`, the names parsed anew in `fresh`.
/// JSON objects iterate in the server map's order, so one walk along both
/// meets every name.
std::optional<config_error> take_servers(server_map& out, const json& entries, settings_document& from,
                                         std::vector<std::string>& fresh, const std::string& path,
                                         config_scope scope, const std::string& key) {
  out = std::move(from.servers);
  from.servers.clear();
  auto at = out.begin();
  auto drop = [&](server_map::iterator i) {
    auto next = std::next(i);
    from.servers.insert(from.servers.end(), out.extract(i));
    return next;
  };
  for (auto& [name, value] : entries.items()) {
    while (at != out.end() && at->first < name)
      at = drop(at); // gone from the file
    bool known = at != out.end() && at->first == name;
    if (known && at->second.scope == scope && at->second.spec == value) {
      if (at->second.source != path) at->second.source = path;
      ++at;
      continue;
    }
    auto r = parse_server_config(name, value, scope, {key, name});
    if (r.error) return std::move(r.error);
    r.config->source = path;
    fresh.push_back(name);
    if (known) {
      from.servers.emplace_hint(from.servers.end(), name, std::move(at->second));
      at->second = std::move(*r.config);
      ++at;
    } else {
      out.emplace_hint(at, name, std::move(*r.config));
    }
  }
  while (at != out.end())
    at = drop(at);
  return std::nullopt;
}

/// The half of parsing that works on the JSON value: the servers and the
/// `mcp` lists. `error_at(path, message)` places an error.
template <class ErrorAt>
settings_document fill_document(settings_document doc, json parsed, earlier_parse earlier,
                                std::size_t max_servers, ErrorAt error_at_path) {
  auto scope = doc.scope;
  auto fail = [&](const std::vector<std::string>& where, std::string msg) {
    auto err = error_at_path(where, std::move(msg));
    return failed_document(std::move(doc), std::move(err));
  };
  const std::string key = doc.format == settings_format::vscode ? "servers" : "mcpServers";
  if (auto servers = parsed.find(key); servers != parsed.end() && !servers->is_null()) {
    if (!servers->is_object())
      return fail({key}, key + ": expected an object");
    if (servers->size() > max_servers)
      return fail({key}, key + ": more than " + std::to_string(max_servers) + " servers in one file");
    if (auto* from = earlier.take_from) {
      if (auto err = take_servers(doc.servers, *servers, *from, *earlier.fresh, doc.path, scope, key))
        return fail(err->path, err->path_string() + ": " + err->message);
    } else {
      for (auto& [name, value] : servers->items()) {
        // An entry whose JSON did not change keeps its parse (and its
        // fingerprint): re-parsing 10,000 servers for one edit is waste.
        if (auto* from = earlier.copy_from) {
          auto p = from->servers.find(name);
          if (p != from->servers.end() && p->second.scope == scope && p->second.spec == value) {
            auto c = p->second;
            c.source = doc.path;
            doc.servers.emplace_hint(doc.servers.end(), name, std::move(c));
            continue;
          }
        }
        auto r = parse_server_config(name, value, scope, {key, name});
        if (r.error)
          return fail(r.error->path, r.error->path_string() + ": " + r.error->message);
        r.config->source = doc.path;
        doc.servers.emplace_hint(doc.servers.end(), name, std::move(*r.config));
      }
    }
  }

  // Only settings.json files carry the lists; the other formats define
  // servers.
  if (doc.format == settings_format::settings) {
    if (auto mcp = parsed.find("mcp"); mcp != parsed.end() && !mcp->is_null()) {
      if (!mcp->is_object())
        return fail({"mcp"}, "mcp: expected an object");
      std::string err;
      std::vector<std::string> err_path;
      if (!read_list(*mcp, "allowed", doc.allowed, err, err_path)
          || !read_list(*mcp, "excluded", doc.excluded, err, err_path))
        return fail(err_path, err);
      auto sets = parse_tool_sets(*mcp, doc.path, to_string(scope));
      if (!sets.error.empty()) return fail(sets.error_path, sets.error);
      doc.tool_sets = std::move(sets.sets);
      if (auto sb = mcp->find("sandbox"); sb != mcp->end() && !sb->is_null()) {
        auto mode = sb->is_string() ? parse_sandbox_default(sb->get<std::string>()) : std::nullopt;
        if (!mode) return fail({"mcp", "sandbox"}, "mcp.sandbox: expected \"project\", \"all\" or \"off\"");
        doc.default_sandbox = mode;
      }
      if (auto sf = mcp->find("sandboxFor"); sf != mcp->end() && !sf->is_null()) {
        if (!sf->is_object()) return fail({"mcp", "sandboxFor"}, "mcp.sandboxFor: expected an object of server names");
        if (sf->size() > max_servers_per_file)
          return fail({"mcp", "sandboxFor"}, "mcp.sandboxFor: more than " + std::to_string(max_servers_per_file) + " entries");
        for (auto& [name, v] : sf->items()) {
          auto r = parse_sandbox_spec(v, {"mcp", "sandboxFor", name});
          if (r.error) {
            config_error e{r.error_path, *r.error, r.index_last};
            return fail(r.error_path, e.path_string() + ": " + *r.error);
          }
          doc.sandbox_for.emplace(name, std::move(*r.spec));
        }
      }
      if (auto pin = mcp->find("pinDefinitions"); pin != mcp->end() && !pin->is_null()) {
        auto mode = pin->is_string() ? parse_pin_mode(pin->get<std::string>()) : std::nullopt;
        if (!mode) return fail({"mcp", "pinDefinitions"}, "mcp.pinDefinitions: expected \"project\", \"all\" or \"off\"");
        doc.pin_definitions = mode;
      }
    }
  }
  if (doc.format == settings_format::claude_user) {
    // The rest of ~/.claude.json (history, caches, per-project state) can be
    // megabytes that change on every use of that client: keep what we read.
    auto kept = json::object();
    if (auto servers = parsed.find(key); servers != parsed.end()) kept[key] = std::move(*servers);
    parsed = std::move(kept);
  }
  doc.content = std::move(parsed);
  return doc;
}

std::string describe_file_type(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, expected a JSON file";
  const char* what = S_ISFIFO(mode)   ? "a FIFO, "
                     : S_ISCHR(mode)  ? "a character device, "
                     : S_ISBLK(mode)  ? "a block device, "
                     : S_ISSOCK(mode) ? "a socket, "
                                      : "";
  return std::string("is ") + what + "not a regular file: settings are read only from regular files";
}

std::string too_large(std::size_t max_bytes) {
  auto size = max_bytes % (1u << 20) == 0 ? std::to_string(max_bytes >> 20) + " MiB"
                                          : std::to_string(max_bytes) + " bytes";
  return "larger than " + size + ", not read";
}

std::string settings_errno_text(int e) {
  return std::generic_category().message(e); // strerror_r underneath: thread-safe
}

} // namespace

settings_document parse_settings_text(std::string path, config_scope scope, std::string_view text,
                                      std::optional<settings_format> format) {
  settings_document doc;
  doc.path = std::move(path);
  doc.scope = scope;
  doc.format = format.value_or(default_format(scope));
  doc.exists = true;
  settings_text src(text);
  // A copy: `doc` is moved into fill_document before errors are placed.
  auto where = doc.path;
  auto error_at = [&](std::size_t offset, std::string msg) {
    auto pos = src.at(offset);
    return settings_error{where, pos.line, pos.column, std::move(msg)};
  };
  // An empty file is what a truncating save looks like halfway through; it
  // is reported, not taken as "no servers".
  json_limits limits;
  limits.max_bytes = max_settings_bytes;
  limits.max_depth = max_settings_depth;
  limits.allow_comments = true;
  limits.replace_invalid_utf8 = false;
  auto parsed = parse_bounded_json(src.body(), limits);
  if (!parsed.ok()) {
    auto err = error_at(src.bom + parsed.error->offset, "invalid JSON: " + parsed.error->message);
    return failed_document(std::move(doc), std::move(err));
  }
  if (!parsed.value.is_object()) {
    auto err = error_at(src.bom, "expected a JSON object at the top level");
    return failed_document(std::move(doc), std::move(err));
  }
  return fill_document(std::move(doc), std::move(parsed.value), {}, max_servers_per_file,
                       [&](const std::vector<std::string>& p, std::string msg) {
                         auto off = locate_json_value(text, p);
                         return error_at(off ? *off : src.bom, std::move(msg));
                       });
}

namespace {

settings_document document_of_value(std::string path, config_scope scope, nlohmann::json content,
                                    earlier_parse earlier, std::optional<settings_format> format) {
  settings_document doc;
  doc.path = std::move(path);
  doc.scope = scope;
  doc.format = format.value_or(default_format(scope));
  doc.exists = true;
  auto where = doc.path;
  if (!content.is_object())
    return failed_document(std::move(doc), settings_error{where, 0, 0, "expected a JSON object at the top level"});
  return fill_document(std::move(doc), std::move(content), earlier, SIZE_MAX,
                       [&](const std::vector<std::string>&, std::string msg) {
                         return settings_error{where, 0, 0, std::move(msg)};
                       });
}

} // namespace

settings_document parse_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                       const settings_document* previous, std::optional<settings_format> format) {
  earlier_parse earlier;
  earlier.copy_from = previous;
  return document_of_value(std::move(path), scope, std::move(content), earlier, format);
}

settings_document take_settings_value(std::string path, config_scope scope, nlohmann::json content,
                                      settings_document& previous, std::vector<std::string>& fresh,
                                      std::optional<settings_format> format) {
  earlier_parse earlier;
  earlier.take_from = &previous;
  earlier.fresh = &fresh;
  return document_of_value(std::move(path), scope, std::move(content), earlier, format);
}

settings_read read_settings_bytes(const fs::path& path, std::size_t max_bytes) {
  settings_read out;
  auto fail = [&](std::string why) {
    out.result = settings_read::outcome::failed;
    out.reason = std::move(why);
    out.bytes.clear();
    out.bytes.shrink_to_fit();
    return out;
  };
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return out; // missing: no servers
    return fail("cannot open: " + settings_errno_text(e));
  }
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail("cannot read: " + settings_errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(describe_file_type(st.st_mode));
  if (st.st_size < 0 || static_cast<unsigned long long>(st.st_size) > max_bytes) return fail(too_large(max_bytes));
  // The size is only a hint (the file may grow while it is read): the
  // bound is enforced on what is read.
  out.bytes.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot read: " + settings_errno_text(errno));
    }
    if (n == 0) break;
    if (out.bytes.size() + static_cast<std::size_t>(n) > max_bytes) return fail(too_large(max_bytes));
    out.bytes.append(buf, static_cast<std::size_t>(n));
  }
  out.result = settings_read::outcome::read;
  return out;
}

settings_document load_settings_file(const fs::path& path, config_scope scope,
                                     std::optional<settings_format> format) {
  auto read = read_settings_bytes(path);
  if (read.result == settings_read::outcome::read)
    return parse_settings_text(path.string(), scope, read.bytes, format);
  settings_document doc;
  doc.path = path.string();
  doc.scope = scope;
  doc.format = format.value_or(default_format(scope));
  if (read.result == settings_read::outcome::missing) return doc;
  doc.exists = true;
  auto where = doc.path;
  return failed_document(std::move(doc), settings_error{where, 0, 0, std::move(read.reason)});
}

namespace {

void append_unique(std::vector<std::string>& into, const std::vector<std::string>& xs) {
  for (auto& x : xs)
    if (std::find(into.begin(), into.end(), x) == into.end()) into.push_back(x);
}

} // namespace

sandbox_settings sandbox_settings_of(const std::vector<const settings_document*>& layers) {
  // The owner's user settings may widen the sandbox; workspace settings
  // arrive with the repository and may only narrow it.
  sandbox_settings sandbox;
  for (auto* doc : layers) {
    if (!doc) continue;
    if (doc->scope == config_scope::user) {
      if (doc->default_sandbox) sandbox.user_default = doc->default_sandbox;
      for (auto& [name, spec] : doc->sandbox_for)
        sandbox.owner_for.insert_or_assign(name, spec);
    } else if (doc->scope == config_scope::workspace && doc->default_sandbox) {
      sandbox.workspace_default = doc->default_sandbox;
    }
  }
  return sandbox;
}

void apply_sandbox(server_config& cfg, const sandbox_settings& s) {
  if (cfg.transport() != transport_kind::stdio) return;
  cfg.effective_sandbox = effective_sandbox(cfg, s);
  // Entries come from their parse, whose id has no sandbox in it.
  if (!cfg.effective_sandbox.key().empty()) cfg.connection_id_cache = compute_connection_id(cfg);
}

assembled_settings assemble(const std::vector<const settings_document*>& layers,
                            const server_map& overlay) {
  assembled_settings out;
  std::vector<const std::vector<std::string>*> allowed_layers;
  for (auto* doc : layers) {
    if (!doc) continue;
    for (auto& [name, cfg] : doc->servers)
      out.servers.insert_or_assign(name, cfg);
    if (doc->allowed) allowed_layers.push_back(&*doc->allowed);
    if (doc->excluded) append_unique(out.excluded, *doc->excluded);
    for (auto& [name, set] : doc->tool_sets)
      out.tool_sets.insert_or_assign(name, set);
  }
  for (auto& [name, cfg] : overlay)
    out.servers.insert_or_assign(name, cfg);
  auto sandbox = sandbox_settings_of(layers);
  for (auto& [name, cfg] : out.servers)
    apply_sandbox(cfg, sandbox);
  // Every scope that sets an allow-list narrows admission; none widens it,
  // so a workspace file cannot admit a server the user's own list keeps out.
  std::vector<std::string> names;
  for (auto& [name, cfg] : out.servers)
    names.push_back(name);
  for (auto* list : allowed_layers) {
    if (!out.allowed) {
      out.allowed.emplace();
      append_unique(*out.allowed, *list);
    } else {
      out.allowed = intersect_allow_lists(*out.allowed, *list, names);
    }
  }
  return out;
}

pattern_list_read read_pattern_list(const json& list, const std::string& where,
                                    const std::vector<std::string>& path) {
  pattern_list_read r;
  auto fail = [&](std::string msg, std::vector<std::string> at) {
    r.patterns.clear();
    r.error = std::move(msg);
    r.error_path = std::move(at);
    return r;
  };
  if (!list.is_array()) return fail(where + ": expected an array of strings", path);
  if (list.size() > max_list_entries)
    return fail(where + ": more than " + std::to_string(max_list_entries) + " entries", path);
  for (std::size_t n = 0; n < list.size(); ++n) {
    auto& v = list[n];
    auto at = path;
    at.push_back(std::to_string(n));
    auto name = where + "[" + std::to_string(n) + "]";
    if (!v.is_string()) return fail(name + ": expected a string", std::move(at));
    if (v.get_ref<const std::string&>().size() > max_pattern_bytes)
      return fail(name + ": longer than " + std::to_string(max_pattern_bytes) + " bytes", std::move(at));
    r.patterns.push_back(v.get<std::string>());
  }
  return r;
}

} // namespace mcprt
