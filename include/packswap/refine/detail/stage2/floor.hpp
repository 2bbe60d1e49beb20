#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// A lower bound on the bytes any answer of stage 2 moves: what the search's review weighs the
/// fallback against (see home_first::review_at).
///
/// Every answer keeps each rank's packs, by cost descending, at or below the caps: a pack of
/// level l sits in one of a rank's slots 0 .. l, and the slots below l of all ranks (dp l of
/// them) hold every pack of a lower level, which leaves `state::slack[l - 1]` of them for
/// packs of level l. So of a level's packs, a rank keeps at most one home in its slot l and the
/// others in those spare slots: the packs kept home on level l number at most one per home rank
/// plus slack[l - 1] (none at level 0). So the bytes kept home on a level are at most every home
/// rank's largest pack there plus slack[l - 1] of the rest, each at most the largest of them
/// (the exact greedy, the largest slack[l - 1] of the rest, would sort them; where no costs tie
/// across the chunks' boundaries there is no slack, and the two agree). What is left moves in
/// every answer, in bytes that weigh at least 1 each. (The limit on B is ignored, so the bound is
/// not tight where B binds; tests/support/moved_bound.hpp adds the per-rank prefix family for the
/// benchmark's figures.)
///
/// Complexity: O(n + dp) per run, one pass over the packs in internal order (by cost
/// descending, which runs level by level) and one over the home ranks met on each level.
class moved_floor {
 public:
  // The bound for the batch `st` holds (after state::prepare; the placement is not read).
  std::int64_t run(const state& st) {
    best_.assign(st.dp, -1);
    second_.assign(st.dp, -1);
    std::int64_t all = 0;
    std::int64_t kept = 0;
    for (std::size_t first = 0; first < st.n;) {
      const std::int32_t level = st.pk[first].level;
      std::size_t end = first;
      std::int64_t level_bytes = 0;
      touched_.clear();
      for (; end < st.n && st.pk[end].level == level; ++end) {
        const std::int64_t bytes = st.pk[end].bytes;
        const auto h = static_cast<std::size_t>(st.pk[end].home);
        level_bytes += bytes;
        if (best_[h] < 0) {
          touched_.push_back(h);
        }
        if (bytes > best_[h]) {
          second_[h] = best_[h];
          best_[h] = bytes;
        } else if (bytes > second_[h]) {
          second_[h] = bytes;
        }
      }
      all += level_bytes;
      std::int64_t home_best = 0; // every home rank's largest
      std::int64_t rest_most = 0; // the largest of the others
      for (const std::size_t h : touched_) {
        home_best += best_[h];
        rest_most = std::max(rest_most, second_[h]);
        best_[h] = -1;
        second_[h] = -1;
      }
      // The spare slots' packs: at most `spare` of the others, each at most the largest of them
      // (exact where the level has no spare slot; an upper bound else, which keeps the floor
      // a lower bound and the pass linear).
      const std::int64_t spare =
          level == 0 ? 0 : std::max<std::int64_t>(0, st.slack[static_cast<std::size_t>(level) - 1]);
      const std::int64_t rest_bytes = level_bytes - home_best;
      const bool all_fit = spare > rest_bytes / std::max<std::int64_t>(1, rest_most);
      kept += home_best + (all_fit ? rest_bytes : spare * rest_most); // no overflow either way
      first = end;
    }
    return all - kept;
  }

 private:
  std::vector<std::int64_t> best_, second_; // per home rank: its two largest bytes on the level
  std::vector<std::size_t> touched_;        // the home ranks met on the level
};

} // namespace packswap::detail::stage2
