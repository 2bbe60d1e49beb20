#pragma once

#include "packswap/batch.hpp"
#include "packswap/cost/cost_model.hpp"
#include "packswap/cost/features.hpp"
#include "packswap/cost/payload.hpp"
#include "packswap/error.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// The solver's input for one global batch of shape `s`: one `pack_meta` per pack, its cost from
/// `cost`, its bytes from `payload`, and its source rank from the data layout in which each rank
/// reads a contiguous shard of the pack stream: with `K = ga * mbs`, rank `r` loaded packs
/// `[r * K, (r + 1) * K)`. `packs` must hold exactly `s.packs()` features.
///
/// ```
/// auto f = packswap::features_of(samples, packs);          // every pack of the stream
/// const packswap::shape s{/*dp=*/64, /*ga=*/16};
/// auto batch = packswap::make_pack_meta(packswap::span<const packswap::pack_features>(
///     f.data(), static_cast<std::size_t>(s.packs())), s);  // the first global batch
/// auto sol = packswap::solve(batch, s);
/// ```
template <class CostModel = cost_model>
[[nodiscard]] std::vector<pack_meta>
make_pack_meta(span<const pack_features> packs, const shape& s, const CostModel& cost = CostModel{},
               const payload_model& payload = payload_model{}) {
  static_assert(is_cost_model_v<CostModel>,
                "CostModel must be callable as std::int64_t(const pack_features&) const");
  validate(s);
  PACKSWAP_EXPECTS(static_cast<std::int64_t>(packs.size()) == s.packs(), errc::invalid_argument,
                   "got " << packs.size() << " packs, shape dp=" << s.dp << " ga=" << s.ga
                          << " mbs=" << s.mbs << " needs " << s.packs());
  std::vector<pack_meta> out(packs.size());
  const auto per_rank = static_cast<std::size_t>(s.packs_per_rank());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const std::int64_t c = cost(packs[p]);
    PACKSWAP_EXPECTS(c >= 0, errc::invalid_argument,
                     "the cost model gives pack " << p << " a cost of " << c << ", must be >= 0");
    out[p] = pack_meta{c, payload(packs[p]), static_cast<std::int32_t>(p / per_rank)};
  }
  return out;
}

/// The same for global batch `batch` of a packed stream: packs `[batch * P, (batch + 1) * P)` of
/// `packs` with `P = s.packs()`, which must exist.
template <class CostModel = cost_model>
[[nodiscard]] std::vector<pack_meta>
make_pack_meta(const sample_set& set, const pack_list& packs, std::int64_t batch, const shape& s,
               const CostModel& cost = CostModel{},
               const payload_model& payload = payload_model{}) {
  validate(s);
  const auto n = static_cast<std::int64_t>(packs.size());
  PACKSWAP_EXPECTS(
      batch >= 0 && s.packs() <= n && batch <= n / s.packs() - 1, errc::invalid_argument,
      "global batch " << batch << " of " << s.packs() << " packs is not in a stream of " << n
                      << " packs (" << n / s.packs() << " whole batches)");
  std::vector<pack_features> f(static_cast<std::size_t>(s.packs()));
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = features_of(set, packs.samples(static_cast<std::size_t>(batch * s.packs()) + i));
  }
  return make_pack_meta(span<const pack_features>(f), s, cost, payload);
}

} // namespace packswap
