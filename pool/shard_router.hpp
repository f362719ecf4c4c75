#pragma once

// One actor handle in front of a fixed set of shard actors. A message goes
// straight from its sender's thread into the mailbox of the shard that owns
// it: no hop through a router's mailbox, no lock, no allocation.
//
// Unlike caf::actor_pool, the set never changes: a shard that dies takes the
// router and every other shard down with it (its exit reason), so no message
// is ever routed to a shard that does not own it.

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_erased_tuple.hpp>
#include <caf/typed_actor.hpp>

namespace mcprt {

/// The shard that owns `msg`, or nullopt for a message that concerns every
/// shard. Called on the sender's thread for every message: keep it cheap.
using shard_route = std::optional<std::size_t> (*)(const caf::type_erased_tuple& msg, std::size_t shards);

/// Spawns the actor that takes a message concerning every shard (it asks
/// them all and answers the sender once).
using shard_fan_out = caf::actor (*)(caf::actor_system& sys, const std::vector<caf::actor>& shards);

/// The router over `shards` (at least one). An exit message sent to the
/// router is passed on to every shard.
caf::actor spawn_shard_router(caf::actor_system& sys, std::vector<caf::actor> shards, shard_route route,
                              shard_fan_out fan_out);

// -- routing by key --------------------------------------------------------------------
//
// The route of an interface is built from its signature list, so that a
// signature nobody thought of cannot silently land on shard 0. The rule:
// - a signature whose input is one struct T is routed by `shard_key(const
//   T&)` (found by argument-dependent lookup, returning something a
//   std::string_view is made of): a T without one does not compile;
// - a signature led by an atom concerns every shard, and its atom must be
//   in the interface's every-shard list;
// - any other shape does not compile.

namespace shard_routing {

template <class T, class = void>
struct has_shard_key : std::false_type {};

template <class T>
struct has_shard_key<T, std::void_t<decltype(std::string_view{shard_key(std::declval<const T&>())})>>
  : std::true_type {};

template <class T>
struct is_atom : std::false_type {};

template <caf::atom_value V>
struct is_atom<caf::atom_constant<V>> : std::true_type {};

template <class Atom, class... EveryShard>
constexpr bool listed = (std::is_same_v<Atom, EveryShard> || ...);

/// How one signature is routed: `keyed` (one struct with a shard_key),
/// `every_shard` (atom-led, listed) or neither (`valid` is false).
template <class Sig, class... EveryShard>
struct signature {
  static constexpr bool keyed = false;
  static constexpr bool every_shard = false;
  static constexpr bool valid = false;
};

template <class T, class Out, class... EveryShard>
struct signature<caf::typed_mpi<caf::detail::type_list<T>, Out>, EveryShard...> {
  using key_type = T;
  static constexpr bool keyed = !is_atom<T>::value && has_shard_key<T>::value;
  static constexpr bool every_shard = is_atom<T>::value && listed<T, EveryShard...>;
  static constexpr bool valid = keyed || every_shard;
};

template <class A, class B, class... Ts, class Out, class... EveryShard>
struct signature<caf::typed_mpi<caf::detail::type_list<A, B, Ts...>, Out>, EveryShard...> {
  static constexpr bool keyed = false;
  static constexpr bool every_shard = is_atom<A>::value && listed<A, EveryShard...>;
  static constexpr bool valid = every_shard;
};

template <class Interface, class EveryShard>
struct router;

template <class... Sigs, class... EveryShard>
struct router<caf::typed_actor<Sigs...>, caf::detail::type_list<EveryShard...>> {
  /// Whether every signature follows the rule (see above).
  static constexpr bool valid = (signature<Sigs, EveryShard...>::valid && ...);

  static std::size_t shard_of(std::string_view key, std::size_t shards) {
    return std::hash<std::string_view>{}(key) % shards;
  }

  template <class Sig>
  static bool by_address(const caf::type_erased_tuple& msg, const std::type_info* rtti, std::size_t shards,
                         std::optional<std::size_t>& out) {
    if constexpr (signature<Sig, EveryShard...>::keyed) {
      using T = typename signature<Sig, EveryShard...>::key_type;
      if (rtti != &typeid(T)) return false;
      out = shard_of(shard_key(msg.get_as<T>(0)), shards);
      return true;
    } else {
      return false;
    }
  }

  template <class Sig>
  static bool by_name(const caf::type_erased_tuple& msg, std::size_t shards, std::optional<std::size_t>& out) {
    if constexpr (signature<Sig, EveryShard...>::keyed) {
      using T = typename signature<Sig, EveryShard...>::key_type;
      if (!msg.match_element<T>(0)) return false;
      out = shard_of(shard_key(msg.get_as<T>(0)), shards);
      return true;
    } else {
      return false;
    }
  }

  /// A shard_route (see above) for this interface.
  static std::optional<std::size_t> route(const caf::type_erased_tuple& msg, std::size_t shards) {
    static_assert(valid, "a sharded interface's signature takes one struct with a `shard_key(const T&)` "
                         "overload, or is led by an atom in its every-shard list");
    if (msg.size() == 1) {
      // By type_info address first, which spares the name comparison
      // (strcmp) a mismatched match_element costs; where a type has two
      // type_info objects (two shared libraries), the name still decides.
      std::optional<std::size_t> out;
      auto rtti = msg.type(0).second;
      if ((by_address<Sigs>(msg, rtti, shards, out) || ...)) return out;
      if ((by_name<Sigs>(msg, shards, out) || ...)) return out;
    }
    if (msg.size() > 0 && msg.match_element<caf::atom_value>(0)) {
      auto a = msg.get_as<caf::atom_value>(0);
      if (((a == EveryShard::value) || ...)) return std::nullopt;
    }
    return 0; // outside the interface: one shard answers (with an error)
  }
};

} // namespace shard_routing

/// The route of `Interface`, whose atom-led requests `EveryShard...` are
/// asked of every shard. Fails to compile when a signature breaks the rule.
template <class Interface, class... EveryShard>
constexpr shard_route route_by_key() {
  return &shard_routing::router<Interface, caf::detail::type_list<EveryShard...>>::route;
}

} // namespace mcprt
