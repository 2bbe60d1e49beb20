#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/detail/cell_places.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace packswap::detail {

/// Stage 2's home-bringing pass over cells of several packs (any mbs): a pack away from home
/// trades places with a pack its home rank holds for somebody else, whenever both cells stay
/// within their micro-step's cap (so A cannot grow), both ranks within `limit` (B), and fewer
/// weighted bytes move: of the trades that qualify, the one that saves most, the first place of
/// the home rank among equals. `caps[m]` bounds every cell of micro-step m. Modifies `a` in
/// place.
///
/// The trades that qualify are those whose pack's cost lies in a window (the room of both ranks
/// and of p's cell) and whose reach covers p's cost (the room of its own cell), which
/// `cell_places` lists without reading the rest of the home rank.
///
/// Complexity: O(N log N) to set up; per pack away from home and pass, a query of its home rank:
/// O(log k + (log k + width) per block read), the blocks read being those that hold a trade that
/// qualifies, two more at the window's ends and those whose bound was stale; O(k) at worst, k =
/// ga * mbs packs per rank. Per trade O(mbs log k + the distance its packs' entries move in cost
/// order). At most `passes` passes. `pl`: working memory, kept by callers that refine every step.
inline void bring_home_cells(span<const pack_meta> packs, const shape& s, const topology& topo,
                             span<const std::int64_t> caps, std::int64_t limit, assignment& a,
                             std::int32_t passes, cell_places& pl) {
  const auto ga = static_cast<std::size_t>(s.ga);
  const std::size_t n = packs.size();
  pl.prepare(packs, s, topo, caps, a);
  for (std::int32_t pass = 0; pass < passes; ++pass) {
    bool changed = false;
    for (std::size_t p = 0; p < n; ++p) {
      const std::int32_t r = a[p].rank;
      const std::int32_t h = packs[p].source_rank;
      if (r == h) {
        continue;
      }
      const auto rr = static_cast<std::size_t>(r);
      const auto hh = static_cast<std::size_t>(h);
      const auto mp = static_cast<std::size_t>(a[p].micro_step);
      const std::int64_t cost_p = packs[p].cost;
      // d = cost_p - cost_q moves from r to h: within both ranks' limit and r's cell cap; h's
      // cell cap is q's reach.
      const std::int64_t d_hi = limit - pl.rank_load[hh];
      const std::int64_t d_lo =
          std::max(pl.rank_load[rr] - limit, pl.cell_load[rr * ga + mp] - caps[mp]);
      const std::int64_t gain_p = -pl.weight(hh, rr) * packs[p].bytes;
      std::size_t best = cell_places::none;
      std::int64_t best_delta = 0;
      pl.each_fit(hh, {cost_p - d_hi, cost_p - d_lo, cost_p}, [&](std::size_t at) {
        const std::int64_t b = pl.bytes[at];
        const auto sq = static_cast<std::size_t>(pl.src[at]);
        const std::int64_t delta = gain_p + (pl.weight(sq, rr) - pl.weight(sq, hh)) * b;
        if (delta < best_delta || (delta == best_delta && delta < 0 && at < best)) {
          best = at;
          best_delta = delta;
        }
      });
      if (best == cell_places::none) {
        continue;
      }
      const auto q = static_cast<std::size_t>(pl.item[best]);
      pl.trade(pl.place_of(p, rr), best);
      std::swap(a[p], a[q]);
      changed = true;
    }
    if (!changed) {
      return;
    }
  }
}

} // namespace packswap::detail
