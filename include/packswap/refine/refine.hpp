#pragma once

#include "packswap/balance/metrics.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/refine_sorted.hpp"
#include "packswap/refine/options.hpp"

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace packswap {

namespace detail {

// Each rank's packs, sorted by cost descending (ties by id), fill micro-steps 0, 1, ...
// `order` lists all pack ids in that order, so walking it deals every rank's packs sorted.
inline assignment deal_micro_steps(const shape& s, span<const std::int32_t> rank_of,
                                   span<const std::int32_t> order) {
  const auto mbs = static_cast<std::size_t>(s.mbs);
  std::vector<std::size_t> used(static_cast<std::size_t>(s.dp), 0);
  assignment out(order.size());
  for (const auto p : order) {
    const auto r = static_cast<std::size_t>(rank_of[static_cast<std::size_t>(p)]);
    out[static_cast<std::size_t>(p)] =
        cell{static_cast<std::int32_t>(r), static_cast<std::int32_t>(used[r]++ / mbs)};
  }
  return out;
}

} // namespace detail

/// The default stage-2 policy: see `refine()`.
///
/// For mbs = 1 it runs the home-first search (`detail::home_first`): A stays within stage 1's
/// micro-step maxima (so A == LB_A stays exact in `per_micro_step` mode), B within (1 + eps) *
/// stage 1's B, and in `per_step` mode every micro-step cap may also grow by eps. Its searches
/// count their work and stop at a bound proportional to the pack count
/// (`detail::stage2_work_per_pack` per pack, plus a constant, times `refine_options::work_scale`),
/// so its time is bounded on any input and every rank stops at the same point. Should the search
/// fail to meet the limits (it tries the wide band, then the wide and a narrow band with a repair
/// that may also chain two swaps), run out of work, or move more than stage 1, the answer is stage
/// 1 with its ranks renamed to keep the most bytes home (`relabel_ranks`), then packs brought home
/// by trades within its balance, which never moves more than stage 1. Where the search's answer
/// moves a pack holding more than 1/64 of the batch's bytes, that fallback is computed too and the
/// one moving fewer weighted bytes kept. Else, where it moves more than half of stage 1's bytes at
/// eps < 0.001 (more than two ranks, at most 8,192 packs), the search goes on in rounds that bring
/// packs home under a limit 0.1% looser and repair back to the limit, within three times the work
/// done before them, while they move fewer weighted bytes; at eps >= 0.001 (at most 16,384 packs)
/// with one lighter round under a limit 0.2% looser, where it moves more than half (two fifths from
/// eps = 0.01). With two ranks (dp = 2), every answer that keeps A is a choice after each run of
/// equal costs that ends at an odd sorted position, and the choices that move the fewest bytes are
/// found exactly (`detail::two_ranks`): where they keep B within the limit, or flips of them that
/// cost no bytes do, they are the answer; else walks from them towards the limit (one back from its
/// far side too) give a second answer, kept where it moves fewer weighted bytes than the search's.
/// For mbs > 1 it is that renaming followed by swaps that bring packs home while every cell stays
/// within its micro-step's stage-1 maximum and every rank within the B limit. The search and the
/// swaps add costs and weighted bytes in int64: for batches whose total cost exceeds int64 max / (2
/// (ga + 2)) they run on the costs divided by their greatest common divisor (exact: the same limits
/// hold) where that brings the total within it; otherwise, and where the byte total exceeds int64
/// max / (4 * inter-node weight), they stand down, and the answer is the renaming alone.
class refiner {
 public:
  /// The stage-2 assignment for `packs` given stage 1's `stage1`; validates its inputs.
  [[nodiscard]] assignment operator()(span<const pack_meta> packs, const shape& s,
                                      const assignment& stage1, const refine_options& opt) const {
    validate_batch(packs, s);
    validate_assignment(stage1, s);
    detail::validate_stage2_options(opt, s.dp);
    std::vector<std::int64_t> costs(packs.size());
    for (std::size_t p = 0; p < packs.size(); ++p) {
      costs[p] = packs[p].cost;
    }
    const auto order = detail::order_desc(costs);
    detail::load_profile loads;
    std::vector<std::int64_t> table;
    detail::profile_loads(costs, stage1, s, loads, table);
    return detail::refine_sorted(packs, order, s, stage1, loads, opt);
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
/// `is_refiner<P>::value`.
template <class P>
inline constexpr bool is_refiner_v = is_refiner<P>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The C++20 spelling of `is_refiner_v`.
template <class P>
concept refiner_like = is_refiner_v<P>;
#endif

/// Stage 2 with policy `P` (default: `refiner`): among assignments as balanced as `stage1`
/// (within `opt.eps`), one that moves fewer weighted bytes.
template <class P = refiner>
[[nodiscard]] assignment refine(span<const pack_meta> packs, const shape& s,
                                const assignment& stage1, const refine_options& opt = {},
                                const P& policy = P{}) {
  static_assert(is_refiner_v<P>, "P must be callable as assignment(span<const pack_meta>, "
                                 "const shape&, const assignment&, const refine_options&)");
  return policy(packs, s, stage1, opt);
}

} // namespace packswap
