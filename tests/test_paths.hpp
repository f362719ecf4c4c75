#pragma once
// Where the build put the programs the tests run, and where the checkout is.
//
// The values live in one small file the build generates (test_paths.cpp in
// the build directory), not in compile definitions: an absolute path on a
// compiler's command line is part of ccache's key, so every test file would
// miss the cache in a clone at another path. Every test target gets this
// header with -include, so a test file uses the names as it would a macro.
namespace mcprt::test_paths {
extern const char* const bin;          // bin/mcprt
extern const char* const test_server;  // bin/mcprt-test-server
extern const char* const embed_bin;    // bin/mcprt-embed-example
extern const char* const bridge_bin;   // bin/mcprt-test-bridge
extern const char* const peers_dir;    // tests/peers/node_modules in the checkout
extern const char* const source_dir;   // the checkout
}  // namespace mcprt::test_paths

#define MCPRT_BIN (::mcprt::test_paths::bin)
#define MCPRT_TEST_SERVER (::mcprt::test_paths::test_server)
#define MCPRT_EMBED_BIN (::mcprt::test_paths::embed_bin)
#define MCPRT_BRIDGE_BIN (::mcprt::test_paths::bridge_bin)
#define MCPRT_PEERS_DIR (::mcprt::test_paths::peers_dir)
#define MCPRT_SOURCE_DIR (::mcprt::test_paths::source_dir)
