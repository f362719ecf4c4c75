// The reaper's static image (io/reaper_image/main.cpp, built by
// CMakeLists.txt), embedded for io/reaper.cpp to execute from a memfd.
#ifdef MCPRT_HAVE_REAPER_IMAGE

#include "reaper_image_hash.hpp"

// The image's hash is part of this file's preprocessed text, so a new image
// makes a new object, for ccache too (which does not look into .incbin).
extern "C" __attribute__((used, visibility("hidden"))) const char mcprt_reaper_image_sha256[] =
  MCPRT_REAPER_IMAGE_SHA256;

__asm__(
  ".pushsection .rodata.mcprt_reaper_image,\"a\",%progbits\n"
  ".balign 16\n"
  ".globl mcprt_reaper_image_begin\n"
  ".hidden mcprt_reaper_image_begin\n"
  "mcprt_reaper_image_begin:\n"
  ".incbin \"" MCPRT_REAPER_IMAGE_PATH
  "\"\n"
  ".globl mcprt_reaper_image_end\n"
  ".hidden mcprt_reaper_image_end\n"
  "mcprt_reaper_image_end:\n"
  ".popsection\n");

#endif
