#pragma once

// Which forward proxy, if any, a request to a URL goes through: decided here,
// once, so the HTTP client and its tests agree on the conventions curl, Go
// and Python share, and the one place they differ is chosen on purpose.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mcprt {

/// Reads one environment variable; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(const char* name)>;

/// The process environment.
env_lookup process_env();

/// The proxy URL for a request to `scheme://host` ("" for a direct
/// connection):
/// - `configured` (a server's own `proxy` setting) wins when not empty;
///   "direct" or "none" there means no proxy at all.
/// - Otherwise https goes through `HTTPS_PROXY` (or `https_proxy`), http
///   through `HTTP_PROXY` (or `http_proxy`), either falls back to
///   `ALL_PROXY` (or `all_proxy`); the lower-case name wins when both are set.
/// - Environment proxies are skipped for hosts that `NO_PROXY` (or
///   `no_proxy`) names: `*` (all), a comma-separated list of host names
///   (matching the name and its subdomains; a leading dot is ignored) and
///   IP literals (exact), each optionally with `:port` (then only that port).
/// - Loopback (`localhost`, `*.localhost`, 127.0.0.0/8, ::1) never goes
///   through an environment proxy, as in Go's net/http: a proxy cannot
///   reach our own loopback, and a local server must not depend on one.
std::string choose_proxy(std::string_view scheme, std::string_view host, int port, std::string_view configured,
                         const env_lookup& env);

/// True for localhost, *.localhost, 127.0.0.0/8 and ::1.
bool is_loopback_host(std::string_view host);

} // namespace mcprt
