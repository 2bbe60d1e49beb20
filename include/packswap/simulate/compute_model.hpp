#pragma once

#include "packswap/cost/cost_model.hpp"
#include "packswap/cost/features.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"

#include <cstdint>

namespace packswap {

/// The LLM backbone's forward plus backward time for one pack, in microseconds:
///
///     llm_us = pack_us + round((per_token_fs * tokens + attention_fs * sum over documents of
///                               length^2) / 10^9)
///
/// `pack_us` is paid by every pack, full or not: packs are padded to the capacity (fixed sequence
/// length, static shapes), so a pack that is 66% full costs the LLM what a full one does. That is
/// why packing efficiency is throughput. Set `per_token_fs` instead (and `pack_us = 0`) for a
/// framework that computes only real tokens; `attention_fs` adds variable-length attention, which
/// never crosses a document.
///
/// The default, 1,000 ms per 8,192-token pack, is a 30B-total / 3B-active MoE LLM (the study's
/// model class, DESIGN.md §1): about 6 x 3.3e9 x 8,192 FLOP for the weights plus causal attention,
/// some 2e14 FLOP, at the ~200 TFLOP/s an MoE sustains on an H100/B200-class GPU. With the
/// measured ViT defaults the vision encoder then costs 4.9 s for the median pack of the default
/// workload and up to 7 s: image tokens, not text, decide who straggles, as in the study. Scale
/// `pack_us` with the capacity and your model.
///
/// ```
/// packswap::llm_model llm;            // 1 s per pack
/// llm.attention_fs = 2'000'000;       // plus 2 ns per (document length)^2
/// std::int64_t us = llm(packswap::features_of(samples, packs.samples(0)));
/// ```
struct llm_model {
  std::int64_t pack_us = 1'000'000; ///< every pack, padded to the capacity
  std::int64_t per_token_fs = 0;    ///< each real token (text and image)
  std::int64_t attention_fs = 0;    ///< each (document length)^2

  /// Throws `errc::invalid_argument` for a negative parameter, `errc::overflow` past int64.
  [[nodiscard]] std::int64_t operator()(const pack_features& f) const {
    PACKSWAP_EXPECTS(pack_us >= 0 && per_token_fs >= 0 && attention_fs >= 0, errc::invalid_argument,
                     "llm_model has pack_us " << pack_us << ", per_token_fs " << per_token_fs
                                              << ", attention_fs " << attention_fs
                                              << "; all must be >= 0");
    // cost_model already rounds integer femtosecond sums; reuse its two LLM terms.
    const cost_model terms{0, 0, 0, 0, per_token_fs, attention_fs};
    return detail::checked_add(pack_us, terms(f), "LLM time");
  }
};

/// What one pack costs its GPU in one micro-step, in microseconds: ViT forward + LLM forward +
/// LLM backward + ViT backward. `vit` is the solver's cost model (ViT forward plus backward by
/// default, DESIGN.md §3); `llm` adds the backbone. A cost model itself (`is_cost_model_v`), so it
/// can price the packs the solver balances: the simulator balances on the whole time.
///
/// ```
/// packswap::compute_model model;                      // measured ViT + 1 s LLM per pack
/// auto meta = packswap::make_pack_meta(features, shape, model);
/// ```
struct compute_model {
  cost_model vit{}; ///< ViT forward + backward (any terms it sets count too)
  llm_model llm{};  ///< LLM forward + backward

  /// The ViT's and the LLM's time for a pack with features `f`, in microseconds; throws
  /// `errc::overflow` past `std::int64_t`.
  [[nodiscard]] std::int64_t operator()(const pack_features& f) const {
    return detail::checked_add(vit(f), llm(f), "pack compute time");
  }
};

static_assert(is_cost_model_v<compute_model>, "compute_model must be a cost model");

} // namespace packswap
