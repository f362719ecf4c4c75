// Black-box tests of `mcprt input set|unset|list`: the values of
// `${input:ID}` placeholders, read from stdin and stored in
// <home>/.mcprt/mcp-inputs.json, never printed.

#include <chrono>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <termios.h>

#include <gtest/gtest.h>

#include "tests/cli/cli_test_util.hpp"

namespace mcprt_cli_test {
namespace {

const std::string secret = "SECRET-sk-0123456789";

class input_test : public cli_test {
 protected:
  fs::path inputs_file() const { return home_ / ".mcprt" / "mcp-inputs.json"; }

  std::vector<std::string> with_flags(std::vector<std::string> args) const {
    for (auto a : {std::string("--workspace"), ws_.string(), std::string("--home"), home_.string()})
      args.push_back(a);
    return args;
  }

  // Builds argv and envp (HOME=home_) before fork, as run_mcprt does.
  struct prepared {
    std::vector<std::string> argv_s, env_s;
    std::vector<char*> argv, envp;
  };
  prepared prepare(const std::vector<std::string>& args) const {
    prepared p;
    p.argv_s.emplace_back(MCPRT_BIN);
    p.argv_s.insert(p.argv_s.end(), args.begin(), args.end());
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "HOME=", 5) != 0) p.env_s.emplace_back(*e);
    p.env_s.push_back("HOME=" + home_.string());
    for (auto& a : p.argv_s)
      p.argv.push_back(a.data());
    p.argv.push_back(nullptr);
    for (auto& e : p.env_s)
      p.envp.push_back(e.data());
    p.envp.push_back(nullptr);
    return p;
  }

  run_result collect(pid_t pid, const fs::path& out, const fs::path& err) const {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    run_result r;
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    r.j = json::parse(r.out, nullptr, false);
    return r;
  }

  /// `mcprt args...` with `input` as its stdin (a regular file, as
  /// `mcprt input set ID < file`).
  run_result run_with_stdin(const std::vector<std::string>& args, const std::string& input) const {
    auto in = root_ / "stdin", out = root_ / "stdout", err = root_ / "stderr";
    write_file(in, input);
    auto p = prepare(args);
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      int i = ::open(in.c_str(), O_RDONLY), o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600),
          e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (i < 0 || o < 0 || e < 0) ::_exit(126);
      ::dup2(i, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execve(p.argv[0], p.argv.data(), p.envp.data());
      ::_exit(127);
    }
    return collect(pid, out, err);
  }

  run_result set(const std::string& id, const std::string& value) const {
    return run_with_stdin(with_flags({"input", "set", id}), value);
  }

  // Neither stdout nor stderr of `r` may show the secret.
  static void expect_no_secret(const run_result& r, const std::string& value = secret) {
    EXPECT_EQ(r.out.find(value), std::string::npos) << describe(r);
    EXPECT_EQ(r.err.find(value), std::string::npos) << describe(r);
  }
};

TEST_F(input_test, set_from_piped_stdin_then_list_shows_the_id_only) {
  auto r = set("api-key", secret + "\n");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.out, "stored input api-key for " + ws_.string() + "\n");
  expect_no_secret(r);

  ASSERT_TRUE(fs::exists(inputs_file()));
  struct stat st {};
  ASSERT_EQ(::stat(inputs_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  EXPECT_EQ(json::parse(slurp(inputs_file())), (json{{ws_.string(), {{"api-key", secret}}}}))
    << "one trailing newline is dropped";

  auto l = mcprt(with_flags({"input", "list"}));
  ASSERT_EQ(l.code, 0) << describe(l);
  EXPECT_EQ(l.out, "api-key\n");
  expect_no_secret(l);

  auto j = mcprt(with_flags({"input", "list", "--json"}));
  ASSERT_EQ(j.code, 0) << describe(j);
  ASSERT_TRUE(j.has_json()) << describe(j);
  EXPECT_EQ(j.j, (json{{"workspace", ws_.string()}, {"inputs", {"api-key"}}}));
  expect_no_secret(j);
}

TEST_F(input_test, strips_one_crlf_or_lf_only_and_keeps_inner_newlines) {
  ASSERT_EQ(set("a", "one\r\n").code, 0);
  ASSERT_EQ(set("b", "two\n\n").code, 0);
  ASSERT_EQ(set("c", "no newline").code, 0);
  ASSERT_EQ(set("d", "line 1\nline 2\n").code, 0);
  auto doc = json::parse(slurp(inputs_file()))[ws_.string()];
  EXPECT_EQ(doc, (json{{"a", "one"}, {"b", "two\n"}, {"c", "no newline"}, {"d", "line 1\nline 2"}}));
  auto l = mcprt(with_flags({"input", "list"}));
  EXPECT_EQ(l.out, "a\nb\nc\nd\n");
}

TEST_F(input_test, set_replaces_and_unset_removes) {
  ASSERT_EQ(set("k", "old").code, 0);
  ASSERT_EQ(set("k", secret).code, 0);
  EXPECT_EQ(json::parse(slurp(inputs_file()))[ws_.string()]["k"], secret);

  auto u = mcprt(with_flags({"input", "unset", "k"}));
  ASSERT_EQ(u.code, 0) << describe(u);
  EXPECT_EQ(u.out, "removed input k for " + ws_.string() + "\n");
  expect_no_secret(u);
  EXPECT_EQ(json::parse(slurp(inputs_file())), json::object());

  auto again = mcprt(with_flags({"input", "unset", "k"}));
  ASSERT_EQ(again.code, 0) << describe(again);
  EXPECT_EQ(again.out, "no stored input k for " + ws_.string() + "\n");

  auto l = mcprt(with_flags({"input", "list"}));
  EXPECT_EQ(l.code, 0);
  EXPECT_EQ(l.out, "");
}

TEST_F(input_test, values_are_per_workspace_and_follow_the_working_directory) {
  auto other = root_ / "other";
  fs::create_directories(other);
  ASSERT_EQ(set("k", "for ws").code, 0);
  // No --workspace: the current directory.
  auto r = run_with_stdin({"input", "list", "--home", home_.string(), "--workspace", other.string()}, "");
  EXPECT_EQ(r.out, "");
  auto mine = mcprt({"input", "list", "--home", home_.string()}, ws_);
  EXPECT_EQ(mine.out, "k\n") << describe(mine);
}

TEST_F(input_test, profile_picks_the_store_directory) {
  auto r = run_with_stdin(with_flags({"input", "set", "k", "--profile", "gemini"}), "v");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_TRUE(fs::exists(home_ / ".gemini" / "mcp-inputs.json"));
  EXPECT_FALSE(fs::exists(inputs_file()));
}

TEST_F(input_test, a_bad_id_is_a_usage_error_and_nothing_is_read_or_stored) {
  for (std::string id : std::vector<std::string>{"has space", "a/b", "${input:x}", std::string(65, 'x')}) {
    auto r = set(id, secret);
    EXPECT_EQ(r.code, 2) << id << "\n" << describe(r);
    EXPECT_NE(r.err.find("cannot name an input"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out, "");
    expect_no_secret(r);
    auto u = mcprt(with_flags({"input", "unset", id}));
    EXPECT_EQ(u.code, 2) << describe(u);
  }
  EXPECT_FALSE(fs::exists(inputs_file()));
}

TEST_F(input_test, an_empty_value_is_refused) {
  for (std::string empty : std::vector<std::string>{"", "\n", "\r\n"}) {
    auto r = set("k", empty);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("empty value"), std::string::npos) << describe(r);
  }
  EXPECT_FALSE(fs::exists(inputs_file()));
}

TEST_F(input_test, a_value_over_64_kib_is_refused_and_one_of_64_kib_is_stored) {
  const std::size_t max = 64 * 1024;
  auto r = set("k", std::string(max + 1, 'x'));
  EXPECT_EQ(r.code, 2) << describe(r).substr(0, 500);
  EXPECT_NE(r.err.find("too long"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("xxxx"), std::string::npos);
  EXPECT_FALSE(fs::exists(inputs_file()));
  // Far longer than the limit: refused without reading it all.
  r = set("k", std::string(4 * max, 'x'));
  EXPECT_EQ(r.code, 2);

  auto ok = set("k", std::string(max, 'y') + "\r\n");
  ASSERT_EQ(ok.code, 0) << describe(ok).substr(0, 500);
  EXPECT_EQ(json::parse(slurp(inputs_file()))[ws_.string()]["k"].get<std::string>().size(), max);
}

TEST_F(input_test, a_nul_in_the_value_is_refused_without_quoting_it) {
  auto r = set("k", secret + std::string(1, '\0') + "tail");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("NUL"), std::string::npos) << describe(r);
  expect_no_secret(r);
  EXPECT_FALSE(fs::exists(inputs_file()));
}

TEST_F(input_test, a_malformed_store_warns_without_quoting_values_and_is_backed_up) {
  write_file(inputs_file(), "{\"" + ws_.string() + "\": {\"k\": \"" + secret + "\", ");
  auto l = mcprt(with_flags({"input", "list"}));
  EXPECT_EQ(l.code, 0) << describe(l);
  EXPECT_NE(l.err.find("warning"), std::string::npos) << describe(l);
  expect_no_secret(l);
  auto r = set("k", "new");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find(".corrupt-"), std::string::npos) << describe(r);
  expect_no_secret(r);
}

TEST_F(input_test, a_store_that_cannot_be_written_is_a_failure) {
  write_file(home_ / ".mcprt", "a file where the directory should be");
  auto r = set("k", secret);
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find(".mcprt"), std::string::npos) << describe(r);
  expect_no_secret(r);
}

TEST_F(input_test, a_workspace_that_is_not_a_directory_is_a_usage_error) {
  auto r = run_with_stdin({"input", "set", "k", "--workspace", (root_ / "nope").string(), "--home", home_.string()},
                          "v");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << describe(r);
}

TEST_F(input_test, input_without_a_subcommand_is_a_usage_error) {
  EXPECT_EQ(mcprt({"input"}).code, 2);
  EXPECT_EQ(mcprt({"input", "set"}).code, 2);
  EXPECT_EQ(mcprt({"input", "frobnicate"}).code, 2);
}

// On a terminal: a prompt on stderr, echo off (the terminal never shows the
// value), the first line is the value.
TEST_F(input_test, on_a_terminal_it_prompts_on_stderr_and_does_not_echo) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  std::string slave_name = ::ptsname(master);
  int slave = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  auto out = root_ / "stdout", err = root_ / "stderr";
  // stderr is a pipe: the prompt comes after echo is off, so reading it
  // (under a deadline) is the moment to type.
  int err_pipe[2];
  ASSERT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
  auto p = prepare(with_flags({"input", "set", "tty-key"}));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setsid();
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0) ::_exit(126);
    ::dup2(slave, 0);
    ::dup2(o, 1);
    ::dup2(err_pipe[1], 2);
    ::close(master);
    ::execve(p.argv[0], p.argv.data(), p.envp.data());
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  const std::string prompt = "value for tty-key: ";
  std::string err_text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (err_text.find(prompt) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd pfd{err_pipe[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    char chunk[256];
    auto n = ::read(err_pipe[0], chunk, sizeof chunk);
    if (n <= 0) break;
    err_text.append(chunk, static_cast<std::size_t>(n));
  }
  termios t{};
  EXPECT_TRUE(::tcgetattr(slave, &t) == 0 && !(t.c_lflag & ECHO)) << "echo is on at the prompt";
  EXPECT_NE(err_text.find(prompt), std::string::npos) << "no prompt: " << err_text;
  std::string line = secret + "\n";
  ASSERT_EQ(::write(master, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  // The rest of stderr until the program exits and the pipe closes.
  char chunk[4096];
  for (ssize_t n; (n = ::read(err_pipe[0], chunk, sizeof chunk)) > 0;)
    err_text.append(chunk, static_cast<std::size_t>(n));
  ::close(err_pipe[0]);
  write_file(err, err_text);
  auto r = collect(pid, out, err);
  // What the terminal showed.
  std::string shown;
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;)
    shown.append(buf, static_cast<std::size_t>(n));
  ::close(slave);
  ::close(master);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(shown.find(secret), std::string::npos) << shown;
  EXPECT_EQ(r.err.rfind("value for tty-key: ", 0), 0u) << describe(r);
  expect_no_secret(r);
  EXPECT_EQ(json::parse(slurp(inputs_file()))[ws_.string()]["tty-key"], secret);
}

} // namespace
} // namespace mcprt_cli_test
