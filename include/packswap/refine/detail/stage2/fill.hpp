#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/select.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 2: fill. Deals every unpinned pack to a rank with a free slot.
///
/// Starts from the pins; ends with every rank holding k packs. Every pack goes to a rank whose
/// level constraints take it, except a pack no rank has level room for (rare: only when pins
/// crowd a level despite the slack check), which goes to the first rank with a free slot and
/// leaves a crowded level for the repair. Loads may end above the limit.
///
/// Complexity: O(n + dp k). One pass over the cost index, O(dp k) for the level rooms, and per
/// level one pass over the ranks, then per round (one pack to each eligible rank) a radix sort
/// of the eligible ranks' projections and a pass that drops those no longer eligible:
/// O(level size + dp) per level.
class fill_phase {
 public:
  // (2) Deals unpinned packs level by level, most constrained (lowest) first: a differencing
  // step against expectations. Every rank's projected load is what it holds plus, for each level
  // it still lacks, the mean unpinned pack of that level; within a level the heaviest pack goes
  // to the eligible rank whose projection is furthest below the limit, the next heaviest to the
  // next, and so on; ranks still eligible take another round.
  void run(state& st) {
    // Unpinned packs by level, then cost descending, then id: the cost index walked from the
    // top (levels fall as costs rise).
    // In the same pass, the sums behind the mean unpinned cost per level (levels with no
    // unpinned pack borrow the overall mean). No branch on whether a pack is pinned: that follows
    // no pattern along the cost index.
    auto& pool = pool_;
    pool.resize(st.n);
    std::size_t pooled = 0;
    std::vector<std::int64_t> sum(st.k, 0);
    std::vector<std::int64_t> count(st.k, 0);
    std::int64_t all = 0;
    for (std::size_t i = st.n; i-- > 0;) {
      const auto& k = st.pk[static_cast<std::size_t>(st.by_cost(i))];
      const bool free = k.rank < 0;
      pool[pooled] = st.by_cost(i); // kept only if free
      pooled += free ? 1 : 0;
      sum[static_cast<std::size_t>(k.level)] += keep_if(free, k.cost);
      count[static_cast<std::size_t>(k.level)] += keep_if(free, 1);
      all += keep_if(free, k.cost);
    }
    pool.resize(pooled);
    const std::int64_t overall = pool.empty() ? 0 : all / static_cast<std::int64_t>(pool.size());
    std::vector<std::int64_t> mean(st.k, overall);
    for (std::size_t l = 0; l < st.k; ++l) {
      if (count[l] > 0) {
        mean[l] = sum[l] / count[l];
      }
    }
    // expected[r]: what rank r's free slots will add, one mean per missing level, scaled to its
    // free slot count where ties let ranks hold a level twice.
    //
    // Rank r can take a pack of level l iff room(j) = j + 1 - (packs of level <= j) >= 1 for
    // every j >= l. Levels are dealt in rising order, so every pack dealt so far lowers room(j)
    // at every j >= l by one: the test is min_room[l][r] (from the pins) - dealt[r] >= 1. Stored
    // level by level, so that each level's scan over the ranks reads one contiguous row.
    //
    // Both from one pass over the level counts.
    auto& expected = expected_;
    expected.resize(st.dp);
    auto& min_room = min_room_;
    min_room.resize(st.dp * st.k);
    auto& dealt = dealt_;
    dealt.assign(st.dp, 0);
    {
      std::vector<std::int32_t>& room = scratch_room_;
      room.resize(st.k);
      for (std::size_t r = 0; r < st.dp; ++r) {
        const std::int32_t* c = &st.cnt[r * st.k];
        std::int64_t missing = 0;
        std::int64_t e = 0;
        std::int32_t prefix = 0;
        for (std::size_t j = 0; j < st.k; ++j) {
          const bool lacks = c[j] == 0; // summed without a branch to mispredict
          missing += keep_if(lacks, 1);
          e += keep_if(lacks, mean[j]);
          prefix += c[j];
          room[j] = static_cast<std::int32_t>(j) + 1 - prefix;
        }
        const auto free_slots = static_cast<std::int64_t>(st.k - st.used[r]);
        expected[r] = missing == 0 ? free_slots * overall : e / missing * free_slots;
        std::int32_t low = room[st.k - 1];
        for (std::size_t j = st.k; j-- > 0;) {
          low = std::min(low, room[j]);
          min_room[j * st.dp + r] = low;
        }
      }
    }
    // Eligible ranks (in rank order) with their projected loads; the deal order is lightest
    // projection first, ties by rank. Within a level a rank only loses eligibility (its free
    // slots and level room only shrink), so each round filters the previous round's list: a
    // level costs O(dp) once plus O(eligible) per round.
    auto& eligible_rank = eligible_rank_;
    auto& eligible_load = eligible_load_;
    eligible_rank.resize(st.dp);
    eligible_load.resize(st.dp);
    auto& stranded = stranded_;
    stranded.clear();
    for (std::size_t begin = 0; begin < pool.size();) {
      const std::int32_t level = st.pk[static_cast<std::size_t>(pool[begin])].level;
      std::size_t end = begin;
      while (end < pool.size() && st.pk[static_cast<std::size_t>(pool[end])].level == level) {
        ++end;
      }
      const std::int64_t level_mean = mean[static_cast<std::size_t>(level)];
      const std::int32_t* room = &min_room[static_cast<std::size_t>(level) * st.dp];
      // Written always, kept only if eligible: no branch to mispredict.
      const auto keep = [&](std::size_t at, std::size_t r) {
        eligible_rank[at] = static_cast<std::int32_t>(r);
        eligible_load[at] = st.load[r] + expected[r];
        return st.used[r] < st.k && room[r] - dealt[r] >= 1 ? 1 : 0;
      };
      std::size_t eligible = 0;
      for (std::size_t r = 0; r < st.dp; ++r) {
        eligible += keep(eligible, r);
      }
      for (std::size_t next = begin; next < end;) {
        if (eligible == 0) {
          stranded.insert(stranded.end(), pool.begin() + static_cast<std::ptrdiff_t>(next),
                          pool.begin() + static_cast<std::ptrdiff_t>(end));
          break;
        }
        // The m lightest projections, in order.
        const std::size_t m = std::min(eligible, end - next);
        order_asc(span<const std::int64_t>(eligible_load.data(), eligible), deal_order_,
                  fill_sort_);
        for (std::size_t i = 0; i < m; ++i) {
          if (i + state::prefetch_distance < m) {
            const auto ahead = static_cast<std::size_t>(
                eligible_rank[static_cast<std::size_t>(deal_order_[i + state::prefetch_distance])]);
            prefetch(&st.cnt[ahead * st.k]);
            prefetch(&st.items[ahead * st.k + st.used[ahead]]);
          }
          const auto r =
              static_cast<std::size_t>(eligible_rank[static_cast<std::size_t>(deal_order_[i])]);
          st.place(static_cast<std::size_t>(pool[next + i]), r);
          ++dealt[r];
          expected[r] = std::max<std::int64_t>(0, expected[r] - level_mean);
        }
        next += m;
        std::size_t still = 0;
        for (std::size_t i = 0; i < eligible; ++i) {
          still += keep(still, static_cast<std::size_t>(eligible_rank[i]));
        }
        eligible = still;
      }
      begin = end;
    }
    // A pack no rank had level room for: take the first rank with a free slot and let the repair
    // step fix the crowded level (rare: only when pins crowd a level despite the slack check).
    // Ranks only fill up, so the first with a free slot only moves forward.
    std::size_t first_free = 0;
    for (const auto p32 : stranded) {
      while (st.used[first_free] == st.k) {
        ++first_free;
      }
      st.place(static_cast<std::size_t>(p32), first_free);
    }
  }

 private:
  std::vector<std::int32_t> pool_, min_room_, dealt_, stranded_;
  std::vector<std::int64_t> expected_;
  std::vector<std::int32_t> eligible_rank_, deal_order_, scratch_room_;
  std::vector<std::int64_t> eligible_load_;
  order_scratch fill_sort_;
};

} // namespace packswap::detail::stage2
