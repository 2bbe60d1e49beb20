#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 1: pin. Every rank keeps its own packs, largest bytes first, while it can
/// still be completed within the limit.
///
/// Starts from an empty placement (clearing every pack's place and lock, rank by rank); ends with
/// each rank holding only own packs, all locked (the pins), such that every rank can still be
/// completed to k packs within its level constraints, taking the slack of each level from a
/// budget shared by all ranks (`slack_left_`).
///
/// Complexity: O(k) per rank for the band sums, then per own pack O(1) while the rank holds at
/// most one pack per level, else O(k) (`completable`): O(n) for distinct costs, O(n k) at worst
/// where costs tie across levels.
class pin_phase {
 public:
  // (1) Keep own packs, largest weighted bytes first, while the rank can still be completed and
  // completing it with cheap packs of the levels it lacks (the low band quantile of each) stays
  // within the limit; then, while even expensive packs (the high quantile) would leave it short of
  // the average load, give up the kept packs that weigh least and cost less than that quantile:
  // such a rank must take a share of the heavy packs others give up.
  void run(state& st, const tuning& t) {
    const std::int64_t target =
        std::min(st.limit, (st.total_cost + static_cast<std::int64_t>(st.dp) - 1) /
                               static_cast<std::int64_t>(st.dp));
    const auto lo = st.level_quantile(t.band_low_permille);
    const auto hi = st.level_quantile(t.band_high_permille);
    slack_left_ = st.slack;
    deficit_.assign(st.k, 0);
    const auto& own = st.own;
    const auto& first = st.own_first;
    // While a rank holds at most one pack per level it uses no slack, is completable, and its
    // free slots receive one pack of each level it lacks: an O(1) check with band sums kept up
    // to date. Only ranks holding two packs of a level need the general check.
    std::int64_t all_lo = 0;
    std::int64_t all_hi = 0;
    for (std::size_t j = 0; j < st.k; ++j) {
      all_lo += lo[j];
      all_hi += hi[j];
    }
    std::int64_t fill_lo = 0;
    std::int64_t fill_hi = 0;
    for (std::size_t r = 0; r < st.dp; ++r) {
      if (r + 1 < st.dp) {
        for (std::size_t i = first[r + 1]; i < first[r + 2]; ++i) {
          prefetch(&st.pk[static_cast<std::size_t>(own[i])]); // the next rank's packs
        }
      }
      const auto begin = own.begin() + static_cast<std::ptrdiff_t>(first[r]);
      const auto end = own.begin() + static_cast<std::ptrdiff_t>(first[r + 1]);
      for (auto it = begin; it != end; ++it) {
        st.pk[static_cast<std::size_t>(*it)].rank = -1; // unplaced, from an earlier run
      }
      std::int64_t missing_lo = all_lo;
      std::int64_t missing_hi = all_hi;
      std::int32_t doubled = 0; // levels where r holds two or more packs
      const auto add = [&](std::size_t p) {
        const auto l = static_cast<std::size_t>(st.pk[p].level);
        if (st.cnt[r * st.k + l] == 0) {
          missing_lo -= lo[l];
          missing_hi -= hi[l];
        } else if (st.cnt[r * st.k + l] == 1) {
          ++doubled;
        }
        st.place(p, r);
      };
      const auto remove = [&](std::size_t p) {
        st.unplace(p);
        const auto l = static_cast<std::size_t>(st.pk[p].level);
        if (st.cnt[r * st.k + l] == 0) {
          missing_lo += lo[l];
          missing_hi += hi[l];
        } else if (st.cnt[r * st.k + l] == 1) {
          --doubled;
        }
      };
      const auto evaluate = [&]() {
        if (doubled != 0) {
          return completable<true>(st, r, lo.data(), hi.data(), &fill_lo, &fill_hi);
        }
        fill_lo = missing_lo;
        fill_hi = missing_hi;
        return true;
      };
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        if (st.load[r] + st.pk[p].cost > st.limit) {
          continue;
        }
        add(p);
        if (!evaluate() || st.load[r] + fill_lo > st.limit) {
          remove(p);
        }
      }
      // Too light to reach the average load even with expensive packs in its free slots: give up
      // cheap packs, lightest bytes first. (The average, not the limit: with eps > 0 the limit
      // sits above the average, and aiming every light rank at it would unpin for nothing.)
      bool fits = evaluate();
      for (auto it = end; it != begin && fits && st.load[r] + fill_hi < target;) {
        --it;
        const auto p = static_cast<std::size_t>(*it);
        if (st.pk[p].rank == static_cast<std::int32_t>(r) &&
            st.pk[p].cost < hi[static_cast<std::size_t>(st.pk[p].level)]) {
          remove(p);
          if (doubled != 0 && !completable(st, r)) {
            add(p);
          }
          fits = evaluate();
        }
      }
      if (doubled != 0) {
        const bool ok = completable(st, r); // recomputes deficit_ for the final pinned set
        (void)ok;
        commit_deficits(st);
      }
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        st.locked[p] = st.pk[p].rank >= 0 ? 1 : 0; // the pins
      }
    }
  }

 private:
  // Can rank r, holding what it holds now, still be completed? Free slots take packs of any
  // level, so it can iff some non-decreasing count of received packs R(j) (packs of level <= j it
  // will receive) fits j + 1 - held(<= j) - slack(j) <= R(j) <= j + 1 - held(<= j) and ends at the
  // number of free slots. Takes the largest such R, which uses the least slack: writes the slack
  // it uses per level into `deficit_` (checking it against what other ranks left). When `lo` and
  // `hi` are given, also returns in `fill_lo` / `fill_hi` what the free slots add if every
  // received pack costs the per-level quantile `lo` / `hi`. No allocation: this runs for every
  // pack of the batch.
  template <bool Band = false>
  bool completable(const state& st, std::size_t r, const std::int64_t* lo = nullptr,
                   const std::int64_t* hi = nullptr, std::int64_t* fill_lo = nullptr,
                   std::int64_t* fill_hi = nullptr) {
    std::int32_t* upper = deficit_.data();
    const std::int32_t* c = &st.cnt[r * st.k];
    std::int32_t held = 0;
    bool ok = true;
    for (std::size_t j = 0; j < st.k; ++j) {
      held += c[j];
      upper[j] = static_cast<std::int32_t>(j) + 1 - held;
      ok &= upper[j] >= 0;
    }
    if (!ok) {
      return false;
    }
    // Level k - 1 first (nothing above it is received), then downward.
    std::int32_t next = upper[st.k - 1];
    upper[st.k - 1] = 0;
    std::int64_t sum_lo = 0;
    std::int64_t sum_hi = 0;
    for (std::size_t j = st.k - 1; j-- > 0;) {
      // R(j) = min(upper[j], next), written so that g++ 12 emits a conditional move (std::min
      // became a branch here, mispredicted: which side wins follows the data).
      const std::int32_t received = upper[j] < next ? upper[j] : next;
      upper[j] -= received; // now the slack used at j
      ok &= upper[j] <= slack_left_[j];
      if constexpr (Band) {
        // R(j + 1) - R(j) packs of level j + 1 are received.
        sum_lo += (next - received) * lo[j + 1];
        sum_hi += (next - received) * hi[j + 1];
      }
      next = received;
    }
    if constexpr (Band) {
      *fill_lo = sum_lo + next * lo[0];
      *fill_hi = sum_hi + next * hi[0];
    }
    return ok;
  }

  void commit_deficits(const state& st) {
    for (std::size_t j = 0; j < st.k; ++j) {
      slack_left_[j] -= deficit_[j];
    }
  }

  std::vector<std::int64_t> slack_left_; // per level, after the ranks pinned so far
  std::vector<std::int32_t> deficit_;    // scratch for completable()
};

} // namespace packswap::detail::stage2
