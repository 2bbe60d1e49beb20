#pragma once

#include "packswap/refine/detail/stage2/min_add_tree.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

// Whether one rank can still be completed (see pin_phase::completable, pin.hpp), kept up to date
// as its own packs come and go: O(log k) per pack instead of O(k) (for k <= 64 the same steps on
// flat arrays). With u(j) = j + 1 - (packs of level <= j held), the largest receive counts are
// R(j) = min over j' >= j of u(j'), the slack used at j is u(j) - R(j), and the rank is
// completable iff every u(j) >= 0 and every used slack is at most what the level has left.
// Adding a pack of level l lowers u on [l, k), hence R on [j0, k) for the j0 below l where the
// minimum of u over [j0, l) first reaches R(l): the used slack grows on [j0, l) alone, and the
// free slots receive one pack of level j0 fewer. Removing mirrors it. The trees hold values of
// type V: in a completable state 0 <= u(j) <= k and the slack used is at most k, so the slack
// left, which is only compared with what is used, is kept within [-(k + 2), k + 1], the same
// answers in values within 2k + 2 of zero (int32 for the pin's levels up to
// `pin_phase::narrow_levels`: the trees then take half the memory, and the caches hold more).
template <class V>
class completion {
 public:
  // Rank state: `cnt` its level counts (a completable state), `slack_left` what each level has
  // left, `lo` / `hi` the band quantiles; fill_lo / fill_hi what its free slots add at them.
  void build(const std::int32_t* cnt, std::size_t k, const std::int64_t* slack_left,
             const std::int64_t* lo, const std::int64_t* hi) {
    k_ = k;
    lo_ = lo;
    hi_ = hi;
    scratch_.resize(k);
    std::int64_t held = 0;
    for (std::size_t j = 0; j < k; ++j) {
      held += cnt[j];
      scratch_[j] = static_cast<V>(static_cast<std::int64_t>(j) + 1 - held);
    }
    upper_.assign(scratch_.data(), k);
    // Received counts R, downward; then the spare slack, in place.
    const auto kept = [&](std::int64_t slack) {
      const auto most = static_cast<std::int64_t>(k) + 1;
      return std::clamp<std::int64_t>(slack, -most - 1, most);
    };
    fill_lo = 0;
    fill_hi = 0;
    std::int64_t next = scratch_[k - 1];
    scratch_[k - 1] = static_cast<V>(kept(slack_left[k - 1]));
    for (std::size_t j = k - 1; j-- > 0;) {
      const std::int64_t received = std::min<std::int64_t>(scratch_[j], next);
      fill_lo += (next - received) * lo[j + 1];
      fill_hi += (next - received) * hi[j + 1];
      scratch_[j] = static_cast<V>(kept(slack_left[j]) - (scratch_[j] - received));
      next = received;
    }
    fill_lo += next * lo[0];
    fill_hi += next * hi[0];
    spare_.assign(scratch_.data(), k);
  }

  // Whether one more pack of level l keeps the rank completable; if so, `j0` for add().
  bool can_add(std::size_t l, std::size_t& j0) const {
    const V r_l = upper_.min(l, k_);
    if (r_l < 1) {
      return false;
    }
    j0 = static_cast<std::size_t>(upper_.last_below(l, r_l) + 1);
    return spare_.min(j0, l) >= 1;
  }

  // What fill_lo would be after add(l, j0).
  std::int64_t fill_lo_after_add(std::size_t j0) const { return fill_lo - lo_[j0]; }

  void add(std::size_t l, std::size_t j0) {
    upper_.add(l, k_, -1);
    spare_.add(j0, l, -1);
    fill_lo -= lo_[j0];
    fill_hi -= hi_[j0];
  }

  void remove(std::size_t l) {
    const V r_l = upper_.min(l, k_);
    const auto j1 = static_cast<std::size_t>(upper_.last_below(l, r_l + 1) + 1);
    upper_.add(l, k_, 1);
    spare_.add(j1, l, 1);
    fill_lo += lo_[j1];
    fill_hi += hi_[j1];
  }

  std::int64_t fill_lo = 0, fill_hi = 0;

 private:
  std::size_t k_ = 0;
  const std::int64_t* lo_ = nullptr;
  const std::int64_t* hi_ = nullptr;
  min_add_tree<V> upper_; // u(j)
  min_add_tree<V> spare_; // slack left at j (kept within range) less the slack used there
  std::vector<V> scratch_;
};

} // namespace packswap::detail::stage2
