#pragma once

// The fewest bytes any assignment with A = LB_A moves, by exhaustive search: the oracle the
// tests read the moved-bytes bound (moved_bound.hpp) and the two-rank solve against. Small
// batches only (dp^n assignments).

#include <packswap/batch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "moved_bound.hpp"

namespace packswap::test {

// The fewest bytes moved by an assignment that holds ga packs on every rank and puts every
// rank's i-th largest pack at or below cap i (the sorted chunks' maxima), that is, one with A =
// LB_A, and every rank's load at most `limit`; by trying every assignment. -1 if none (with no
// limit there always is one: the sorted deal).
inline std::int64_t fewest_moved(const std::vector<pack_meta>& packs, const shape& s,
                                 std::int64_t limit = std::numeric_limits<std::int64_t>::max()) {
  const auto n = packs.size();
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto k = static_cast<std::size_t>(s.ga);
  const auto caps = chunk_caps(packs, s);
  std::vector<std::vector<std::int64_t>> held(dp);
  std::int64_t best = -1;
  std::int64_t moved = 0;
  std::function<void(std::size_t)> deal = [&](std::size_t p) {
    if (p == n) {
      for (auto costs : held) {
        std::sort(costs.begin(), costs.end(), std::greater<>());
        std::int64_t load = 0;
        for (std::size_t i = 0; i < k; ++i) {
          if (costs[i] > caps[i]) {
            return;
          }
          load += costs[i];
        }
        if (load > limit) {
          return;
        }
      }
      best = best < 0 ? moved : std::min(best, moved);
      return;
    }
    for (std::size_t r = 0; r < dp; ++r) {
      if (held[r].size() == k) {
        continue;
      }
      const std::int64_t away =
          static_cast<std::size_t>(packs[p].source_rank) == r ? 0 : packs[p].bytes;
      held[r].push_back(packs[p].cost);
      moved += away;
      deal(p + 1);
      moved -= away;
      held[r].pop_back();
    }
  };
  deal(0);
  return best;
}

} // namespace packswap::test
