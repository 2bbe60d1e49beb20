#pragma once

#include "packswap/batch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

namespace detail {

/// Per micro-step m, the largest cell total over ranks: `step_max[m]` = max over r of the sum of
/// `value(p)` (>= 0) over the packs p in cell (r, m), 0 for a micro-step with no positive total.
/// `each(p, value(p))` is called once per pack in the same pass, for the caller's own sums. With
/// one pack per cell (mbs = 1) a cell's total is its pack's value and no table of dp * ga cells
/// is built (at scale its updates at random cells cost more than the rest of the pass);
/// otherwise `table` is that table's working memory. Requires a valid assignment.
template <class Value, class Each>
void step_maxima(const assignment& a, const shape& s, Value value, Each each,
                 std::int64_t* step_max, std::vector<std::int64_t>& table) {
  const auto ga = static_cast<std::size_t>(s.ga);
  std::fill(step_max, step_max + ga, std::int64_t{0});
  if (s.mbs == 1) {
    for (std::size_t p = 0; p < a.size(); ++p) {
      const std::int64_t v = value(p);
      auto& top = step_max[static_cast<std::size_t>(a[p].micro_step)];
      top = top < v ? v : top;
      each(p, v);
    }
    return;
  }
  table.assign(static_cast<std::size_t>(s.cells()), 0);
  for (std::size_t p = 0; p < a.size(); ++p) {
    const std::int64_t v = value(p);
    table[static_cast<std::size_t>(a[p].rank) * ga + static_cast<std::size_t>(a[p].micro_step)] +=
        v;
    each(p, v);
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(s.dp); ++r) {
    for (std::size_t m = 0; m < ga; ++m) {
      step_max[m] = step_max[m] < table[r * ga + m] ? table[r * ga + m] : step_max[m];
    }
  }
}

} // namespace detail

} // namespace packswap
