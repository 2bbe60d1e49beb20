#include <packswap/cost/presets.hpp>

#include <doctest/doctest.h>

#include <cstdint>

using packswap::cost_model;
using packswap::pack_features;

namespace {
pack_features pack_of(std::int64_t images, std::int64_t tokens_each) {
  pack_features f;
  f.samples = images;
  f.tokens = 8192;
  f.images = images;
  f.image_tokens = images * tokens_each;
  f.image_tokens_sq = images * tokens_each * tokens_each;
  f.documents = images;
  f.document_tokens_sq = 8192 * 8192;
  return f;
}
} // namespace

TEST_CASE("the H200 presets are the fits docs/vit-calibration.log printed, encoder terms only") {
  // python/tests/test_cost.py checks these against the log itself.
  const cost_model l14 = packswap::vit_l14_h200_bf16();
  CHECK(l14.vit_fixed_fs == 5'225'327'513'864);
  CHECK(l14.vit_per_image_token_fs == 4'659'091'983);
  CHECK(l14.vit_attention_fs == 1'276'606);
  const cost_model so400m = packswap::so400m_h200_bf16();
  CHECK(so400m.vit_fixed_fs == 6'265'514'245'361);
  CHECK(so400m.vit_per_image_token_fs == 6'353'299'612);
  CHECK(so400m.vit_attention_fs == 2'218'483);
  for (const cost_model& m : {l14, so400m}) {
    CHECK(m.pack_fs == 0);
    CHECK(m.llm_per_token_fs == 0);
    CHECK(m.llm_attention_fs == 0);
  }
}

TEST_CASE("the H200 presets' costs of reference packs, in microseconds") {
  const cost_model l14 = packswap::vit_l14_h200_bf16();
  const cost_model so400m = packswap::so400m_h200_bf16();
  // The calibration's largest pack, one image of 8,119 tokens (measured: 119.3 and 192.3 ms).
  CHECK(l14(pack_of(1, 8119)) == 127'204);
  CHECK(so400m(pack_of(1, 8119)) == 204'086);
  // A text-only pack does not run the encoder.
  CHECK(l14(pack_of(0, 0)) == 0);
  // The same 8,000 image tokens as eight images cost less than as one: attention stays within
  // each image (5.23 ms + 37.27 ms + 10.21 ms, against 5.23 + 37.27 + 81.70).
  CHECK(l14(pack_of(8, 1000)) == 52'711);
  CHECK(l14(pack_of(1, 8000)) == 124'201);
}
