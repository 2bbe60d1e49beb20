#include <packswap/cost/cost_model.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using packswap::cost_model;
using packswap::pack_features;

static_assert(packswap::is_cost_model_v<cost_model>);
static_assert(!packswap::is_cost_model_v<int>);
namespace {
struct tokens_only {
  std::int64_t operator()(const pack_features& f) const { return f.tokens; }
};
struct returns_double {
  double operator()(const pack_features& f) const { return static_cast<double>(f.tokens); }
};
} // namespace
static_assert(packswap::is_cost_model_v<tokens_only>);
static_assert(!packswap::is_cost_model_v<returns_double>);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
static_assert(packswap::cost_model_like<tokens_only>);
static_assert(!packswap::cost_model_like<returns_double>);
#endif

namespace {
pack_features with_images(std::int64_t image_tokens) {
  pack_features f;
  f.samples = 1;
  f.tokens = 8192;
  f.image_tokens = image_tokens;
  f.images = image_tokens > 0 ? 1 : 0;
  f.image_tokens_sq = image_tokens * image_tokens;
  f.documents = 1;
  f.document_tokens_sq = 8192 * 8192;
  return f;
}
} // namespace

TEST_CASE("the default cost model is the measured ViT forward plus a backward twice as long") {
  const cost_model vit;
  // Forward 60 ms + 0.28 ms per image token (DESIGN.md §1: 3,000 tokens -> 900 ms, 500 -> 200 ms),
  // times 3 for forward + backward, in microseconds.
  CHECK(vit(with_images(3000)) == 3 * 900'000);
  CHECK(vit(with_images(500)) == 3 * 200'000);
  // No image, no ViT.
  CHECK(vit(with_images(0)) == 0);
}

TEST_CASE("every term of the cost model counts, and the sum rounds to the nearest microsecond") {
  cost_model m{0, 0, 0, 0, 0, 0};
  pack_features f = with_images(100);
  CHECK(m(f) == 0);
  m.pack_fs = 1'000'000'000; // 1 us per pack
  CHECK(m(f) == 1);
  m.llm_per_token_fs = 1'000'000; // 1 ns per token: 8192 tokens = 8.192 us
  CHECK(m(f) == 9);
  m = cost_model{0, 0, 0, 0, 0, 0};
  m.vit_attention_fs = 50'000; // 0.05 ns per image token^2: 10,000 -> 0.5 us, rounds up
  CHECK(m(f) == 1);
  m.vit_attention_fs = 49'999;
  CHECK(m(f) == 0);
  m = cost_model{0, 0, 0, 0, 0, 1'000}; // 1 ps per document token^2
  CHECK(m(f) == 67);                    // 8192^2 ps = 67.1 us
  m = cost_model{0, 7'000'000'000, 0, 0, 0, 0};
  CHECK(m(f) == 7);
  CHECK(m(with_images(0)) == 0);
}

TEST_CASE("the cost model refuses negative coefficients and overflowing sums") {
  cost_model m;
  m.llm_per_token_fs = -1;
  CHECK_THROWS_WITH_AS(m(with_images(10)),
                       "packswap [invalid_argument]: cost_model::llm_per_token_fs is -1, must be "
                       ">= 0",
                       packswap::error);
  m = cost_model{};
  m.vit_per_image_token_fs = std::numeric_limits<std::int64_t>::max() / 2;
  try {
    (void)m(with_images(4));
    FAIL("no overflow reported");
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::overflow);
  }
}
