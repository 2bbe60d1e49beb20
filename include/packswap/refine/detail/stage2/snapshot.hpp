#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// The placement an attempt reaches before its first repair (pin, fill and the first re-deal),
/// kept so that a later attempt whose tuning gives those phases the same knobs (the attempt
/// with chained repairs after the wide band fails) starts from it without running them again.
/// Those phases read only the batch, the placement they build and those knobs, and count no
/// work, so the copy is the very state they would build.
///
/// Keeps every rank's items, their count and the locks: 5 bytes per pack, written in O(n) by
/// save(); restore() places the items again (`state::place`, which rebuilds each pack's rank and
/// slot, the items' homes and levels, loads and level counts), O(n + dp).
class start_snapshot {
 public:
  /// Forgets the kept placement (a new batch).
  void clear() { valid_ = false; }

  /// Whether it holds the placement that an attempt with tuning `t` reaches.
  bool holds(const tuning& t) const { return valid_ && same_knobs(t); }

  /// Keeps the placement of `st`, reached with tuning `t`.
  void save(const state& st, const tuning& t) {
    items_.resize(st.items.size());
    for (std::size_t i = 0; i < items_.size(); ++i) {
      items_[i] = st.items[i].pack;
    }
    used_.assign(st.used.begin(), st.used.end());
    locked_.assign(st.locked.begin(), st.locked.end());
    knobs_ = t;
    valid_ = true;
  }

  /// Writes the kept placement into `st`, just reset: every rank's items placed again in their
  /// order, so each lands in its slot.
  void restore(state& st) const {
    std::copy(locked_.begin(), locked_.end(), st.locked.begin());
    for (std::size_t r = 0; r < st.dp; ++r) {
      const std::int32_t* items = &items_[r * st.k];
      for (std::size_t i = 0; i < used_[r]; ++i) {
        if (i + state::prefetch_distance < used_[r]) {
          prefetch(&st.pk[static_cast<std::size_t>(items[i + state::prefetch_distance])]);
        }
        st.place(static_cast<std::size_t>(items[i]), r);
      }
    }
  }

 private:
  // The knobs the pin, the fill and the re-deal read.
  bool same_knobs(const tuning& t) const {
    return t.band_low_permille == knobs_.band_low_permille &&
           t.band_high_permille == knobs_.band_high_permille &&
           t.redeal_sweeps == knobs_.redeal_sweeps && t.unlock_rounds == knobs_.unlock_rounds &&
           t.crowd_min == knobs_.crowd_min;
  }

  bool valid_ = false;
  tuning knobs_;
  std::vector<std::int32_t> items_;
  std::vector<std::size_t> used_;
  std::vector<char> locked_;
};

} // namespace packswap::detail::stage2
