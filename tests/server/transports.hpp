#pragma once

#include "server_core.hpp"

#include <signal.h>

namespace mcprt_test_server {

// Each returns the process exit code.
int run_stdio(const options& opts, lifetime& life, handler& h);
int run_http(const options& opts, lifetime& life, handler& h);

// A non-JSON line for --garbage; every few calls it is the long one.
std::string garbage_line(std::size_t n);

// SIGINT, plus SIGTERM unless --ignore-sigterm: what ends HTTP mode cleanly.
sigset_t shutdown_signals(const options& opts);

} // namespace mcprt_test_server
