#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <cstdint>
#include <vector>

namespace packswap::detail {

/// Stage 2's home-bringing pass over cells of several packs (any mbs): a pack away from home
/// trades places with a pack its home rank holds for somebody else, whenever both cells stay
/// within their micro-step's cap (so A cannot grow), both ranks within `limit` (B), and fewer
/// weighted bytes move. `caps[m]` bounds every cell of micro-step m. Modifies `a` in place.
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
      std::size_t best = n;
      std::int64_t best_delta = 0;
      for (std::size_t i = 0; i < k; ++i) {
        const auto q = static_cast<std::size_t>(items[hh * k + i]);
        if (packs[q].source_rank == h) {
          continue; // q is home: trading it away is never a gain here
        }
        const auto mq = static_cast<std::size_t>(a[q].micro_step);
        const std::int64_t d = packs[p].cost - packs[q].cost; // load moving from r to h
        if (rank_load[hh] + d > limit || rank_load[rr] - d > limit ||
            cell_load[hh * ga + mq] + d > caps[mq] || cell_load[rr * ga + mp] - d > caps[mp]) {
          continue;
        }
        const std::int64_t delta = away(p, h) - away(p, r) + away(q, r) - away(q, h);
        if (delta < best_delta) {
          best_delta = delta;
          best = q;
        }
      }
      if (best == n) {
        continue;
      }
      const std::size_t q = best;
      const auto mq = static_cast<std::size_t>(a[q].micro_step);
      const std::int64_t d = packs[p].cost - packs[q].cost;
      rank_load[hh] += d;
      rank_load[rr] -= d;
      cell_load[hh * ga + mq] += d;
      cell_load[rr * ga + mp] -= d;
      std::swap(items[rr * k + static_cast<std::size_t>(slot[p])],
                items[hh * k + static_cast<std::size_t>(slot[q])]);
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
