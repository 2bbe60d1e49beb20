#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/balance/metrics.hpp"
#include "packswap/refine/relabel.hpp"
#include "packswap/refine/topology.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace packswap {

/// What stage 2 may trade and what it minimises.
struct refine_options {
  /// The sync mode stage 1 balanced for.
  sync_mode mode = sync_mode::per_micro_step;
  /// Balance that may be given up for less movement: B may exceed stage 1's B by this fraction
  /// (and, in `per_step` mode, A may exceed stage 1's A by it). In [0, 1]; resolved to parts per
  /// million, so every rank derives the same integer limits.
  double eps = 0.0;
  /// Node map and inter-node weight: stage 2 minimises the weighted moved bytes.
  packswap::topology topology{};
};

namespace detail {

// eps in parts per million; throws on values outside [0, 1] (NaN included).
inline std::int64_t eps_ppm(double eps) {
  PACKSWAP_EXPECTS(eps >= 0.0 && eps <= 1.0, errc::invalid_argument,
                   "eps is " << eps << ", must be in [0, 1]");
  return static_cast<std::int64_t>(std::llround(eps * 1e6));
}

// floor(x * (1 + ppm / 1e6)) without overflow for x < 2^62.
inline std::int64_t relax(std::int64_t x, std::int64_t ppm) {
  return x + (x / 1000000) * ppm + (x % 1000000) * ppm / 1000000;
}

} // namespace detail

/// The default stage-2 policy. See `refine()`.
class refiner {
 public:
  assignment operator()(span<const pack_meta> packs, const shape& s, const assignment& stage1,
                        const refine_options& opt) const {
    validate_batch(packs, s);
    validate_assignment(stage1, s);
    opt.topology.validate_for(s.dp);
    (void)detail::eps_ppm(opt.eps);
    return relabel_ranks(packs, s, stage1);
  }
};

/// Whether `P` is a stage-2 policy: callable as `assignment(span<const pack_meta>, const shape&,
/// const assignment& stage1, const refine_options&)`.
template <class P, class = void>
struct is_refiner : std::false_type {};
template <class P>
struct is_refiner<P,
                  std::void_t<decltype(std::declval<const P&>()(
                      std::declval<span<const pack_meta>>(), std::declval<const shape&>(),
                      std::declval<const assignment&>(), std::declval<const refine_options&>()))>>
    : std::is_same<assignment,
                   decltype(std::declval<const P&>()(
                       std::declval<span<const pack_meta>>(), std::declval<const shape&>(),
                       std::declval<const assignment&>(), std::declval<const refine_options&>()))> {
};
template <class P>
inline constexpr bool is_refiner_v = is_refiner<P>::value;

/// Stage 2 with policy `P` (default: `refiner`): among assignments as balanced as `stage1`
/// (within `opt.eps`), one that moves fewer weighted bytes.
template <class P = refiner>
assignment refine(span<const pack_meta> packs, const shape& s, const assignment& stage1,
                  const refine_options& opt = {}, const P& policy = P{}) {
  static_assert(is_refiner_v<P>, "P must be callable as assignment(span<const pack_meta>, "
                                 "const shape&, const assignment&, const refine_options&)");
  return policy(packs, s, stage1, opt);
}

} // namespace packswap
