#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

// The repair's search through the cost index (stage 2, phase 4, see repair_phase): the packs of
// the batch by cost (state::sorted_cost, state::by_cost), each level one stretch of it, searched
// for the partners of a pick whose swap sheds a given excess. It reads the state and counts its
// work there; the candidates go to the repair's `consider`.

// The first index in [first, last) of the ascending `v` whose entry is not below `key`, else
// `last`: std::lower_bound with the comparison feeding a conditional move, not a branch (a
// search for a pack's cost goes either way at random, and mispredictions cost more than the
// scans that follow). O(log(last - first)).
inline std::size_t first_not_below(const std::vector<std::int64_t>& v, std::size_t first,
                                   std::size_t last, std::int64_t key) {
  if (first >= last) {
    return last;
  }
  const std::int64_t* base = v.data() + first;
  std::size_t len = last - first;
  while (len > 1) {
    const std::size_t half = len / 2;
    base = base[half] < key ? base + half : base;
    len -= half;
  }
  return static_cast<std::size_t>(base - v.data()) + (*base < key ? 1 : 0);
}

// The same over the cost index, for a key at most pack x's cost (x's own entry is not below
// it): within x's level, at or below x, where most such searches end, else below the level.
inline std::size_t cost_index_at(const state& st, std::size_t x, std::int64_t key) {
  const std::size_t lb = st.level_begin[static_cast<std::size_t>(st.pk[x].level)];
  return st.sorted_cost[lb] < key ? first_not_below(st.sorted_cost, lb + 1, st.n - 1 - x, key)
                                  : first_not_below(st.sorted_cost, 0, lb, key);
}

// Partners for the picked packs through the cost index: a full fix needs cost(y) <= cost(x) -
// exc; scan downward from there (growing difference), then upward toward cost(x) (partial
// fixes), and, where x's level has no slack, the cheapest packs of its level (the largest
// partial fixes). Each scan's ends come from the index before it starts (a search for the
// split, and one for the reach where it cuts a scan short). Once `full_known()` (a full fix is
// the best so far), a pack whose cost, read from the index, rules out a full fix is weighed
// there without a call to `consider`: the partial fixes, and the cheapest packs of x's level
// that no rank has room for. Every pack the scans pass counts as one unit of work either way.
// `picks`: the packs of the rank under repair to find partners for; `max_room`: the room of the
// roomiest rank (no rank can absorb a larger difference; not read in level repairs);
// `scan_limit`: the packs each scan passes at most. O(p (log n + scan_limit)) for p picks.
template <class Consider, class FullKnown>
void search_cost_index(state& st, const std::vector<std::size_t>& picks, std::int64_t exc,
                       bool crowded, std::int64_t max_room, std::int32_t scan_limit,
                       Consider&& consider, FullKnown&& full_known) {
  const auto limit = static_cast<std::size_t>(scan_limit);
  std::int64_t weighed = 0; // the packs the scans pass, each one unit of work
  for (const std::size_t x : picks) {
    const std::int64_t x_cost = st.pk[x].cost;
    const std::int64_t want = x_cost - std::max<std::int64_t>(exc, 1);
    const std::size_t split = cost_index_at(st, x, want + 1); // the first entry above want
    // The cost index holds each level contiguously. Where no rank holds fewer than l + 1
    // packs of level <= l (no slack), only packs of x's own level can trade places with it.
    // No rank can absorb more than the largest room, so larger differences are never useful
    // (outside level repairs, which may overload a partner).
    const auto level = static_cast<std::size_t>(st.pk[x].level);
    const std::size_t lb = st.level_begin[level];
    const std::size_t le = st.level_end[level];
    const std::int64_t reach = crowded ? x_cost : max_room;
    // max(i, the first entry within reach: cost(x) - cost(y) <= reach from there up), searched
    // for only where entry i is out of reach (most scans end within it first).
    std::size_t reached = st.n; // not searched yet
    const auto within_reach_from = [&](std::size_t i) {
      if (st.sorted_cost[i] >= x_cost - reach) {
        return i;
      }
      if (reached == st.n) {
        reached = cost_index_at(st, x, x_cost - reach);
      }
      return std::max(i, reached);
    };
    // Full fixes of x's level: downward from the split, growing difference.
    const std::size_t level_split = std::min(std::max(split, lb), le);
    const std::size_t level_low =
        within_reach_from(std::max(lb, level_split > limit ? level_split - limit : 0));
    for (std::size_t i2 = level_split; i2 > level_low; --i2) {
      consider(x, static_cast<std::size_t>(st.by_cost(i2 - 1)));
    }
    weighed += static_cast<std::int64_t>(level_split - std::min(level_split, level_low));
    // Where the level has slack, across levels too: the cheaper packs of later levels, below
    // x's level's stretch.
    if (crowded || st.slack[level] != 0) {
      const std::size_t start = std::min(split, lb);
      const std::size_t low = within_reach_from(start > limit ? start - limit : 0);
      for (std::size_t i2 = start; i2 > low; --i2) {
        consider(x, static_cast<std::size_t>(st.by_cost(i2 - 1)));
      }
      weighed += static_cast<std::int64_t>(start - std::min(start, low));
    }
    // Partial fixes: upward from the split toward cost(x) (a difference below exc, so never a
    // full fix), and the cheapest packs of x's level (the largest differences).
    const bool partial_useless = full_known();
    for (std::size_t i2 = within_reach_from(split), step = 0; i2 < st.n && step < limit / 2;
         ++i2, ++step) {
      if (st.sorted_cost[i2] >= x_cost) {
        break;
      }
      ++weighed;
      if (!partial_useless) {
        consider(x, static_cast<std::size_t>(st.by_cost(i2)));
      }
    }
    for (std::size_t i2 = lb; i2 < std::min(le, lb + limit / 2); ++i2) {
      if (st.sorted_cost[i2] >= x_cost) {
        break;
      }
      ++weighed;
      const std::int64_t d = x_cost - st.sorted_cost[i2];
      if (crowded || (d <= max_room && d >= exc) || !full_known()) {
        consider(x, static_cast<std::size_t>(st.by_cost(i2)));
      }
    }
  }
  st.work += weighed;
}

} // namespace packswap::detail::stage2
