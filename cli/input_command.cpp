#include "cli/input_command.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <termios.h>
#include <unistd.h>

#include "cli/exit_codes.hpp"
#include "cli/terminal_output.hpp"
#include "core/approvals_store.hpp"
#include "core/input_store.hpp"
#include "core/settings.hpp"
#include "core/untrusted_text.hpp"

namespace fs = std::filesystem;

namespace mcprt::cli {

namespace {

// While echo is off, a signal that ends the process must give the terminal
// its echo back first.
struct termios saved_termios {};
volatile std::sig_atomic_t echo_is_off = 0;
constexpr int restored_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

extern "C" void restore_echo_and_reraise(int sig) {
  if (echo_is_off) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Turns echo off on stdin (a terminal) for its lifetime.
class echo_off {
public:
  echo_off() {
    if (::tcgetattr(STDIN_FILENO, &saved_termios) != 0) return;
    for (int sig : restored_signals)
      std::signal(sig, restore_echo_and_reraise);
    auto quiet = saved_termios;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
    if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0) echo_is_off = 1;
  }
  ~echo_off() {
    if (echo_is_off) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_termios);
    echo_is_off = 0;
    for (int sig : restored_signals)
      std::signal(sig, SIG_DFL);
  }
  echo_off(const echo_off&) = delete;
  echo_off& operator=(const echo_off&) = delete;
};

// Reads at most `limit` bytes of stdin: up to the end, or on a terminal up
// to the end of the first line. Throws std::system_error on a read error.
std::string read_stdin(std::size_t limit, bool one_line) {
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    auto want = std::min(sizeof buf, limit - out.size());
    auto n = ::read(STDIN_FILENO, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "cannot read the value from stdin");
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (one_line && out.back() == '\n') break;
  }
  return out;
}

struct input_flags {
  std::string workspace = ".";
  std::string home;
  std::string profile_name = "mcprt";
  bool json = false;
};

void add_flags(CLI::App* cmd, input_flags& f) {
  cmd->add_option("--workspace,-w", f.workspace, "Workspace directory (default: current directory)");
  cmd->add_option("--home", f.home, "Home directory holding the stored inputs (default: $HOME)");
  cmd->add_option("--profile", f.profile_name, "Whose files the workspace uses: mcprt, qwen, gemini, vscode, cursor, claude "
                                               "(inputs live under .mcprt/, or .qwen/ / .gemini/ for those)")
    ->check(CLI::IsMember(profile::names()));
}

// The workspace's project root (the store's key) and the store, as
// `approve` finds them; nullopt after saying why on stderr.
struct target {
  std::string workspace;
  fs::path store_path;
};

std::optional<target> resolve_input_target(const input_flags& f) {
  std::error_code ec;
  auto ws = fs::absolute(f.workspace, ec);
  if (ec || !fs::is_directory(ws, ec)) {
    std::cerr << "mcprt: workspace '" << escape_for_display(f.workspace) << "' is not a directory\n";
    return std::nullopt;
  }
  std::string why;
  auto home = resolve_home(f.home, std::getenv("HOME"), &why);
  if (!home) {
    std::cerr << "mcprt: " << why << "\n";
    return std::nullopt;
  }
  return target{approvals_store::normalize_project_root(ws.string()),
                input_store::default_path(*home, profile::parse(f.profile_name)->dir_name)};
}

void print_warnings(input_store& store) {
  for (auto& w : store.take_warnings())
    std::cerr << "mcprt: warning: " << escape_for_display(w) << "\n";
}

// A store's message without the function name it starts with.
std::string user_message(const std::exception& e) {
  std::string m = e.what();
  constexpr std::string_view prefix = "input_store::set: ";
  if (m.compare(0, prefix.size(), prefix) == 0) m.erase(0, prefix.size());
  return m;
}

} // namespace

struct input_command::state {
  CLI::App* input = nullptr;
  CLI::App* set = nullptr;
  CLI::App* unset = nullptr;
  CLI::App* list = nullptr;
  input_flags flags;
  std::string id;

  // Usage errors name the id as typed (the user's own argument).
  std::optional<int> bad_id() const {
    auto why = input_id_problem(id);
    if (!why) return std::nullopt;
    std::cerr << "mcprt input: '" << escape_for_display(id) << "' cannot name an input: " << *why << "\n";
    return exit_usage;
  }

  int run_set() {
    if (auto rc = bad_id()) return *rc;
    auto t = resolve_input_target(flags);
    if (!t) return exit_usage;
    // Room for the value, one "\r\n", and one byte more to tell a value
    // that is too long.
    const auto limit = input_store::max_value_bytes + 3;
    std::string value;
    try {
      if (::isatty(STDIN_FILENO)) {
        {
          // Echo off before the prompt, as getpass does: whatever is typed
          // once the prompt shows is never echoed.
          echo_off quiet;
          std::cerr << "value for " << id << ": " << std::flush;
          value = read_stdin(limit, true);
        }
        // The user's Enter was not echoed.
        std::cerr << "\n";
      } else {
        value = read_stdin(limit, false);
      }
    } catch (const std::exception& e) {
      std::cerr << "mcprt input: " << e.what() << "\n";
      return exit_failure;
    }
    if (!value.empty() && value.back() == '\n') {
      value.pop_back();
      if (!value.empty() && value.back() == '\r') value.pop_back();
    }
    if (value.empty()) {
      std::cerr << "mcprt input: no value for input " << id << " on stdin; an empty value is not stored\n";
      return exit_usage;
    }
    if (value.size() > input_store::max_value_bytes) {
      std::cerr << "mcprt input: the value for input " << id << " is too long (more than "
                << input_store::max_value_bytes << " bytes)\n";
      return exit_usage;
    }
    input_store store(t->store_path);
    try {
      store.set(t->workspace, id, value);
    } catch (const std::invalid_argument& e) {
      print_warnings(store);
      std::cerr << "mcprt input: " << escape_for_display(user_message(e)) << "\n";
      return exit_usage;
    } catch (const std::exception& e) {
      print_warnings(store);
      std::cerr << "mcprt input: " << escape_for_display(e.what()) << "\n";
      return exit_failure;
    }
    print_warnings(store);
    std::cout << "stored input " << id << " for " << escape_for_display(t->workspace) << "\n";
    return exit_ok;
  }

  int run_unset() {
    if (auto rc = bad_id()) return *rc;
    auto t = resolve_input_target(flags);
    if (!t) return exit_usage;
    input_store store(t->store_path);
    bool removed = false;
    try {
      removed = store.unset(t->workspace, id);
    } catch (const std::exception& e) {
      print_warnings(store);
      std::cerr << "mcprt input: " << escape_for_display(e.what()) << "\n";
      return exit_failure;
    }
    print_warnings(store);
    std::cout << (removed ? "removed input " : "no stored input ") << id << " for "
              << escape_for_display(t->workspace) << "\n";
    return exit_ok;
  }

  int run_list() {
    auto t = resolve_input_target(flags);
    if (!t) return exit_usage;
    input_store store(t->store_path);
    auto ids = store.ids(t->workspace);
    print_warnings(store);
    if (flags.json) {
      nlohmann::ordered_json doc = {{"workspace", t->workspace}, {"inputs", ids}};
      // The workspace path need not be UTF-8: replaced, not thrown.
      std::cout << terminal_json(doc, 2) << "\n";
      return exit_ok;
    }
    for (auto& i : ids)
      std::cout << i << "\n";
    if (ids.empty()) std::cerr << "no stored inputs for " << escape_for_display(t->workspace) << "\n";
    return exit_ok;
  }
};

input_command::input_command(CLI::App& app) : s_(std::make_unique<state>()) {
  auto& s = *s_;
  s.input = app.add_subcommand(
    "input",
    "Store the values of ${input:ID} placeholders (VS Code's .vscode/mcp.json) for a workspace;\n"
    "  mcprt never prompts for them while it runs. Values go to <home>/.mcprt/mcp-inputs.json (mode 0600)\n"
    "  and are never printed; a running daemon picks them up.");
  s.input->require_subcommand(1);
  s.set = s.input->add_subcommand("set", "Store the value of input ID, read from stdin (on a terminal: prompted, "
                                         "not echoed); one trailing newline is dropped");
  s.set->add_option("id", s.id, "Input id, as in ${input:ID}")->required();
  add_flags(s.set, s.flags);
  s.unset = s.input->add_subcommand("unset", "Forget the stored value of input ID");
  s.unset->add_option("id", s.id, "Input id, as in ${input:ID}")->required();
  add_flags(s.unset, s.flags);
  s.list = s.input->add_subcommand("list", "List the ids of the stored inputs, one per line (never the values)");
  add_flags(s.list, s.flags);
  s.list->add_flag("--json", s.flags.json, "Print {\"workspace\": ..., \"inputs\": [ids...]}");
}

input_command::~input_command() = default;

bool input_command::given() const {
  return s_->input->parsed();
}

int input_command::run() {
  if (s_->set->parsed()) return s_->run_set();
  if (s_->unset->parsed()) return s_->run_unset();
  if (s_->list->parsed()) return s_->run_list();
  return exit_usage;
}

} // namespace mcprt::cli
