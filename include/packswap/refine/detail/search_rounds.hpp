#pragma once

#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/home_first.hpp"

#include <cstddef>
#include <cstdint>

/// The rounds a successful search may go on with from a looser limit (see refine_sorted,
/// refine_sorted.hpp): whether, how many, how much looser, and with which repair. All O(1).

namespace packswap::detail {

// How a successful search goes on from a looser limit (see refine_sorted): `rounds` rounds of
// home_first::loosen_and_repair under a limit `looser_ppm` (parts per million) above the batch's,
// each repair with the search's tuning or, where `light`, with light_round_tuning's. No rounds:
// the search's answer stands.
struct rounds_plan {
  std::int32_t rounds = 0;
  std::int64_t looser_ppm = 0;
  bool light = false;
};

// Where the answer moves more than rounds_share(eps) of stage 1's bytes, with more than two
// ranks: under a limit with less room than loosened_ppm (eps = 0), up to loosened_rounds rounds
// at loosened_ppm looser, up to loosened_up_to packs; with more room, one light round at
// roomy_round_ppm looser, up to roomy_round_up_to packs; either within (1 + loosened_work) times
// the work done before them.
inline constexpr std::int64_t loosened_ppm = 1000;
inline constexpr std::int32_t loosened_rounds = 8;
inline constexpr std::int64_t loosened_work = 3;
inline constexpr std::int64_t loosened_up_to = 8192;
inline constexpr std::int64_t roomy_round_ppm = 2000;
inline constexpr std::int64_t roomy_round_up_to = 16384;
inline constexpr std::int64_t roomy_share_ppm = 10000;

// The share of stage 1's bytes, in per mille, above which a successful search's answer goes on
// from a looser limit: two fifths from eps = 1% (roomy_share_ppm), half below it.
inline std::int64_t rounds_share(std::int64_t ppm) {
  return ppm >= roomy_share_ppm ? 400 : 500;
}

// Whether and how a successful search on `dp` ranks and `n` packs, at eps `ppm`, whose answer
// moves `moved` weighted bytes against stage 1's `stage1_bytes`, goes on (see refine_sorted).
// Exact for any byte counts (the share is compared as a 128-bit product). O(1).
inline rounds_plan plan_rounds(std::int64_t ppm, std::int64_t n, std::size_t dp, std::int64_t moved,
                               std::int64_t stage1_bytes) {
  if (dp <= 2 || compare_products(moved, 1000, stage1_bytes, rounds_share(ppm)) <= 0) {
    return {};
  }
  if (ppm < loosened_ppm) {
    return n <= loosened_up_to ? rounds_plan{loosened_rounds, loosened_ppm, false} : rounds_plan{};
  }
  return n <= roomy_round_up_to ? rounds_plan{1, roomy_round_ppm, true} : rounds_plan{};
}

// The light rounds' repair: half the picks, partners and scan of the search's, which takes the
// round's work to about 0.6 of what the search's tuning does (`bimodal` 1,024 x 16 at eps = 0.01,
// seed 2: 0.13 million units instead of 0.22 million, moving 0.395 of Karmarkar-Karp's bytes
// instead of 0.393).
inline home_first::tuning light_round_tuning(home_first::tuning t) {
  t.repair_picks /= 2;
  t.roomy_partners /= 2;
  t.scan_limit /= 2;
  return t;
}

} // namespace packswap::detail
