#pragma once

#include "packswap/cost/features.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"

#include <cstdint>

namespace packswap {

/// The bytes a pack's exchange moves between GPUs:
///
///     bytes = bytes_per_pack + bytes_per_text_token * (tokens - image_tokens)
///                            + bytes_per_image_token * image_tokens
///
/// Defaults: a text token is an `int32` token id; an image token is the pixels of one merged
/// 28 x 28 patch, 3 channels in bf16 (28 * 28 * 3 * 2 = 4,704 bytes). Pixels dominate: a pack with
/// 3,000 image tokens moves about 14 MB.
///
/// ```
/// packswap::payload_model payload;
/// std::int64_t bytes = payload(packswap::features_of(samples, packs.samples(0)));
/// ```
struct payload_model {
  std::int64_t bytes_per_text_token = 4;     ///< a token id, >= 0
  std::int64_t bytes_per_image_token = 4704; ///< the pixels behind one image token, >= 0
  std::int64_t bytes_per_pack = 0;           ///< per pack, whatever its contents, >= 0

  /// The payload of a pack with features `f`. Throws `errc::invalid_argument` for a negative
  /// parameter and `errc::overflow` when the sum leaves `std::int64_t`.
  [[nodiscard]] std::int64_t operator()(const pack_features& f) const {
    PACKSWAP_EXPECTS(bytes_per_text_token >= 0 && bytes_per_image_token >= 0 && bytes_per_pack >= 0,
                     errc::invalid_argument,
                     "payload_model has bytes per text token "
                         << bytes_per_text_token << ", per image token " << bytes_per_image_token
                         << ", per pack " << bytes_per_pack << "; all must be >= 0");
    const std::int64_t text =
        detail::checked_mul(bytes_per_text_token, f.tokens - f.image_tokens, "text bytes");
    const std::int64_t pixels =
        detail::checked_mul(bytes_per_image_token, f.image_tokens, "image bytes");
    return detail::checked_add(detail::checked_add(text, pixels, "pack bytes"), bytes_per_pack,
                               "pack bytes");
  }
};

} // namespace packswap
