#pragma once

#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/stage2/level_tables.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 4 (repair), its batch step: where no single swap fixes a rank above the limit
/// (`repair_phase`: with 64 levels or more, or on a rank past its first eight steps), several
/// same-level swaps at once with its roomiest partners.
///
/// Every swap keeps every rank's level counts (both packs share a level) and its partner within
/// the limit (but the last resort below, which still lowers the total excess); the rank under
/// repair sheds load with each.
///
/// Complexity: O(m k + t log(m k)) for m partners (their level tables kept from the step's own
/// read) and t swaps taken or passed over.
class batch_swaps {
 public:
  // Where no single swap fixes rank r: several same-level swaps at once, with the roomiest
  // ranks. For each level r and a partner both hold, r's most expensive pack of it for the
  // partner's cheapest (`mine`, r's level table as the step read it) gives one swap moving d. The
  // swaps that move no bytes go first, largest d first, then the fewest bytes per unit of d; each
  // is taken while r stays above the limit, its pack is still there and the partner stays within
  // the limit. Once only swaps that move bytes are left, with fewer than `careful_below_levels`
  // levels and in a rank's first `careful_steps` steps, one more ends the batch: the one that
  // ends r's excess alone moving the fewest bytes, or else the one moving the fewest per unit of
  // d; later (a rank that needs many steps), or with more levels, they are taken in order too,
  // which takes far fewer steps for slightly more bytes. (With a thousand levels a step reads
  // tens of thousands of units of work, for a swap that may carry a thousandth of the excess.)
  // Same-level swaps keep every rank's level counts. O(m k + t log(m k)) for m partners and t
  // swaps taken or passed over. Where none fits a partner's room: the one swap that overloads a
  // partner least, when that still lowers the total excess (the partner is repaired in its turn).
  // `partners`: the step's roomiest ranks, whose tables `tables` kept; `steps`: the steps r has
  // taken in this run; the partners that take a swap join `changed`. Whether any swap was taken.
  bool operator()(state& st, std::size_t r, std::int64_t exc,
                  const std::vector<std::size_t>& partners, level_tables& tables,
                  const std::vector<level_entry>& mine, std::int32_t steps,
                  std::vector<std::size_t>& changed) {
    swaps_.clear();
    unfit_.clear();
    for (std::size_t j = 0; j < partners.size(); ++j) {
      const std::size_t s2 = partners[j];
      if (st.load[s2] >= st.limit) {
        continue;
      }
      const std::vector<level_entry>& theirs = tables.partner(st, j, partners[j]);
      std::size_t i = 0;
      for (const auto& e : theirs) {
        while (i < mine.size() && mine[i].level < e.level) {
          ++i;
        }
        if (i < mine.size() && mine[i].level == e.level && e.lo_cost < mine[i].hi_cost) {
          const std::size_t x = mine[i].hi;
          const std::int64_t d = mine[i].hi_cost - e.lo_cost;
          // A swap that overloads its partner now does so throughout the step (a partner's
          // load only grows in it): it is kept aside, out of the heap.
          (st.load[s2] + d <= st.limit ? swaps_ : unfit_)
              .push_back({d, st.swap_delta(x, r, e.lo, s2), x, e.lo, s2});
        }
      }
    }
    st.work += static_cast<std::int64_t>(swaps_.size() + unfit_.size());
    // The order the swaps are taken in (a total order: no two share x and y). A step takes few
    // of them, so they come off a heap, O(m + t log m) for t taken, rather than a sort of all.
    const auto later = [](const batch_swap& a, const batch_swap& b) {
      const bool a_free = a.delta <= 0;
      const bool b_free = b.delta <= 0;
      if (a_free != b_free) {
        return b_free;
      }
      if (a_free) {
        return std::tie(a.d, b.delta, b.x, b.y) < std::tie(b.d, a.delta, a.x, a.y);
      }
      const int c = compare_products(b.delta, a.d, a.delta, b.d);
      return c != 0 ? c < 0 : std::tie(b.x, b.y) < std::tie(a.x, a.y);
    };
    std::make_heap(swaps_.begin(), swaps_.end(), later);
    const auto usable = [&](const batch_swap& sw) {
      return st.pk[sw.x].rank == static_cast<std::int32_t>(r) &&
             st.pk[sw.y].rank == static_cast<std::int32_t>(sw.partner) &&
             st.load[sw.partner] + sw.d <= st.limit;
    };
    bool any = false;
    // swaps_[0, left): the heap of the swaps not taken yet; the next one goes to swaps_[left].
    for (std::size_t left = swaps_.size(); left > 0 && st.load[r] > st.limit;) {
      std::pop_heap(swaps_.begin(), swaps_.begin() + static_cast<std::ptrdiff_t>(left), later);
      const batch_swap& next = swaps_[--left];
      if (!usable(next)) {
        continue;
      }
      // A swap that moves bytes while another usable one (of it and the rest) finishes the job:
      // the one of those that moves the fewest bytes, and done.
      if (next.delta > 0 && st.k < careful_below_levels && steps <= careful_steps) {
        const std::int64_t rest = st.load[r] - st.limit;
        const batch_swap* finish = nullptr;
        for (std::size_t j = 0; j <= left; ++j) {
          const auto& sw = swaps_[j];
          if (sw.d >= rest && usable(sw) &&
              (finish == nullptr ||
               std::tie(sw.delta, sw.x, sw.y) < std::tie(finish->delta, finish->x, finish->y))) {
            finish = &sw;
          }
        }
        // Counted as if the swaps kept aside were in the heap: those after `next` in the order.
        std::size_t unfit_after = 0;
        for (const auto& sw : unfit_) {
          unfit_after += later(sw, next) ? 1 : 0;
        }
        st.work += static_cast<std::int64_t>(left + 1 + unfit_after);
        // Else the one moving the fewest bytes per unit of d, alone: the next step weighs the
        // rest again, with what the swap changed.
        const batch_swap& take = finish != nullptr ? *finish : next;
        st.swap_packs(take.x, take.y);
        changed.push_back(take.partner);
        return true;
      }
      st.swap_packs(next.x, next.y);
      changed.push_back(next.partner);
      any = true;
    }
    if (any) {
      return true;
    }
    const batch_swap* least = nullptr;
    std::int64_t least_over = 0;
    for (const auto* kept : {&swaps_, &unfit_}) {
      for (const auto& sw : *kept) {
        const std::int64_t over = sw.d - (st.limit - st.load[sw.partner]);
        if (over < std::min(sw.d, exc) &&
            (least == nullptr || std::tie(over, sw.delta, sw.x, sw.y) <
                                     std::tie(least_over, least->delta, least->x, least->y))) {
          least = &sw;
          least_over = over;
        }
      }
    }
    if (least == nullptr) {
      return false;
    }
    st.swap_packs(least->x, least->y);
    changed.push_back(least->partner);
    return true;
  }

 private:
  static constexpr std::int32_t careful_steps = 2;         // see operator()
  static constexpr std::size_t careful_below_levels = 512; // see operator()
  struct batch_swap {
    std::int64_t d, delta;
    std::size_t x, y, partner;
  };
  std::vector<batch_swap> swaps_; // see operator()
  std::vector<batch_swap> unfit_; // see operator()
};

} // namespace packswap::detail::stage2
