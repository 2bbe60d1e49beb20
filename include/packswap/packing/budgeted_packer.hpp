#pragma once

#include "packswap/error.hpp"
#include "packswap/packing/detail/buffered.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"

#include <cstdint>

namespace packswap {

/// The 2D packer: packs of at most `capacity` tokens and at most `image_budget` image tokens.
///
/// The same streaming loop as `greedy_packer` (oldest sample opens a pack, then the largest that
/// fits, with the same bounded pair lookahead), with a second limit: a sample fits when both its
/// tokens fit the token room and its image tokens fit the image room. It balances the vision
/// encoder's work per pack, but when most samples carry images the image budget runs out before
/// the token space does and packs close part empty: DESIGN.md §1 reports efficiency falling from
/// 99% to 66%, and a larger buffer does not cure it. The budget is a dial between "balanced but
/// empty" and "full but unbalanced"; with `image_budget >= capacity` the packs are exactly
/// `greedy_packer`'s. Packswap keeps it to measure that trade-off (see `packswap-pack`).
///
/// Cost: O(log capacity) per step (a min-tree over token counts of the fewest image tokens
/// buffered at each count) plus a walk of the buffered samples sharing one token count; about a
/// million samples/s. Deterministic; holds no state between calls.
///
/// ```
/// // Budget: the mean image tokens per pack of a 1D packing of the same stream.
/// auto one_d = packswap::pack_samples(samples);
/// packswap::budgeted_packer packer{8192, packswap::mean_image_tokens_per_pack(one_d)};
/// packswap::pack_list packs = packer(samples);
/// ```
struct budgeted_packer {
  /// Tokens per pack, in `[1, 2^22]`.
  std::int64_t capacity = 8192;
  /// Image tokens per pack, >= 0. A placeholder default: choose it from your data.
  std::int64_t image_budget = 4096;
  /// Candidate buffer size in samples, at least 1.
  std::int64_t buffer = 1000;
  /// A sample longer than `capacity` or with more image tokens than `image_budget`: an error
  /// naming it (default), or skipped and listed in `pack_list::skipped()`.
  oversize_policy on_oversize = oversize_policy::reject;
  /// Smaller sizes tried for a better-filling pair when a pack is about to close, >= 0.
  std::int64_t lookahead = 16;

  /// Packs `set`. Throws `errc::invalid_argument` on a bad parameter, or (policy `reject`) on the
  /// first sample, in stream order, that fits no pack: "sample 3 has 5000 image tokens, the image
  /// budget is 4096".
  [[nodiscard]] pack_list operator()(const sample_set& set) const {
    detail::validate_packer(capacity, buffer, lookahead);
    PACKSWAP_EXPECTS(image_budget >= 0, errc::invalid_argument,
                     "image budget is " << image_budget << " tokens, must be >= 0");
    detail::budgeted_fit_buffer candidates;
    return detail::pack_buffered(set, {capacity, image_budget, buffer, lookahead, on_oversize},
                                 candidates);
  }
};

} // namespace packswap
