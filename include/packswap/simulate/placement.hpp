#pragma once

#include "packswap/batch.hpp"
#include "packswap/error.hpp"
#include "packswap/refine/refine.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// Where the data loader put the packs of a global batch of shape `s`: rank r computes its
/// contiguous shard, packs `[r * K, (r + 1) * K)` with `K = ga * mbs`, in loader order, `mbs` per
/// micro-step. The straggler baseline: nothing moves, nothing is reordered.
///
/// ```
/// auto cells = packswap::loader_placement({/*dp=*/64, /*ga=*/16});
/// auto loads = packswap::cell_loads(costs, cells, {64, 16});
/// ```
[[nodiscard]] inline assignment loader_placement(const shape& s) {
  validate(s);
  assignment out(static_cast<std::size_t>(s.packs()));
  const std::int64_t k = s.packs_per_rank();
  for (std::size_t p = 0; p < out.size(); ++p) {
    const auto i = static_cast<std::int64_t>(p);
    out[p] = cell{static_cast<std::int32_t>(i / k), static_cast<std::int32_t>(i % k / s.mbs)};
  }
  return out;
}

/// Local reordering: every rank keeps its own shard (as `loader_placement`) but computes it
/// heaviest first (ties by pack id), `mbs` packs per micro-step. No communication. Ranks that meet
/// every micro-step then line up their heavy packs in the same micro-steps; with ranks meeting
/// once per step it changes nothing, since no rank's total changes. Requires one cost per pack,
/// each >= 0 (`validate_costs`).
///
/// ```
/// auto cells = packswap::local_placement(costs, {/*dp=*/64, /*ga=*/16});
/// ```
[[nodiscard]] inline assignment local_placement(span<const std::int64_t> costs, const shape& s) {
  validate_costs(costs, s);
  // The solver deals each rank's packs to micro-steps the same way: reuse it, with every pack
  // staying on its source rank.
  const auto k = s.packs_per_rank();
  std::vector<std::int32_t> rank_of(costs.size());
  for (std::size_t p = 0; p < costs.size(); ++p) {
    rank_of[p] = static_cast<std::int32_t>(static_cast<std::int64_t>(p) / k);
  }
  return detail::deal_micro_steps(s, rank_of, detail::order_desc(costs));
}

} // namespace packswap
