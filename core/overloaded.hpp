#pragma once

// One visitor out of several lambdas, for std::visit over the variants of
// effects and event payloads.

namespace mcprt {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

} // namespace mcprt
