#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace packswap::detail::stage2 {

/// When a pass of the bring-home's settle (stage 2, phase 5) stops paying. At large batches the
/// settle's allowance ends before its first pass would (see bring_home_phase::run); visited
/// heaviest first, the weighted bytes a unit of work brings home fall as the pass goes on, steeply
/// where a few packs hold most bytes: with bimodal costs on dp 65,536 x ga 16, the first third of
/// the allowance brings home about 95% of what the whole of it does. So each pass is judged in
/// windows of 1/`windows` of the allowance: a window that brought home less than 1/`falloff` of the
/// pass's rate so far, or of an earlier pass's, ends the pass. The next pass starts over, heaviest
/// first again, and may pay again: the trades made free room for some that failed (bimodal, dp 256
/// x ga 64: the second pass's first window brings home a tenth as much as the whole first pass).
/// Where it pays at a small fraction of the first pass's rate, steadily (bimodal, dp 65,536 x ga 16
/// at eps = 0.001: a tenth), it ends there rather than run on to the allowance. Where the rate
/// holds (packs of even bytes, as with high-res images), a pass runs on to the allowance. Integer
/// rates (weighted bytes per unit, rounded down) are compared, with no product that could overflow,
/// so every rank ends at the same visit. O(1) per visit.
struct payoff {
  static constexpr std::int64_t windows = 16;
  static constexpr std::int64_t falloff = 8;
  std::int64_t gained = 0;      // weighted bytes brought home in this pass
  std::int64_t begin = 0;       // st.work when the pass began
  std::int64_t window = 0;      // units per window
  std::int64_t window_end = 0;  // where the window under way ends
  std::int64_t window_from = 0; // and where it began, with `gained` then
  std::int64_t gained_before = 0;
  std::int64_t earlier = 0; // the best rate of the passes before this one
  bool started = false;

  // The window's size, from the allowance left.
  void size(const state& st) {
    const std::int64_t allowance =
        st.work_limit == std::numeric_limits<std::int64_t>::max() ? 0 : st.work_limit - st.work;
    window = allowance / windows; // 0: no limit, never judged
  }
  // A pass begins.
  void start(const state& st) {
    if (started && st.work > begin) {
      earlier = std::max(earlier, gained / (st.work - begin));
    }
    started = true;
    begin = st.work;
    window_from = begin;
    window_end = begin + window;
    gained = gained_before = 0;
  }
  // Whether the window that just ended brought home too little: then the pass ends.
  bool spent(const state& st) {
    if (window <= 0 || st.work < window_end) {
      return false;
    }
    const std::int64_t rate_now = (gained - gained_before) / (st.work - window_from);
    const std::int64_t rate_all = gained / (st.work - begin);
    if (rate_now < std::max(rate_all, earlier) / falloff) {
      return true;
    }
    window_from = st.work;
    window_end = st.work + window;
    gained_before = gained;
    return false;
  }
};

} // namespace packswap::detail::stage2
