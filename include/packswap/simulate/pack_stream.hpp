#pragma once

#include "packswap/batch.hpp"
#include "packswap/cost/cost_model.hpp"
#include "packswap/cost/features.hpp"
#include "packswap/cost/payload.hpp"
#include "packswap/detail/prng.hpp"
#include "packswap/error.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"
#include "packswap/simulate/compute_model.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// What the simulator needs of a packed sample stream, one entry per pack in loader order: its
/// compute time, its payload and its real tokens. Priced once, then cut into global batches for
/// every method, GPU count and step (`batch_start`, `batch_meta`).
///
/// ```
/// auto packs = packswap::pack_samples(samples);
/// auto stream = packswap::make_pack_stream(samples, packs);   // default compute and payload
/// ```
struct pack_stream {
  std::int64_t capacity = 0;            ///< tokens a pack may hold
  std::vector<std::int64_t> compute_us; ///< ViT + LLM forward and backward, per pack
  std::vector<std::int64_t> bytes;      ///< payload per pack
  std::vector<std::int64_t> tokens;     ///< real tokens per pack

  /// The number of packs.
  [[nodiscard]] std::size_t size() const noexcept { return compute_us.size(); }
};

/// Prices every pack of `packs`, packed from `set`, with `model` (a cost model in microseconds:
/// `compute_model` by default) and `payload`.
template <class ComputeModel = compute_model>
[[nodiscard]] pack_stream make_pack_stream(const sample_set& set, const pack_list& packs,
                                           const ComputeModel& model = ComputeModel{},
                                           const payload_model& payload = payload_model{}) {
  static_assert(is_cost_model_v<ComputeModel>,
                "ComputeModel must be callable as std::int64_t(const pack_features&) const");
  pack_stream out;
  out.capacity = packs.capacity();
  out.compute_us.resize(packs.size());
  out.bytes.resize(packs.size());
  out.tokens.resize(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto f = features_of(set, packs.samples(p));
    out.compute_us[p] = model(f);
    PACKSWAP_EXPECTS(out.compute_us[p] >= 0, errc::invalid_argument,
                     "the compute model gives pack " << p << " " << out.compute_us[p]
                                                     << " us, must be >= 0");
    out.bytes[p] = payload(f);
    out.tokens[p] = f.tokens;
  }
  return out;
}

/// `stream` without its first and last `n` packs (an empty stream when it has no more than
/// `2 * n`). A streaming packer's ends are not typical of it: it starts with a full candidate
/// buffer, so its first packs fill better than the rest (the 2D packer's for some 1,500 packs
/// with a buffer of 1,000), and it drains the buffer at the end into part-empty packs. Cut global
/// batches from the steady middle: drop about twice the buffer size at each end.
///
/// ```
/// auto stream = packswap::drop_ends(packswap::make_pack_stream(samples, packs), 2000);
/// ```
[[nodiscard]] inline pack_stream drop_ends(const pack_stream& stream, std::size_t n) {
  pack_stream out;
  out.capacity = stream.capacity;
  if (stream.size() <= 2 * n) {
    return out;
  }
  const auto first = static_cast<std::ptrdiff_t>(n);
  const auto last = static_cast<std::ptrdiff_t>(stream.size() - n);
  out.compute_us.assign(stream.compute_us.begin() + first, stream.compute_us.begin() + last);
  out.bytes.assign(stream.bytes.begin() + first, stream.bytes.begin() + last);
  out.tokens.assign(stream.tokens.begin() + first, stream.tokens.begin() + last);
  return out;
}

/// Where global batch `k` of `steps` (each `batch_packs` packs) starts in a stream of
/// `stream_packs` packs. When the stream holds all of them, batch k is simply the k-th run of
/// `batch_packs` packs, as a loader reads it. Otherwise every batch starts at a position drawn
/// from `seed` and `k` alone and wraps around the end: a bootstrap of the stream, so a pool of a
/// few hundred thousand packs serves any number of steps, each batch still a stretch of
/// consecutive packs. Throws `errc::invalid_argument` when one batch does not fit the stream or
/// `k` is not in `[0, steps)`.
[[nodiscard]] inline std::size_t batch_start(std::size_t stream_packs, std::int64_t batch_packs,
                                             std::int64_t steps, std::int64_t k,
                                             std::uint64_t seed) {
  PACKSWAP_EXPECTS(batch_packs >= 1 && static_cast<std::uint64_t>(batch_packs) <= stream_packs,
                   errc::invalid_argument,
                   "a global batch of " << batch_packs << " packs does not fit a stream of "
                                        << stream_packs << " packs");
  PACKSWAP_EXPECTS(steps >= 1 && k >= 0 && k < steps, errc::invalid_argument,
                   "global batch " << k << " is not in [0, " << steps << ")");
  if (static_cast<std::uint64_t>(steps) <= stream_packs / static_cast<std::uint64_t>(batch_packs)) {
    return static_cast<std::size_t>(k * batch_packs);
  }
  // Each batch its own generator (the constructor mixes the seed through SplitMix64): the same
  // start whichever batches are simulated, in whatever order.
  prng rng(seed + (static_cast<std::uint64_t>(k) + 1) * 0x9e3779b97f4a7c15ULL);
  return static_cast<std::size_t>(rng.below(stream_packs));
}

/// The solver's metadata for the global batch of shape `s` that starts at pack `start` of
/// `stream` (wrapping around its end): cost = compute time, the payload, and source rank r for
/// the r-th run of `ga * mbs` packs (contiguous shards).
[[nodiscard]] inline std::vector<pack_meta> batch_meta(const pack_stream& stream, std::size_t start,
                                                       const shape& s) {
  validate(s);
  const std::size_t n = stream.size();
  PACKSWAP_EXPECTS(static_cast<std::uint64_t>(s.packs()) <= n && start < n, errc::invalid_argument,
                   "a global batch of " << s.packs() << " packs from pack " << start
                                        << " does not fit a stream of " << n << " packs");
  std::vector<pack_meta> out(static_cast<std::size_t>(s.packs()));
  const auto k = static_cast<std::size_t>(s.packs_per_rank());
  for (std::size_t p = 0; p < out.size(); ++p) {
    const std::size_t i = (start + p) % n;
    out[p] = pack_meta{stream.compute_us[i], stream.bytes[i], static_cast<std::int32_t>(p / k)};
  }
  return out;
}

/// Real tokens of the `count` packs of `stream` from `start` (wrapping).
[[nodiscard]] inline std::int64_t batch_tokens(const pack_stream& stream, std::size_t start,
                                               std::int64_t count) {
  std::int64_t sum = 0;
  for (std::int64_t p = 0; p < count; ++p) {
    sum += stream.tokens[(start + static_cast<std::size_t>(p)) % stream.size()];
  }
  return sum;
}

} // namespace packswap
