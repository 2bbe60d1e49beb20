#pragma once

#include "packswap/packing/detail/buffered.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"

#include <cstdint>

namespace packswap {

/// The 1D packer: streaming best fit into packs of `capacity` tokens, as a data loader does it.
///
/// Samples arrive in stream order into a buffer of at most `buffer` candidates; one more enters
/// each time one leaves. Each pack opens with the oldest buffered sample, then repeatedly takes
/// the largest buffered sample that still fits (the oldest among equal sizes). When that largest
/// fit would leave a gap no buffered sample fits, up to `lookahead` smaller sizes are tried first,
/// each followed by the largest sample that fits after it, and the pair that fills the pack best
/// is taken instead (a bounded "best two-fit"). When nothing fits the pack closes; at the end of
/// the stream the buffer drains the same way.
///
/// Opening with the oldest sample bounds reordering: a buffered sample is placed within `buffer`
/// packs, so no sample starves. It also keeps large samples in the buffer, where they fill gaps
/// (opening with the largest instead drains them, which matters most without lookahead).
/// Samples are never split; image tokens are ignored (the imbalance of DESIGN.md §1).
/// Deterministic: the packs depend only on the samples' token counts, in order, and on the
/// parameters.
///
/// Cost: a 64-ary bit tree over token counts finds the largest fitting size in a few word
/// operations, plus at most `lookahead` pairs per pack; no allocation after the first (throughput:
/// docs/performance.md). A `greedy_packer` holds no state between calls; one object may be used
/// from many threads.
///
/// ```
/// packswap::greedy_packer packer{/*capacity=*/8192, /*buffer=*/1000};
/// packswap::pack_list packs = packer(samples);
/// ```
struct greedy_packer {
  /// Tokens per pack, in `[1, 2^22]`.
  std::int64_t capacity = 8192;
  /// Candidate buffer size in samples, at least 1 (1: next fit in stream order).
  std::int64_t buffer = 1000;
  /// A sample longer than `capacity`: an error naming it (default), or skipped and listed.
  oversize_policy on_oversize = oversize_policy::reject;
  /// Smaller sizes tried for a better-filling pair when a pack is about to close, >= 0 (0: plain
  /// best fit).
  std::int64_t lookahead = 16;

  /// Packs `set`. Throws `errc::invalid_argument` on a bad parameter, or (policy `reject`) on the
  /// first sample, in stream order, longer than `capacity`: "sample 17 has 9001 tokens, capacity
  /// is 8192".
  [[nodiscard]] pack_list operator()(const sample_set& set) const {
    detail::validate_packer(capacity, buffer, lookahead);
    detail::largest_fit_buffer candidates;
    return detail::pack_buffered(
        set, {capacity, pack_list::no_budget, buffer, lookahead, on_oversize}, candidates);
  }
};

} // namespace packswap
