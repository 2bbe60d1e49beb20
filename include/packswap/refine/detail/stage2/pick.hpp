#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// The packs of a rank above the limit worth trying in a repair or a chain (most of a rank's
/// packs cannot help: the search weighs a few). O(k) per call.
class pack_picker {
 public:
  // The largest cost a pack of level l can shed in one swap: down to the cheapest pack of its
  // level, or of the batch where the level has slack (a pack of a later level may take its
  // place). Fixed for the batch.
  static std::int64_t shed(const state& st, const state::item& x) {
    const auto l = static_cast<std::size_t>(x.level);
    const std::int64_t floor =
        st.slack[l] == 0 ? st.sorted_cost[st.level_begin[l]] : st.sorted_cost[0];
    return x.cost - floor;
  }

  // Rank r's packs worth trying, into `picks`: level repairs, the packs at or below the crowded
  // level, away-from-home and cheapest in bytes first; otherwise the packs that can shed the
  // excess, those whose move costs the fewest bytes first (away from home: none), then the
  // packs that can shed the most. At most `most` of each kind; O(k).
  void operator()(state& st, std::size_t r, std::int64_t exc, std::int32_t crowded_level,
                  std::int32_t most) {
    const auto limit = static_cast<std::size_t>(most);
    keyed_.clear();
    shedding_.clear();
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const state::item& it = st.items[r * st.k + i]; // no pack record read
      const auto x = static_cast<std::size_t>(it.pack);
      const std::int64_t bytes = it.home == static_cast<std::int32_t>(r) ? it.bytes : 0;
      if (crowded_level >= 0) {
        if (it.level <= crowded_level) {
          keyed_.push_back({bytes, static_cast<std::int64_t>(x)});
        }
        continue;
      }
      const std::int64_t can = shed(st, it);
      if (can >= exc) {
        keyed_.push_back({bytes, static_cast<std::int64_t>(x)});
      } else if (can > 0) {
        shedding_.push_back({-can, static_cast<std::int64_t>(x)});
      }
    }
    st.work += static_cast<std::int64_t>(st.used[r]);
    picks.clear();
    for (auto* list : {&keyed_, &shedding_}) {
      if (list->size() > limit) {
        std::nth_element(list->begin(), list->begin() + static_cast<std::ptrdiff_t>(limit),
                         list->end());
        list->resize(limit);
      }
      for (const auto& e : *list) {
        picks.push_back(static_cast<std::size_t>(e.second));
      }
    }
    // In id order, whatever order nth_element left: the searches may stop at the work bound
    // part way, and every standard library must stop at the same candidate.
    std::sort(picks.begin(), picks.end());
  }

  std::vector<std::size_t> picks; // the last call's, in id order

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> keyed_, shedding_;
};

} // namespace packswap::detail::stage2
