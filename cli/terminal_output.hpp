#pragma once

// Printing what a server sent to a terminal. A server's text is hostile: it
// may carry escape sequences that rewrite the screen, so every piece passes
// through escape_for_display on its way out.

#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

namespace mcprt::cli {

/// Line breaks and tabs stay; every other control character is escaped.
std::string terminal_text(const std::string& s);

/// One line for stderr: line breaks become spaces; the text is escaped
/// only when it holds something a terminal would act on, so text that was
/// escaped already (a connection error quoting stderr) is not escaped twice.
std::string terminal_line(std::string s);

/// `dumped` (the text of a JSON dump, valid UTF-8) with every character a
/// terminal acts on that nlohmann leaves raw (DEL, C1 controls, the
/// bidirectional controls, the line and paragraph separators) written as a
/// `\uXXXX` escape: the same JSON, safe on a terminal. Every JSON a command
/// prints goes through it.
std::string terminal_safe_json(const std::string& dumped);

/// `j` dumped (invalid UTF-8 replaced) and made terminal-safe.
std::string terminal_json(const nlohmann::json& j, int indent = -1);
std::string terminal_json(const nlohmann::ordered_json& j, int indent = -1);

/// Prints a tools/call result: each text part as text, any other part as
/// JSON; the whole result as JSON when `as_json` or when it is not a
/// result. Returns the exit code: 1 when the tool reported isError, else 0.
int print_tool_result(const nlohmann::json& result, bool as_json, std::ostream& out);

} // namespace mcprt::cli
