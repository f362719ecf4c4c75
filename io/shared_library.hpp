#pragma once

// A system library opened when first needed rather than linked: a runtime
// that never needs it does not map it, nor what it pulls in. Opened for the
// program's life (never closed: the functions taken from it stay valid).

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace mcprt::io {

class shared_library {
public:
  /// Throws std::runtime_error "<needed_for>: <dlerror>" when it cannot
  /// be opened.
  shared_library(const char* soname, const std::string& needed_for) : soname_(soname) {
    handle_ = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(needed_for + ": " + ::dlerror());
  }

  /// Sets `fn` to the function `name`; throws when the library lacks it.
  template <typename Fn>
  void resolve(const char* name, Fn& fn) const {
    fn = reinterpret_cast<Fn>(::dlsym(handle_, name));
    if (!fn) throw std::runtime_error(std::string(soname_) + " lacks " + name);
  }

private:
  const char* soname_;
  void* handle_ = nullptr;
};

} // namespace mcprt::io
