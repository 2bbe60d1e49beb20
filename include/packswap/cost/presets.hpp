#pragma once

/// \file
/// Cost models fitted to a real vision encoder on a GPU, next to `cost_model{}`'s defaults
/// (DESIGN.md's ViT measurement).
///
/// Each preset is a ViT with random weights in bf16, timed forward + backward per pack on one
/// NVIDIA H200 by `./scripts/gpu-vit`: each pack captured as CUDA graphs and replayed, so the
/// times are the GPU's work alone, attention within each image through torch's variable-length
/// kernel. The fit is `calibrate` over 96 packs of 80 to 8,119 image tokens and 1 to 39 images
/// (docs/vit-calibration.md; the log is docs/vit-calibration.log, the times
/// docs/vit-timings.json.gz). Only the encoder's terms are set: add your language model's
/// (`llm_per_token_fs`, `llm_attention_fs`) from your own timings, or calibrate the whole step.
/// On another GPU, software stack or encoder, these are a starting point, not a measurement:
/// `calibrate` fits your own.
///
/// ```
/// auto model = packswap::vit_l14_h200_bf16();
/// auto us = model(packswap::features_of(samples, packs.samples(0)));
/// ```

#include "packswap/cost/cost_model.hpp"

namespace packswap {

/// ViT-L/14-like encoder (24 layers, hidden 1024, 16 heads, MLP 4096, 14-pixel patches), forward +
/// backward of one pack, attention per image (varlen): fitted by bench/vit/vit_report.py on NVIDIA
/// H200 (driver 580.159.04, CUDA 13.0), torch 2.11.0+cu130, bfloat16, packswap 0.1.0
/// (c5329da8ee72), 2026-12-04 18:00 UTC; 96 packs: R^2 0.9986, relative error median 1.5%, p95
/// 4.1%. On 256 packs the fit never saw (a second run, docs/vit-balance.log): p95 3.0%. A single
/// image of 8,119 tokens: 127.2 ms predicted, 119.3 ms measured (the largest images are
/// over-predicted by up to 9%).
[[nodiscard]] inline cost_model vit_l14_h200_bf16() noexcept {
  return {/*pack_fs=*/0,
          /*vit_fixed_fs=*/5'225'327'513'864,
          /*vit_per_image_token_fs=*/4'659'091'983,
          /*vit_attention_fs=*/1'276'606,
          /*llm_per_token_fs=*/0,
          /*llm_attention_fs=*/0};
}

/// So400m-like encoder (27 layers, hidden 1152, 16 heads, MLP 4304, 14-pixel patches), forward +
/// backward of one pack, attention per image (varlen): fitted by bench/vit/vit_report.py on NVIDIA
/// H200 (driver 580.159.04, CUDA 13.0), torch 2.11.0+cu130, bfloat16, packswap 0.1.0
/// (c5329da8ee72), 2026-12-04 18:00 UTC; 96 packs: R^2 0.9988, relative error median 1.2%, p95
/// 4.9%. A single image of 8,119 tokens: 204.1 ms predicted, 192.3 ms measured.
[[nodiscard]] inline cost_model so400m_h200_bf16() noexcept {
  return {/*pack_fs=*/0,
          /*vit_fixed_fs=*/6'265'514'245'361,
          /*vit_per_image_token_fs=*/6'353'299'612,
          /*vit_attention_fs=*/2'218'483,
          /*llm_per_token_fs=*/0,
          /*llm_attention_fs=*/0};
}

} // namespace packswap
