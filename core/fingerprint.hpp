#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/server_config.hpp"

namespace mcprt {

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(std::string_view data);

/// The canonical transport description that the connection id hashes, as
/// compact JSON with a fixed key order (byte-compatible with the reference
/// implementation's pool key, so ids match across the two systems).
std::string canonical_transport(const server_config& c);

/// `<name>::<first 16 hex of SHA-256(canonical_transport)>`. Two configs share
/// a live connection iff their ids are equal. `trust`, `includeTools`,
/// `excludeTools` and `description` are left out on purpose: changing them
/// re-filters a live connection instead of restarting it.
std::string connection_id(const server_config& c);

/// connection_id without the cache parse_server_config fills in.
std::string compute_connection_id(const server_config& c);

/// Splits a connection id on its last `::` (server names may contain `::`).
std::optional<std::pair<std::string, std::string>> parse_connection_id(std::string_view id);

/// Full SHA-256 over the whole spec (keys sorted recursively, array order
/// kept) minus `scope`, `description` and `extensionName`: the approval of a
/// gated server is bound to it, so any behavioural edit asks again.
std::string approval_hash(const server_config& c);

/// What the tool view of a live connection depends on beyond its id.
std::string filter_key(const server_config& c);

} // namespace mcprt
