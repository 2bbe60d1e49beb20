#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/completion.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstddef>
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
/// most one pack per level, else O(log k) through the rank's `completion` tree (built once, in
/// O(k), when the rank may first take a second pack of a level, which needs slack at the level
/// below: never where costs are distinct): O(n log k) at worst, O(n) for distinct costs.
class pin_phase {
 public:
  // (1) Keep own packs, largest weighted bytes first, while the rank can still be completed and
  // completing it with cheap packs of the levels it lacks (the low band quantile of each) stays
  // within the limit; then, while even expensive packs (the high quantile) would leave it short of
  // the average load, give up the kept packs that weigh least and cost less than that quantile:
  // such a rank must take a share of the heavy packs others give up.
  void run(state& st, const tuning& t) {
    if (st.k <= narrow_levels) {
      pin_ranks(st, t, narrow_);
    } else {
      pin_ranks(st, t, wide_);
    }
  }

  // Levels up to which the completion trees hold int32 values (see completion).
  static constexpr std::size_t narrow_levels = std::size_t{1} << 24;

 private:
  template <class Tree>
  void pin_ranks(state& st, const tuning& t, Tree& tree) {
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
    // to date. From its first pack of a level it already holds, the rank's `completion` tree
    // answers instead, in O(log k).
    std::int64_t all_lo = 0;
    std::int64_t all_hi = 0;
    for (std::size_t j = 0; j < st.k; ++j) {
      all_lo += lo[j];
      all_hi += hi[j];
    }
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
      const std::int32_t* cnt = &st.cnt[r * st.k];
      std::int64_t missing_lo = all_lo;
      std::int64_t missing_hi = all_hi;
      bool tracked = false;     // tree holds the rank
      std::int32_t doubled = 0; // levels where r holds two or more packs
      const auto level_of = [&](std::size_t p) { return static_cast<std::size_t>(st.pk[p].level); };
      const auto add = [&](std::size_t p) {
        const auto l = level_of(p);
        if (cnt[l] == 0) {
          missing_lo -= lo[l];
          missing_hi -= hi[l];
        } else if (cnt[l] == 1) {
          ++doubled;
        }
        st.place(p, r);
      };
      const auto remove = [&](std::size_t p) {
        st.unplace(p);
        const auto l = level_of(p);
        if (cnt[l] == 0) {
          missing_lo += lo[l];
          missing_hi += hi[l];
        } else if (cnt[l] == 1) {
          --doubled;
        }
        if (tracked) {
          tree.remove(l);
        }
      };
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        const std::int64_t load = st.load[r] + st.pk[p].cost;
        if (load > st.limit) {
          continue;
        }
        const auto l = level_of(p);
        if (!tracked && cnt[l] != 0) {
          // Holding one pack of each level it holds, u rises with j and R(l) = u(l) = u(l - 1):
          // a second pack of level l needs R(l) >= 1 (so l > 0) and, as j0 <= l - 1, slack left
          // at level l - 1. Where there is none (every level, when no costs tie across a chunk
          // boundary) the tree would refuse it: refused without building the tree.
          if (l == 0 || slack_left_[l - 1] <= 0) {
            continue;
          }
          tree.build(cnt, st.k, slack_left_.data(), lo.data(), hi.data());
          tracked = true;
        }
        if (!tracked) {
          // One pack per level stays completable; its free slots lose level l's quantile.
          if (load + missing_lo - lo[l] <= st.limit) {
            add(p);
          }
          continue;
        }
        std::size_t j0 = 0;
        if (tree.can_add(l, j0) && load + tree.fill_lo_after_add(j0) <= st.limit) {
          add(p);
          tree.add(l, j0);
        }
      }
      // Too light to reach the average load even with expensive packs in its free slots: give up
      // cheap packs, lightest bytes first. (The average, not the limit: with eps > 0 the limit
      // sits above the average, and aiming every light rank at it would unpin for nothing.)
      // Giving up a pack never makes a rank incompletable.
      const auto fill_hi = [&] { return tracked ? tree.fill_hi : missing_hi; };
      for (auto it = end; it != begin && st.load[r] + fill_hi() < target;) {
        --it;
        const auto p = static_cast<std::size_t>(*it);
        if (st.pk[p].rank == static_cast<std::int32_t>(r) && st.pk[p].cost < hi[level_of(p)]) {
          remove(p);
        }
      }
      if (doubled != 0) {
        const bool ok = completable(st, r); // deficit_ for the final pinned set
        (void)ok;
        commit_deficits(st);
      }
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        st.locked[p] = st.pk[p].rank >= 0 ? 1 : 0; // the pins
      }
    }
  }

  // Can rank r, holding what it holds now, still be completed? Free slots take packs of any
  // level, so it can iff some non-decreasing count of received packs R(j) (packs of level <= j it
  // will receive) fits j + 1 - held(<= j) - slack(j) <= R(j) <= j + 1 - held(<= j) and ends at the
  // number of free slots. Takes the largest such R, which uses the least slack: writes the slack
  // it uses per level into `deficit_` (checking it against what other ranks left). O(k).
  bool completable(const state& st, std::size_t r) {
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
    for (std::size_t j = st.k - 1; j-- > 0;) {
      const std::int32_t received = std::min(upper[j], next); // R(j)
      upper[j] -= received;                                   // now the slack used at j
      ok &= upper[j] <= slack_left_[j];
      next = received;
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
  // The rank being pinned, once it may double a level: int32 trees up to narrow_levels levels.
  completion<std::int32_t> narrow_;
  completion<std::int64_t> wide_;
};

} // namespace packswap::detail::stage2
