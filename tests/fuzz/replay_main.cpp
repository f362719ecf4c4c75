// Runs files through a fuzz target's LLVMFuzzerTestOneInput without
// libFuzzer: the seed corpus and the regressions (inputs that once crashed)
// become an ordinary test. Arguments are directories (missing ones are
// skipped) or files.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    fs::path p = argv[i];
    if (fs::is_directory(p, ec)) {
      for (auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file(ec) && e.path().filename().string()[0] != '.') inputs.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (auto& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << "replayed " << inputs.size() << " inputs\n";
  // A target with no inputs at all is a broken set-up, not a pass.
  return inputs.empty() ? 1 : 0;
}
