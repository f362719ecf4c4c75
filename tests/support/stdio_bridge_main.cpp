// mcprt-test-bridge URL [TOKEN_FILE]: the stdio bridge `mcprt gateway`
// runs, in front of an endpoint the test chose (a scripted one, the test
// server). A test program, never installed: the gateway itself bridges
// only to the daemon it verified.

#include <fstream>
#include <iostream>
#include <string>

#include "cli/stdio_bridge.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: mcprt-test-bridge URL [TOKEN_FILE]\n";
    return 2;
  }
  std::string token;
  if (argc == 3) {
    std::ifstream in(argv[2]);
    if (!std::getline(in, token) || token.empty()) {
      std::cerr << "mcprt-test-bridge: no token in " << argv[2] << "\n";
      return 2;
    }
  }
  return mcprt::cli::run_stdio_bridge(argv[1], token);
}
