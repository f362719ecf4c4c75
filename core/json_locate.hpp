#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mcprt {

/// 1-based line and column of a byte offset in `text`. Columns count
/// characters (UTF-8 sequences), as editors show them; a byte that is not
/// part of valid UTF-8 counts as one character.
struct text_position {
  int line = 1;
  int column = 1;
};
text_position position_of(std::string_view text, std::size_t offset);

/// Byte offset of the value reached by following `path` (object keys and, in
/// arrays, decimal indices) through the JSON (with comments) in `text`. The
/// parser reports where text is malformed; this reports where a well-formed
/// value has the wrong type. Returns nullopt when the path is not found.
///
/// Meant for text the parser accepted, but safe on any text: it takes time
/// linear in the text for each path element, uses no recursion, and gives
/// up (nullopt) where the text is not JSON.
std::optional<std::size_t> locate_json_value(std::string_view text,
                                             const std::vector<std::string>& path);

/// The raw text of the value at `path` (as for locate_json_value), from its
/// first to its last byte; nullopt when the path is not found or the value
/// does not end. For looking at a member of a message without parsing it,
/// e.g. whether a JSON-RPC message has an "id".
std::optional<std::string_view> json_value_text(std::string_view text,
                                                const std::vector<std::string>& path);

/// The raw text of each element of the array `text` holds (whitespace around
/// it allowed), in order. nullopt when `text` is not exactly one array: not
/// an array, an element that does not end, a missing comma, or anything but
/// whitespace after the closing bracket. Linear, no recursion.
std::optional<std::vector<std::string_view>> json_array_elements(std::string_view text);

} // namespace mcprt
