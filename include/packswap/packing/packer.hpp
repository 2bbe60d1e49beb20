#pragma once

#include "packswap/packing/greedy_packer.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"

#include <type_traits>
#include <utility>

namespace packswap {

/// Whether `P` is a packer policy: a type whose `const` objects are callable as
/// `pack_list(const sample_set&)`. `greedy_packer` and `budgeted_packer` are; so is any type of
/// yours that packs whole samples (build the result with `pack_list::add` / `close`).
template <class P, class = void>
struct is_packer : std::false_type {};
template <class P>
struct is_packer<P,
                 std::void_t<decltype(std::declval<const P&>()(std::declval<const sample_set&>()))>>
    : std::is_same<pack_list,
                   decltype(std::declval<const P&>()(std::declval<const sample_set&>()))> {};
/// `is_packer<P>::value`.
template <class P>
inline constexpr bool is_packer_v = is_packer<P>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The C++20 spelling of `is_packer_v`.
template <class P>
concept packer_like = is_packer_v<P>;
#endif

/// Packs `set` with policy `P` (default: `greedy_packer` with capacity 8192, buffer 1000).
///
/// ```
/// packswap::pack_list packs = packswap::pack_samples(samples);
/// auto two_d = packswap::pack_samples(samples, packswap::budgeted_packer{8192, 6000});
/// ```
template <class P = greedy_packer>
[[nodiscard]] pack_list pack_samples(const sample_set& set, const P& packer = P{}) {
  static_assert(is_packer_v<P>, "P must be callable as pack_list(const sample_set&) const");
  return packer(set);
}

} // namespace packswap
