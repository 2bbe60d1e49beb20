#pragma once

#include "packswap/refine/detail/two_ranks.hpp"

#include <cstdint>

/// Stage 2's deterministic work bound (mbs = 1): what the searches, the fallback's bring-home and
/// the review may spend for n packs, in units of work the phases count (never a clock), scaled by
/// `refine_options::work_scale`. All O(1). docs/solver-worst-case.md, "The work bound", gives the
/// formula and how often it is reached.

namespace packswap::detail {

// floor(w * permille / 1000) for w >= 0 and permille in [1, 64,000], without overflow for any
// work count up to int64 max / 64.
constexpr std::int64_t scale_work(std::int64_t w, std::int64_t permille) {
  return (w / 1000) * permille + (w % 1000) * permille / 1000;
}

// Work the searches of stage 2 may do (up to 16,384 packs the fallback's bring-home included, see
// stage2_search_bound): per pack of the batch, plus a constant that lets small batches run the
// chained repairs their hardest cases need (see `refine_sorted`). Per unit of work, time grows with
// the batch (its records leave the caches), so the share per pack is small: normal batches use 2-25
// per pack.
inline constexpr std::int64_t stage2_work_per_pack = 32;
inline constexpr std::int64_t stage2_work_constant = std::int64_t{1} << 19;
// The fallback's bring-home's allowance: up to 16,384 packs kept back from the search's, above
// it on top (see stage2_search_bound).
inline constexpr std::int64_t fallback_work_per_pack = 8;
inline constexpr std::int64_t fallback_work_constant = std::int64_t{1} << 16;
// The search's review (see refine_sorted): once its work reaches review_work_per_pack per pack
// plus review_work_constant, it ends, and stage 1 renamed is the answer, where that moves at most
// (review_slack_den + 1) / review_slack_den of a floor on the bytes any answer moves
// (stage2::moved_floor) and the floor is at least half of stage 1's bytes.
inline constexpr std::int64_t review_work_per_pack = 8;
inline constexpr std::int64_t review_work_constant = std::int64_t{1} << 17;
inline constexpr std::int64_t review_slack_den = 32;

// The work stage 2's searches may do for n packs: 32 n + 2^19, the fallback's included up to
// shared_bound_up_to packs (see stage2_search_bound); every bound below is scaled by the options'
// work_scale, in parts per thousand (`permille`, 1,000 unless given).
constexpr std::int64_t stage2_bound(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(stage2_work_per_pack * n + stage2_work_constant, permille);
}

// The fallback's allowance for n packs: 8 n + 2^16.
constexpr std::int64_t fallback_allowance(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(fallback_work_per_pack * n + fallback_work_constant, permille);
}

// The work after which the search's review is due for n packs: 8 n + 2^17.
constexpr std::int64_t review_work(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(review_work_per_pack * n + review_work_constant, permille);
}

// Batches up to which the fallback's allowance is kept back from the bound (see
// stage2_search_bound).
inline constexpr std::int64_t shared_bound_up_to = 16384;

// The work the search (every attempt together) may do for n packs, before the fallback. Up to
// shared_bound_up_to packs, the bound less the fallback's allowance (24 n + 458,752), so that a
// search that ends at it and the fallback after it stay within the bound together, and a solve's
// time within the bound's (with stage 1 and the phases before the repair, which count none).
// Where the allowance came on top of a search that could spend the whole bound, the slowest
// batches of the stress set were such searches: over seeds 1-12 at 16,384 packs up to 1.13 M units
// (`bimodal` 1,024 x 16 at eps = 0.001, seed 5; 15 ms, 5.2 times the benchmark batch's solve), now
// at most 1.06 M. The repair's pace is still judged against the whole bound
// (repair_pace::judged_limit), so a search runs as before until it reaches this one. Searches that
// succeeded past it now end there and take the fallback (or, where only their bring-home passed
// it, keep their answer with the trades made): over those 4,680 batches two move more (`pareto` 4
// x 1,024 at eps = 0, seed 6: 0.447 of Karmarkar-Karp's bytes instead of 0.393; `bimodal` 256 x
// 64 at eps = 0.001, seed 9, 0.561 instead of 0.523), three fewer; none of the benchmark
// workloads' 3,600 batches changes. In larger batches the search keeps the whole bound and the
// fallback's allowance comes on top: there a search that succeeds late can move far fewer bytes
// than the fallback (`multiples` 1,024 x 256 at 262,144 packs, eps = 0, seed 2: 0.079 of
// Karmarkar-Karp's bytes after 8.7 M units; ended at the search's part, the fallback's 0.897).
constexpr std::int64_t stage2_search_bound(std::int64_t n, std::int64_t permille = 1000) {
  return n <= shared_bound_up_to ? stage2_bound(n, permille) - fallback_allowance(n, permille)
                                 : stage2_bound(n, permille);
}

// The most work stage 2's searches do for n packs in ga micro-steps: the search's bound and the
// fallback's allowance (each with a constant for small batches: the bound, up to
// shared_bound_up_to packs), plus what may be charged past a check: the step or visit under way
// (the level tables of the roomiest ranks, O(ga), and a bounded number of candidates) and the
// indexes a phase builds before its first check (a repair run's first step and the level lists,
// n + dp units each, the rows at most n / 16 + dp), each at most once after the search's limit and
// once after the fallback's: five of n + dp units at most, dp = n / ga, which a bound scaled far
// down (work_scale) reaches. With two ranks, the knapsack's work (exact, not scaled by
// work_scale). O(n) (O(n log n) with two ranks), as ga <= n.
constexpr std::int64_t stage2_work_bound(std::int64_t n, std::int64_t ga,
                                         std::int64_t permille = 1000) {
  return stage2_search_bound(n, permille) + fallback_allowance(n, permille) + 5 * (n + n / ga) +
         16 * ga + 16384 + (n == 2 * ga ? two_ranks::work_bound(n) : 0);
}

} // namespace packswap::detail
