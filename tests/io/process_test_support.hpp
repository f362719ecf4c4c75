#pragma once

// What the process tests share: the test server they start and the request
// they send it.

#include <string>

namespace mcprt::io::test {

inline const std::string server = MCPRT_TEST_SERVER;

inline const std::string ping = R"({"jsonrpc":"2.0","id":1,"method":"ping"})"
                                "\n";

} // namespace mcprt::io::test
