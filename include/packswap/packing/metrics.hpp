#pragma once

#include "packswap/packing/pack_list.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// Order statistics of integer values, by the nearest-rank definition: with the `n` values sorted
/// ascending, the p-th percentile is the value at 1-based rank `ceil(p * n / 100)` (at least 1),
/// so every statistic is one of the values, computed without floating point. `median` is the
/// 50th percentile (the lower middle value when `n` is even). All zero when `n == 0`.
struct percentiles {
  std::int64_t min = 0;    ///< the smallest value
  std::int64_t median = 0; ///< the 50th percentile
  std::int64_t p90 = 0;    ///< the 90th percentile
  std::int64_t p99 = 0;    ///< the 99th percentile
  std::int64_t max = 0;    ///< the largest value
};

/// The nearest-rank percentiles of `values` (see `percentiles`).
[[nodiscard]] inline percentiles nearest_rank_percentiles(span<const std::int64_t> values) {
  std::vector<std::int64_t> v(values.begin(), values.end());
  if (v.empty()) {
    return {};
  }
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  const auto at = [&](std::size_t pct) {
    const std::size_t rank = std::max<std::size_t>(1, (pct * n + 99) / 100);
    return v[rank - 1];
  };
  return {v.front(), at(50), at(90), at(99), v.back()};
}

/// How well a `pack_list` is packed (DESIGN.md §2).
struct packing_metrics {
  std::int64_t samples = 0;      ///< samples in packs
  std::int64_t skipped = 0;      ///< samples left out (`oversize_policy::skip`)
  std::int64_t packs = 0;        ///< pack count
  std::int64_t capacity = 0;     ///< tokens per pack
  std::int64_t tokens = 0;       ///< real tokens over all packs
  std::int64_t image_tokens = 0; ///< image tokens over all packs
  /// Image tokens per pack: the vision encoder's load, which 1D packing leaves unbalanced.
  percentiles image_tokens_per_pack;

  /// Packing efficiency: real tokens / (packs x capacity), in [0, 1]; 0 when there is no pack.
  [[nodiscard]] double efficiency() const noexcept {
    return packs == 0 ? 0.0
                      : static_cast<double>(tokens) /
                            (static_cast<double>(packs) * static_cast<double>(capacity));
  }
};

/// The mean image tokens per pack, rounded to the nearest integer (halves up); 0 without packs.
/// With a 1D packing this is the usual image budget to try for `budgeted_packer`.
[[nodiscard]] inline std::int64_t mean_image_tokens_per_pack(const pack_list& packs) noexcept {
  const auto n = static_cast<std::int64_t>(packs.size());
  if (n == 0) {
    return 0;
  }
  const std::int64_t total = packs.total_image_tokens();
  return total / n + (2 * (total % n) >= n ? 1 : 0);
}

/// Efficiency, pack count and the per-pack image-token distribution of `packs`.
///
/// ```
/// auto m = packswap::measure_packing(packswap::pack_samples(samples));
/// std::cout << 100 * m.efficiency() << "% full, p99 image tokens " << m.image_tokens_per_pack.p99;
/// ```
[[nodiscard]] inline packing_metrics measure_packing(const pack_list& packs) {
  packing_metrics m;
  m.samples = static_cast<std::int64_t>(packs.total_samples());
  m.skipped = static_cast<std::int64_t>(packs.skipped().size());
  m.packs = static_cast<std::int64_t>(packs.size());
  m.capacity = packs.capacity();
  m.tokens = packs.total_tokens();
  m.image_tokens = packs.total_image_tokens();
  std::vector<std::int64_t> per_pack(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    per_pack[p] = packs.image_tokens(p);
  }
  m.image_tokens_per_pack = nearest_rank_percentiles(per_pack);
  return m;
}

} // namespace packswap
