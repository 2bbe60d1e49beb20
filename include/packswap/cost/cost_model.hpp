#pragma once

#include "packswap/cost/features.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"

#include <cstdint>
#include <type_traits>
#include <utility>

namespace packswap {

/// Whether `M` is a cost model: a type whose `const` objects are callable on a `pack_features`
/// and return the pack's cost as `std::int64_t`, >= 0, in one integer unit for every pack (so that
/// every rank computes bit-identical costs). `cost_model` is one.
template <class M, class = void>
struct is_cost_model : std::false_type {};
template <class M>
struct is_cost_model<
    M, std::void_t<decltype(std::declval<const M&>()(std::declval<const pack_features&>()))>>
    : std::is_same<std::int64_t,
                   decltype(std::declval<const M&>()(std::declval<const pack_features&>()))> {};
/// `is_cost_model<M>::value`.
template <class M>
inline constexpr bool is_cost_model_v = is_cost_model<M>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The C++20 spelling of `is_cost_model_v`.
template <class M>
concept cost_model_like = is_cost_model_v<M>;
#endif

/// The cost model of DESIGN.md §3: what one pack costs the GPU, forward plus backward, in
/// microseconds, as a sum of linear and quadratic terms with integer coefficients in femtoseconds
/// (10^-15 s) per unit:
///
///     cost_us = round( ( pack_fs                                  every pack
///                      + vit_fixed_fs               if the pack has an image
///                      + vit_per_image_token_fs * image_tokens
///                      + vit_attention_fs       * sum over images of tokens^2
///                      + llm_per_token_fs       * tokens
///                      + llm_attention_fs       * sum over documents of length^2 ) / 10^9 )
///
/// rounded to the nearest microsecond, halves up. Every step is integer and overflow-checked, so
/// every rank gets the same cost for the same pack on any platform. The defaults are the ViT
/// measurement of DESIGN.md §1 (forward 60 ms + 0.28 ms per image token, backward twice the
/// forward): 180 ms per pack with images plus 0.84 ms per image token. The LLM terms default to 0:
/// they depend on your model; `calibrate` fits all six from your own timings.
///
/// ```
/// packswap::cost_model vit;                        // the measured ViT defaults
/// auto us = vit(packswap::features_of(samples, packs.samples(0)));
/// ```
struct cost_model {
  std::int64_t pack_fs = 0;                              ///< every pack
  std::int64_t vit_fixed_fs = 180'000'000'000'000;       ///< every pack with an image
  std::int64_t vit_per_image_token_fs = 840'000'000'000; ///< each image token
  std::int64_t vit_attention_fs = 0;                     ///< each image's (image tokens)^2, summed
  std::int64_t llm_per_token_fs = 0;                     ///< each token, text and image
  std::int64_t llm_attention_fs = 0;                     ///< each document's (length)^2, summed

  /// The cost of a pack with features `f`, in microseconds. Throws `errc::invalid_argument` for a
  /// negative coefficient and `errc::overflow` when the sum leaves `std::int64_t` femtoseconds
  /// (about 2.5 hours).
  [[nodiscard]] std::int64_t operator()(const pack_features& f) const {
    const std::int64_t coef[] = {pack_fs,          vit_fixed_fs,     vit_per_image_token_fs,
                                 vit_attention_fs, llm_per_token_fs, llm_attention_fs};
    const std::int64_t x[] = {1,        f.images > 0 ? 1 : 0, f.image_tokens, f.image_tokens_sq,
                              f.tokens, f.document_tokens_sq};
    constexpr const char* names[] = {
        "pack_fs",          "vit_fixed_fs",     "vit_per_image_token_fs",
        "vit_attention_fs", "llm_per_token_fs", "llm_attention_fs"};
    std::int64_t fs = 0;
    for (int k = 0; k < 6; ++k) {
      PACKSWAP_EXPECTS(coef[k] >= 0, errc::invalid_argument,
                       "cost_model::" << names[k] << " is " << coef[k] << ", must be >= 0");
      fs = detail::checked_add(fs, detail::checked_mul(coef[k], x[k], "a cost term"), "pack cost");
    }
    constexpr std::int64_t fs_per_us = 1'000'000'000;
    return fs / fs_per_us + (fs % fs_per_us >= fs_per_us / 2 ? 1 : 0);
  }
};

} // namespace packswap
