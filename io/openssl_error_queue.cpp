#include "io/openssl_error_queue.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

std::atomic<bool> clearing{false};

template <class Fn>
Fn next_definition(const char* name) {
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
  if (fn == nullptr) {
    // Without libssl's own there is nothing to call on: no caller can go on.
    std::fprintf(stderr, "mcprt: %s of libssl not found: %s\n", name, ::dlerror());
    std::abort();
  }
  return fn;
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto next = next_definition<int (*)(SSL*, void*, int)>("SSL_read");
  if (clearing.load(std::memory_order_relaxed)) ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto next = next_definition<int (*)(SSL*, const void*, int)>("SSL_write");
  if (clearing.load(std::memory_order_relaxed)) ERR_clear_error();
  return next(ssl, buf, num);
}

} // extern "C"

namespace mcprt::io {

bool clear_openssl_errors_before_io() {
  clearing.store(true, std::memory_order_relaxed);
  return ::dlsym(RTLD_DEFAULT, "SSL_read") == reinterpret_cast<void*>(&SSL_read) &&
         ::dlsym(RTLD_DEFAULT, "SSL_write") == reinterpret_cast<void*>(&SSL_write);
}

} // namespace mcprt::io
