#pragma once

#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/sample.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// What a pack's compute cost and payload depend on: the inputs of every term of DESIGN.md §3.
/// Attention never crosses a sample, nor a document inside one.
struct pack_features {
  std::int64_t samples = 0;            ///< samples in the pack
  std::int64_t tokens = 0;             ///< all tokens, image tokens included
  std::int64_t image_tokens = 0;       ///< tokens of all images
  std::int64_t images = 0;             ///< images
  std::int64_t image_tokens_sq = 0;    ///< sum over images of (its tokens)^2: ViT attention
  std::int64_t documents = 0;          ///< documents (each sample has at least one)
  std::int64_t document_tokens_sq = 0; ///< sum over documents of (its length)^2: LLM attention

  /// Every field equal.
  [[nodiscard]] friend bool operator==(const pack_features& a, const pack_features& b) noexcept {
    return a.samples == b.samples && a.tokens == b.tokens && a.image_tokens == b.image_tokens &&
           a.images == b.images && a.image_tokens_sq == b.image_tokens_sq &&
           a.documents == b.documents && a.document_tokens_sq == b.document_tokens_sq;
  }
  /// Some field differs.
  [[nodiscard]] friend bool operator!=(const pack_features& a, const pack_features& b) noexcept {
    return !(a == b);
  }
};

/// The features of the samples `ids` of `set` taken together as one pack. Throws
/// `errc::invalid_argument` for an id outside the set and `errc::overflow` when a sum leaves
/// `std::int64_t` (which no pack of at most 2^22 tokens comes near).
///
/// ```
/// auto f = packswap::features_of(samples, packs.samples(0));
/// ```
[[nodiscard]] inline pack_features features_of(const sample_set& set,
                                               span<const std::int32_t> ids) {
  pack_features f;
  for (const auto id : ids) {
    PACKSWAP_EXPECTS(id >= 0 && static_cast<std::size_t>(id) < set.size(), errc::invalid_argument,
                     "sample id " << id << " is outside the set of " << set.size() << " samples");
    const auto i = static_cast<std::size_t>(id);
    ++f.samples;
    f.tokens = detail::checked_add(f.tokens, set.tokens(i), "pack tokens");
    f.image_tokens = detail::checked_add(f.image_tokens, set.image_tokens(i), "pack image tokens");
    for (const std::int64_t t : set.images(i)) {
      ++f.images;
      f.image_tokens_sq = detail::checked_add(f.image_tokens_sq, t * t, "sum of image tokens^2");
    }
    for (const std::int64_t d : set.documents(i)) {
      ++f.documents;
      f.document_tokens_sq =
          detail::checked_add(f.document_tokens_sq, d * d, "sum of document length^2");
    }
  }
  return f;
}

/// The features of every pack of `packs`, which `set` was packed into.
[[nodiscard]] inline std::vector<pack_features> features_of(const sample_set& set,
                                                            const pack_list& packs) {
  std::vector<pack_features> out;
  out.reserve(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    out.push_back(features_of(set, packs.samples(p)));
  }
  return out;
}

} // namespace packswap
