#include "core/sandbox_policy.hpp"

#include <algorithm>
#include <filesystem>

#include "core/server_config.hpp"

namespace mcprt {

using json = nlohmann::json;

namespace {

using path_t = std::vector<std::string>;

path_t below(path_t p, std::string key) {
  p.push_back(std::move(key));
  return p;
}

sandbox_spec_read failed(std::string why, path_t at, bool index_last = false) {
  sandbox_spec_read r;
  r.error = std::move(why);
  r.error_path = std::move(at);
  r.index_last = index_last;
  return r;
}

bool sandbox_text_has_nul(const std::string& s) {
  return s.find('\0') != std::string::npos;
}

std::optional<std::string> path_problem(const std::string& p) {
  if (p.empty() || p.size() > max_sandbox_path_bytes || sandbox_text_has_nul(p))
    return "expected a path of 1 to " + std::to_string(max_sandbox_path_bytes) + " bytes";
  bool rooted = p[0] == '/' || p == "~" || p.rfind("~/", 0) == 0 || p == "${workspaceFolder}"
                || p.rfind("${workspaceFolder}/", 0) == 0;
  if (!rooted) return "expected an absolute path, or one that starts with ~ or ${workspaceFolder}";
  return std::nullopt;
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-'
         || c == '_';
}

std::optional<std::string> network_problem(const std::string& e) {
  const std::string expected = "expected \"host\" or \"host:port\"";
  if (e.empty() || e.size() > 262) return expected;
  std::string host = e;
  std::string port;
  if (e[0] == '[') {
    auto close = e.find(']');
    if (close == std::string::npos) return expected;
    for (std::size_t i = 1; i < close; ++i)
      if (!(std::isxdigit(static_cast<unsigned char>(e[i])) || e[i] == ':' || e[i] == '.')) return expected;
    if (close + 1 < e.size()) {
      if (e[close + 1] != ':') return expected;
      port = e.substr(close + 2);
      if (port.empty()) return expected;
    }
    host = e.substr(0, close + 1);
  } else {
    auto colon = e.rfind(':');
    if (colon != std::string::npos) {
      host = e.substr(0, colon);
      port = e.substr(colon + 1);
      if (port.empty()) return expected;
    }
    if (host.empty() || host.size() > 253 || !std::all_of(host.begin(), host.end(), host_char)) return expected;
  }
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return expected;
    long n = std::stol(port);
    if (n < 1 || n > 65535) return "expected a port from 1 to 65535";
  }
  return std::nullopt;
}

sandbox_spec_read read_sandbox_list(const json& v, const path_t& at, std::vector<std::string>& out,
                            std::optional<std::string> (*problem)(const std::string&)) {
  if (!v.is_array()) return failed("expected an array of strings", at);
  if (v.size() > max_sandbox_entries)
    return failed("more than " + std::to_string(max_sandbox_entries) + " entries", at);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return failed("expected a string", below(at, std::to_string(i)), true);
    auto& s = v[i].get_ref<const std::string&>();
    if (auto why = problem(s)) return failed(*why, below(at, std::to_string(i)), true);
    out.push_back(s);
  }
  return {};
}

std::string normal(const std::string& p) {
  auto n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/')
    n.pop_back();
  return n;
}

/// Whether `inner` is `outer` or lies below it (lexically).
bool within(const std::string& inner, const std::string& outer) {
  if (inner == outer) return true;
  if (outer == "/") return !inner.empty() && inner[0] == '/';
  return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '/';
}

void add_unique(std::vector<std::string>& xs, const std::string& x) {
  if (!x.empty() && std::find(xs.begin(), xs.end(), x) == xs.end()) xs.push_back(x);
}

void apply_spec(sandbox_setting& out, const sandbox_spec& s, bool lists) {
  out.enabled = s.mode != sandbox_spec::kind::off;
  if (s.mode == sandbox_spec::kind::required) out.required = true;
  if (s.mode == sandbox_spec::kind::off) out.required = false;
  if (!lists) return;
  for (auto& x : s.read)
    add_unique(out.read, x);
  for (auto& x : s.write)
    add_unique(out.write, x);
  for (auto& x : s.network)
    add_unique(out.network, x);
}

} // namespace

sandbox_spec_read parse_sandbox_spec(const json& v, const path_t& path) {
  sandbox_spec spec;
  if (v.is_boolean()) {
    spec.mode = v.get<bool>() ? sandbox_spec::kind::on : sandbox_spec::kind::off;
  } else if (v.is_string()) {
    if (v.get_ref<const std::string&>() != "required")
      return failed("expected true, false, \"required\" or an object", path);
    spec.mode = sandbox_spec::kind::required;
  } else if (v.is_object()) {
    for (auto& [key, x] : v.items()) {
      auto at = below(path, key);
      sandbox_spec_read r;
      if (key == "read") r = read_sandbox_list(x, at, spec.read, path_problem);
      else if (key == "write") r = read_sandbox_list(x, at, spec.write, path_problem);
      else if (key == "network") r = read_sandbox_list(x, at, spec.network, network_problem);
      else if (key == "required") {
        if (!x.is_boolean()) return failed("expected a boolean", at);
        if (x.get<bool>()) spec.mode = sandbox_spec::kind::required;
      } else {
        return failed("unknown key: expected \"read\", \"write\", \"network\" or \"required\"", at);
      }
      if (r.error) return r;
    }
  } else {
    return failed("expected true, false, \"required\" or an object", path);
  }
  sandbox_spec_read ok;
  ok.spec = std::move(spec);
  return ok;
}

sandbox_spec_read parse_inherit_env(const json& v, const path_t& path, inherit_env_spec& out) {
  out = {};
  if (v.is_boolean()) {
    out.all = v.get<bool>();
    return {};
  }
  auto name_problem = [](const std::string& n) -> std::optional<std::string> {
    if (n.empty() || n.size() > 256 || n.find('=') != std::string::npos || sandbox_text_has_nul(n))
      return "expected a variable name";
    return std::nullopt;
  };
  if (!v.is_array()) return failed("expected true, false or an array of variable names", path);
  return read_sandbox_list(v, path, out.names, +name_problem);
}

std::optional<sandbox_default> parse_sandbox_default(std::string_view s) {
  if (s == "project") return sandbox_default::project;
  if (s == "all") return sandbox_default::all;
  if (s == "off") return sandbox_default::off;
  return std::nullopt;
}

std::string to_string(sandbox_default d) {
  switch (d) {
    case sandbox_default::project: return "project";
    case sandbox_default::all: return "all";
    case sandbox_default::off: return "off";
  }
  return "project";
}

bool operator==(const sandbox_setting& a, const sandbox_setting& b) {
  return a.enabled == b.enabled && a.required == b.required && a.read == b.read && a.write == b.write
         && a.network == b.network && a.inherit_all_env == b.inherit_all_env && a.inherit_env == b.inherit_env
         && a.notes == b.notes;
}

std::string sandbox_setting::key() const {
  if (!enabled && !inherit_all_env && inherit_env.empty()) return "";
  json k = json::object();
  k["on"] = enabled;
  if (required) k["required"] = true;
  if (!read.empty()) k["read"] = read;
  if (!write.empty()) k["write"] = write;
  if (!network.empty()) k["network"] = network;
  if (inherit_all_env) k["inheritEnv"] = true;
  else if (!inherit_env.empty()) k["inheritEnv"] = inherit_env;
  return k.dump();
}

json sandbox_setting::to_json() const {
  json j = json::object();
  j["enabled"] = enabled;
  j["required"] = required;
  j["read"] = read;
  j["write"] = write;
  j["network"] = network;
  if (inherit_all_env) j["inheritEnv"] = true;
  else j["inheritEnv"] = inherit_env;
  j["notes"] = notes;
  return j;
}

std::optional<sandbox_setting> sandbox_setting_from_json(const json& j) {
  if (j.is_null()) return sandbox_setting{};
  if (!j.is_object()) return std::nullopt;
  sandbox_setting s;
  auto flag = [&](const char* k, bool& out) {
    auto i = j.find(k);
    if (i == j.end()) return true;
    if (!i->is_boolean()) return false;
    out = i->get<bool>();
    return true;
  };
  auto list = [&](const char* k, std::vector<std::string>& out) {
    auto i = j.find(k);
    if (i == j.end()) return true;
    if (!i->is_array() || i->size() > 4 * max_sandbox_entries) return false;
    for (auto& x : *i) {
      if (!x.is_string()) return false;
      out.push_back(x.get<std::string>());
    }
    return true;
  };
  if (!flag("enabled", s.enabled) || !flag("required", s.required) || !list("read", s.read)
      || !list("write", s.write) || !list("network", s.network) || !list("notes", s.notes))
    return std::nullopt;
  if (auto i = j.find("inheritEnv"); i != j.end()) {
    if (i->is_boolean()) s.inherit_all_env = i->get<bool>();
    else if (!list("inheritEnv", s.inherit_env)) return std::nullopt;
  }
  return s;
}

sandbox_setting effective_sandbox(const server_config& c, const sandbox_settings& s) {
  sandbox_setting out;
  bool gated = is_gated(c.scope);
  // The user's default may widen; the workspace's only narrows.
  auto mode = s.user_default.value_or(sandbox_default::project);
  if (s.workspace_default) {
    auto w = *s.workspace_default;
    if (w == sandbox_default::all) mode = sandbox_default::all;
    else if (w == sandbox_default::project && mode == sandbox_default::off) mode = sandbox_default::project;
    else if (w == sandbox_default::off && mode != sandbox_default::off)
      out.notes.push_back("the workspace settings' \"mcp.sandbox\": \"off\" is not honoured: a file that arrives with "
                          "the workspace can only narrow the sandbox; the owner's user settings can widen it");
  }
  out.enabled = mode == sandbox_default::all || (mode == sandbox_default::project && gated);
  if (c.sandbox) {
    auto& spec = *c.sandbox;
    if (!gated) {
      apply_spec(out, spec, true);
    } else {
      if (spec.mode == sandbox_spec::kind::off)
        out.notes.push_back("its \"sandbox\": false is not honoured: an entry that arrives with the workspace can only "
                            "narrow the sandbox (the owner widens it with \"mcp.sandboxFor\" in user settings)");
      else apply_spec(out, spec, false);
      if (!spec.read.empty() || !spec.write.empty() || !spec.network.empty())
        out.notes.push_back("its \"sandbox\" read, write and network lists are not honoured: an entry that arrives with "
                            "the workspace can only narrow the sandbox (the owner widens it with \"mcp.sandboxFor\" in "
                            "user settings)");
    }
  }
  if (auto i = s.owner_for.find(c.name); i != s.owner_for.end()) apply_spec(out, i->second, true);
  if (c.inherit_env) {
    if (gated) {
      if (c.inherit_env->all || !c.inherit_env->names.empty())
        out.notes.push_back("its \"inheritEnv\" is not honoured: an entry that arrives with the workspace gets only "
                            "the safe environment and its own \"env\"");
    } else {
      out.inherit_all_env = c.inherit_env->all;
      out.inherit_env = c.inherit_env->names;
    }
  }
  return out;
}

const std::vector<std::string>& secret_paths_in_home() {
  static const std::vector<std::string> paths = {
    ".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc", ".npmrc", ".pypirc",
    ".git-credentials", ".config/gh", ".config/hub", ".password-store", ".local/share/keyrings", ".pgpass",
    ".my.cnf", ".vault-token", ".terraform.d", ".cargo/credentials.toml", ".cargo/credentials",
    ".config/rclone", ".bash_history", ".zsh_history", ".python_history", ".node_repl_history",
    // Browser profiles: cookies and saved passwords.
    ".mozilla", ".config/google-chrome", ".config/chromium", ".config/BraveSoftware", ".config/microsoft-edge",
    ".config/vivaldi", ".config/opera", "snap/firefox", "snap/chromium", ".var/app/org.mozilla.firefox",
    ".var/app/com.google.Chrome", ".var/app/org.chromium.Chromium",
    // Other clients' credentials.
    ".claude.json", ".claude/.credentials.json", ".config/github-copilot", ".codex/auth.json",
    ".gemini/oauth_creds.json", ".qwen/oauth_creds.json",
  };
  return paths;
}

std::string expand_sandbox_path(const std::string& p, const sandbox_context& ctx) {
  if (path_problem(p)) return "";
  std::string out;
  if (p == "~" || p.rfind("~/", 0) == 0) {
    if (ctx.home.empty()) return "";
    out = ctx.home + p.substr(1);
  } else if (p.rfind("${workspaceFolder}", 0) == 0) {
    if (ctx.workspace.empty()) return "";
    out = ctx.workspace + p.substr(std::string("${workspaceFolder}").size());
  } else {
    out = p;
  }
  return normal(out);
}

sandbox_plan plan_sandbox(const sandbox_setting& s, const sandbox_context& ctx, const std::vector<std::string>& keep) {
  sandbox_plan plan;
  plan.required = s.required;
  plan.network = s.network;
  plan.tmp_parent = ctx.tmp_parent.empty() ? "/tmp" : ctx.tmp_parent;
  std::vector<std::string> kept;
  for (auto& k : keep)
    if (!k.empty() && k[0] == '/') kept.push_back(normal(k));
  if (!ctx.workspace.empty()) kept.push_back(normal(ctx.workspace));
  std::vector<std::string> reads;
  for (auto& r : s.read)
    add_unique(reads, expand_sandbox_path(r, ctx));
  std::vector<std::string> deny;
  std::vector<std::string> homes;
  add_unique(homes, ctx.home.empty() ? "" : normal(ctx.home));
  add_unique(homes, ctx.env_home.empty() ? "" : normal(ctx.env_home));
  for (auto& h : homes) {
    for (auto& rel : secret_paths_in_home())
      add_unique(deny, normal(h + "/" + rel));
    for (auto& dir : ctx.state_dirs)
      add_unique(deny, normal(h + "/" + dir));
    add_unique(deny, normal(h + "/.mcprt"));
  }
  for (auto& other : ctx.other_homes)
    if (!other.empty() && other[0] == '/') add_unique(deny, normal(other));
  for (auto& d : deny) {
    bool lifted = std::any_of(reads.begin(), reads.end(),
                              [&](const std::string& r) { return within(r, d) || within(d, r); });
    (lifted ? plan.lifted : plan.hide).push_back(d);
  }
  keep_visible(plan, kept);
  if (!ctx.workspace.empty()) add_unique(plan.write, normal(ctx.workspace));
  for (auto& w : s.write)
    add_unique(plan.write, expand_sandbox_path(w, ctx));
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"})
    add_unique(plan.write, dev);
  return plan;
}

void keep_visible(sandbox_plan& plan, const std::vector<std::string>& keep) {
  // A server keeps what it runs from and works in, even when it lies in a
  // denied place (a test's home under /tmp, say): hiding it would break the
  // server, not protect anything the owner did not hand over.
  auto needed = [&](const std::string& hidden) {
    return std::any_of(keep.begin(), keep.end(), [&](const std::string& k) { return within(normal(k), hidden); });
  };
  plan.hide.erase(std::remove_if(plan.hide.begin(), plan.hide.end(), needed), plan.hide.end());
}

sandbox_support parse_sandbox_probe(std::string_view line) {
  sandbox_support s;
  s.image = true;
  auto flag = [&](std::string_view key) -> int {
    auto at = line.find(std::string(key) + "=");
    if (at == std::string_view::npos) return 0;
    at += key.size() + 1;
    int v = 0;
    while (at < line.size() && line[at] >= '0' && line[at] <= '9' && v < 1000)
      v = v * 10 + (line[at++] - '0');
    return v;
  };
  s.userns = flag("userns") == 1;
  s.mountns = s.userns && flag("mountns") == 1;
  s.netns = s.userns && flag("netns") == 1;
  s.pidns = s.userns && flag("pidns") == 1;
  s.proc = s.pidns && s.mountns && flag("proc") == 1;
  s.landlock = flag("landlock");
  s.seccomp = flag("seccomp") == 1;
  s.cgroup_pids = flag("cgroup_pids") == 1;
  s.cgroup_memory = flag("cgroup_memory") == 1;
  s.root = flag("root") == 1;
  return s;
}

bool sandbox_launch::complete() const {
  return std::all_of(missing.begin(), missing.end(), [](const std::string& m) {
    return m.rfind(std::string(protection::memory) + ":", 0) == 0;
  });
}

json sandbox_launch::to_json() const {
  json j = json::object();
  j["inForce"] = in_force;
  j["missing"] = missing;
  return j;
}

sandbox_launch plan_launch(const sandbox_plan& p, const sandbox_support& s) {
  sandbox_launch l;
  auto missing = [&](const char* what, const std::string& why) { l.missing.push_back(std::string(what) + ": " + why); };
  if (!s.image) {
    std::string why = s.why_none.empty() ? "the reaper runs without its image" : s.why_none;
    for (auto* what : {protection::secrets, protection::writes, protection::network, protection::pid,
                       protection::scope, protection::syscalls, protection::privileges, protection::processes})
      missing(what, why);
    missing(protection::memory, why);
    return l;
  }
  auto& a = l.args;
  a.push_back("sandbox");
  const std::string no_userns = "user namespaces are not available to this user";
  if (s.userns) a.push_back("--userns");
  if (s.mountns) {
    a.push_back("--mountns");
    for (auto& h : p.hide) {
      a.push_back("--hide");
      a.push_back(h);
    }
    l.in_force.push_back(protection::secrets);
  } else {
    missing(protection::secrets, s.userns ? "mount namespaces are not available" : no_userns);
  }
  if (s.landlock >= 1) {
    a.push_back("--landlock");
    a.push_back(std::to_string(std::min(s.landlock, 7)));
    for (auto& w : p.write) {
      a.push_back("--write");
      a.push_back(w);
    }
    l.in_force.push_back(protection::writes);
  } else {
    missing(protection::writes, "Landlock is not available in this kernel");
  }
  if (s.netns) {
    a.push_back("--netns");
    l.in_force.push_back(protection::network);
    if (!p.network.empty()) {
      l.forward_port = sandbox_forward_port;
      a.push_back("--forward");
      a.push_back(std::to_string(sandbox_forward_port));
      l.in_force.push_back(protection::egress);
    }
  } else {
    missing(protection::network, s.userns ? "network namespaces are not available" : no_userns);
    if (!p.network.empty()) missing(protection::egress, "it needs a network namespace");
  }
  if (s.pidns && s.proc) {
    a.push_back("--pidns");
    l.in_force.push_back(protection::pid);
  } else {
    missing(protection::pid, s.userns ? "PID namespaces with their own /proc are not available" : no_userns);
  }
  if (s.landlock >= 6) l.in_force.push_back(protection::scope);
  else missing(protection::scope, "it needs Landlock ABI 6 (this kernel has " + std::to_string(s.landlock) + ")");
  if (s.seccomp) {
    a.push_back("--seccomp");
    l.in_force.push_back(protection::syscalls);
  } else {
    missing(protection::syscalls, "seccomp is not available");
  }
  l.in_force.push_back(protection::privileges);
  // RLIMIT_NPROC counts per user namespace but never binds root: root's
  // cap is a pids cgroup.
  bool rlimit_cap = s.userns && !s.root;
  if (rlimit_cap || s.cgroup_pids) {
    a.push_back("--nproc");
    a.push_back(std::to_string(p.max_processes));
    if (s.cgroup_pids) a.push_back("--cgroup-pids");
    l.in_force.push_back(protection::processes);
  } else {
    missing(protection::processes, s.root ? "root's cap needs a pids cgroup, and none can be made here" : no_userns);
  }
  if (s.cgroup_memory) {
    a.push_back("--memory");
    a.push_back(std::to_string(p.max_memory));
    l.in_force.push_back(protection::memory);
  } else {
    missing(protection::memory, "no cgroup of its own can be made here (cgroup v2 delegation, or root)");
  }
  a.push_back("--tmp");
  a.push_back(p.tmp_parent);
  a.push_back("--");
  return l;
}

bool is_safe_environment_name(std::string_view n) {
  static const char* const names[] = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE",
                                      "TZ", "TMPDIR"};
  for (auto* x : names)
    if (n == x) return true;
  return n.rfind("LC_", 0) == 0;
}

std::map<std::string, std::string> server_environment(const std::map<std::string, std::string>& parent,
                                                      const std::map<std::string, std::string>& entry_env,
                                                      bool inherit_all, const std::vector<std::string>& inherit) {
  std::map<std::string, std::string> env;
  for (auto& [k, v] : parent) {
    if (k.rfind("MCPRT_", 0) == 0) continue;
    if (inherit_all || is_safe_environment_name(k) || std::find(inherit.begin(), inherit.end(), k) != inherit.end())
      env[k] = v;
  }
  for (auto& [k, v] : entry_env)
    env[k] = v;
  return env;
}

} // namespace mcprt
