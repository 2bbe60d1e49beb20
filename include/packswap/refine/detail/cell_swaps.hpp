#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail {

/// Stage 2's home-bringing pass over cells of several packs (any mbs): a pack away from home
/// trades places with a pack its home rank holds for somebody else, whenever both cells stay
/// within their micro-step's cap (so A cannot grow), both ranks within `limit` (B), and fewer
/// weighted bytes move. `caps[m]` bounds every cell of micro-step m. Modifies `a` in place.
///
/// Complexity: O(N) to set up, then per pass every pack away from home weighs every place of its
/// home rank: O(N k) with k = ga * mbs packs per rank, the solve's largest term for mbs > 1 at
/// large ga (16 x 256 x 4: tens of milliseconds at 16,384 packs).
inline void bring_home_cells(span<const pack_meta> packs, const shape& s, const topology& topo,
                             span<const std::int64_t> caps, std::int64_t limit, assignment& a,
                             std::int32_t passes) {
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto ga = static_cast<std::size_t>(s.ga);
  const auto k = static_cast<std::size_t>(s.packs_per_rank());
  const std::size_t n = packs.size();
  std::vector<std::int64_t> cell_load(dp * ga, 0);
  std::vector<std::int64_t> rank_load(dp, 0);
  std::vector<std::int32_t> items(n); // items[r * k + i]: the packs rank r computes
  std::vector<std::int32_t> slot(n);
  std::vector<std::size_t> used(dp, 0);
  for (std::size_t p = 0; p < n; ++p) {
    const auto r = static_cast<std::size_t>(a[p].rank);
    cell_load[r * ga + static_cast<std::size_t>(a[p].micro_step)] += packs[p].cost;
    rank_load[r] += packs[p].cost;
    slot[p] = static_cast<std::int32_t>(used[r]);
    items[r * k + used[r]++] = static_cast<std::int32_t>(p);
  }
  const auto away = [&](std::size_t p, std::int32_t r) {
    return topo.weight(packs[p].source_rank, r) * packs[p].bytes;
  };
  // Beside every place (r * k + i), what the pack there reads in the scan below, so that the
  // scan runs over contiguous memory; a place's micro-step never changes (a swap exchanges the
  // packs' cells).
  std::vector<std::int64_t> at_cost(n);
  std::vector<std::int64_t> at_bytes(n);
  std::vector<std::int32_t> at_src(n);
  std::vector<std::int32_t> at_step(n);
  for (std::size_t at = 0; at < n; ++at) {
    const auto q = static_cast<std::size_t>(items[at]);
    at_cost[at] = packs[q].cost;
    at_bytes[at] = packs[q].bytes;
    at_src[at] = packs[q].source_rank;
    at_step[at] = a[q].micro_step;
  }
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
      // d = cost_p - cost_q moves from r to h: within both ranks' limit and r's cell cap.
      const std::int64_t d_hi = limit - rank_load[hh];
      const std::int64_t d_lo = std::max(rank_load[rr] - limit, cell_load[rr * ga + mp] - caps[mp]);
      const std::int64_t gain_p = away(p, h) - away(p, r);
      std::size_t best = n;
      std::int64_t best_delta = 0;
      for (std::size_t at = hh * k; at < (hh + 1) * k; ++at) {
        const std::int32_t src = at_src[at];
        if (src == h) {
          continue; // home: trading it away is never a gain here
        }
        const std::int64_t d = cost_p - at_cost[at];
        const auto mq = static_cast<std::size_t>(at_step[at]);
        if (d > d_hi || d < d_lo || cell_load[hh * ga + mq] + d > caps[mq]) {
          continue;
        }
        const std::int64_t b = at_bytes[at];
        const std::int64_t delta = gain_p + topo.weight(src, r) * b - topo.weight(src, h) * b;
        if (delta < best_delta) {
          best_delta = delta;
          best = at;
        }
      }
      if (best == n) {
        continue;
      }
      const std::size_t at_q = best;
      const auto q = static_cast<std::size_t>(items[at_q]);
      const std::size_t at_p = rr * k + static_cast<std::size_t>(slot[p]);
      const auto mq = static_cast<std::size_t>(at_step[at_q]);
      const std::int64_t d = cost_p - packs[q].cost;
      rank_load[hh] += d;
      rank_load[rr] -= d;
      cell_load[hh * ga + mq] += d;
      cell_load[rr * ga + mp] -= d;
      std::swap(items[at_p], items[at_q]);
      std::swap(at_cost[at_p], at_cost[at_q]);
      std::swap(at_bytes[at_p], at_bytes[at_q]);
      std::swap(at_src[at_p], at_src[at_q]);
      std::swap(slot[p], slot[q]);
      std::swap(a[p], a[q]);
      changed = true;
    }
    if (!changed) {
      return;
    }
  }
}

} // namespace packswap::detail
