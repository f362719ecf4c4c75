// The reaper's own image: a small static program that the runtime executes
// from a memfd (io/reaper.cpp), so that the reaper maps nothing of the
// runtime. Built by CMakeLists.txt outside mcprt_io's glob, without
// sanitizers, and embedded into mcprt_io (io/reaper_image.cpp).
//
// The same image sets up a server's sandbox (sandbox.cpp): the reaper's
// child executes it again (/proc/self/exe) with "sandbox" as argv[1].
#include <string.h>

#include "core/reaper_protocol.hpp"
#include "io/reaper_image/sandbox.hpp"
#include "io/reaper_process.hpp"

int main(int argc, char** argv, char** envp) {
  if (argc > 1 && strcmp(argv[1], "sandbox") == 0) return mcprt::sandbox_image::run_sandbox(argc, argv, envp);
  if (argc > 1 && strcmp(argv[1], "sandbox-probe") == 0) return mcprt::sandbox_image::run_probe();
  mcprt::io::detail::run_reaper(3, static_cast<int>(mcprt::reaper_protocol::reaper_mode::exec_image));
}
