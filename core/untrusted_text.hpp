#pragma once

// Text and JSON that others wrote (settings files from a cloned repository,
// an MCP server's output, HTTP request bodies) enter mcprt through these
// functions: sizes and nesting are bounded before a tree is built, invalid
// UTF-8 is an error with its position or is replaced, and error messages
// never quote the input (a half-typed secret must not reach a log).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mcprt {

struct json_limits {
  /// Larger input is refused before parsing.
  std::size_t max_bytes = 16u << 20;
  /// Nesting of arrays and objects. nlohmann's destructor and `dump` recurse,
  /// so an unbounded depth is a stack overflow waiting for its input.
  std::size_t max_depth = 64;
  /// `//` and `/* */` comments, as editors of settings files write them.
  bool allow_comments = false;
  /// true: invalid UTF-8 is replaced by U+FFFD before parsing (server
  /// output, where one bad byte must not lose a whole message); false: it
  /// is a parse error at the offending byte (settings files).
  bool replace_invalid_utf8 = false;
};

/// Why a text was refused; `offset` is the byte offset of the problem (in
/// the original text) and `message` never contains the input's bytes.
struct json_error {
  std::size_t offset = 0;
  std::string message;
};

struct bounded_json {
  nlohmann::json value;          // discarded when `error` is set
  std::optional<json_error> error;
  bool ok() const { return !error.has_value(); }
};

/// Parses `text` as one JSON value within `limits`.
bounded_json parse_bounded_json(std::string_view text, const json_limits& limits);

/// Offset of the first byte that is not part of well-formed UTF-8 (overlong
/// forms, surrogates and code points above U+10FFFF are ill-formed), or
/// nullopt when the whole text is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

/// `text` with every maximal ill-formed subsequence replaced by U+FFFD
/// (the Unicode "substitution of maximal subparts" practice). Valid text
/// comes back unchanged.
std::string replace_invalid_utf8(std::string_view text);

/// `text` made safe for a log line or a terminal: valid printable UTF-8 is
/// kept; control characters (C0, DEL, C1) and the bidirectional overrides
/// that reorder a line on screen are written as escapes (`\n`, `\t`,
/// `\x1b`, `\u202e`), and bytes of invalid UTF-8 as `\xHH`. A backslash is
/// doubled, so an escape in the output cannot be forged by the input.
std::string escape_for_display(std::string_view text);

/// nlohmann's `dump` throws on invalid UTF-8 in a string; every dump of a
/// value that holds text from outside goes through this one, which replaces
/// it instead.
std::string dump_json(const nlohmann::json& j, int indent = -1);

} // namespace mcprt
