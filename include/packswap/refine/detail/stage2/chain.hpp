#pragma once

#include "packswap/refine/detail/stage2/pick.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace packswap::detail::stage2 {

/// The repair's last resort, in the attempts made after the others failed: two swaps in a chain
/// for a rank no single swap helps. Weighs at most (2 chain_picks 2 chain_width)^2 pairs of
/// swaps per step, checking the work bound before each first swap.
class chain_search {
 public:
  // For a rank r above the limit that no single swap helps: two swaps in a chain, x (on r) for a
  // cheaper y of its level on s1, then x2 (on s1, now over) for a cheaper y2 of x2's level on s2,
  // that together lower the excess of the three ranks. Same-level swaps keep every rank's level
  // counts. Candidates come from the cost index near the difference each swap must carry, among
  // the packs `pack_picker` chooses on r and on s1; the chain ending with the least excess wins,
  // then the fewest weighted bytes, then ids. Each first swap is tried in place and undone. Sets
  // `s1` and `s2` to the partners. O(p s (k + p s)) for p picks and s index entries.
  bool step(state& st, const tuning& t, std::size_t r, std::size_t& s1_out, std::size_t& s2_out) {
    const std::int64_t exc = st.excess(r);
    if (exc == 0 || st.level_excess(r) > 0) {
      return false;
    }
    const auto width = static_cast<std::size_t>(t.chain_width);
    struct chain {
      std::int64_t after = 0, delta = 0;
      std::size_t x = 0, y = 0, x2 = 0, y2 = 0;
    } best;
    bool found = false;
    pick_(st, r, exc, -1, t.chain_picks);
    first_picks_ = pick_.picks;
    for (const std::size_t x : first_picks_) {
      same_level_below(st, x, st.pk[x].cost - exc, width, [&](std::size_t y) {
        const auto s1 = static_cast<std::size_t>(st.pk[y].rank);
        if (s1 == r || st.out_of_work()) {
          return;
        }
        const std::int64_t before_1 = exc + st.excess(s1);
        const std::int64_t delta_1 = st.swap_delta(x, r, y, s1);
        st.swap_packs(x, y);
        const std::int64_t pushed = st.excess(s1);
        if (pushed > 0) {
          pick_(st, s1, pushed, -1, t.chain_picks);
        }
        for (std::size_t j = 0; pushed > 0 && j < pick_.picks.size(); ++j) {
          const std::size_t x2 = pick_.picks[j];
          same_level_below(st, x2, st.pk[x2].cost - pushed, width, [&](std::size_t y2) {
            const auto s2 = static_cast<std::size_t>(st.pk[y2].rank);
            if (s2 == r || s2 == s1) {
              return;
            }
            const std::int64_t d = st.pk[x2].cost - st.pk[y2].cost;
            const std::int64_t after = st.excess(r) +
                                       std::max<std::int64_t>(0, st.load[s1] - d - st.limit) +
                                       std::max<std::int64_t>(0, st.load[s2] + d - st.limit);
            if (after >= before_1 + st.excess(s2)) {
              return;
            }
            const chain c{after, delta_1 + st.swap_delta(x2, s1, y2, s2), x, y, x2, y2};
            if (!found || std::tie(c.after, c.delta, c.x, c.y, c.x2, c.y2) <
                              std::tie(best.after, best.delta, best.x, best.y, best.x2, best.y2)) {
              best = c;
              found = true;
            }
          });
        }
        st.swap_packs(x, y); // undone: both packs back in their slots
      });
    }
    if (!found) {
      return false;
    }
    s1_out = static_cast<std::size_t>(st.pk[best.y].rank);
    st.swap_packs(best.x, best.y);
    s2_out = static_cast<std::size_t>(st.pk[best.y2].rank);
    st.swap_packs(best.x2, best.y2);
    return true;
  }

 private:
  // Calls f(y) for the packs y of x's level that cost less than x, among the `width` nearest
  // each side of cost `want` in the cost index (each level is one stretch of it).
  template <class F>
  static void same_level_below(state& st, std::size_t x, std::int64_t want, std::size_t width,
                               F&& f) {
    const auto level = static_cast<std::size_t>(st.pk[x].level);
    const auto first = st.sorted_cost.begin() + static_cast<std::ptrdiff_t>(st.level_begin[level]);
    const auto last = st.sorted_cost.begin() + static_cast<std::ptrdiff_t>(st.level_end[level]);
    const auto split =
        static_cast<std::size_t>(std::upper_bound(first, last, want) - st.sorted_cost.begin());
    const std::size_t from = std::max(st.level_begin[level], split > width ? split - width : 0);
    const std::size_t to = std::min(st.level_end[level], split + width);
    st.work += static_cast<std::int64_t>(to - std::min(from, to));
    for (std::size_t i = from; i < to; ++i) {
      const auto y = static_cast<std::size_t>(st.by_cost(i));
      if (st.pk[y].cost < st.pk[x].cost) {
        f(y);
      }
    }
  }

  pack_picker pick_;
  std::vector<std::size_t> first_picks_;
};

} // namespace packswap::detail::stage2
