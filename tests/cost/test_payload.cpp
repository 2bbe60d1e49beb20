#include <packswap/cost/payload.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using packswap::pack_features;
using packswap::payload_model;

TEST_CASE("the payload counts token ids for text and bf16 pixels for image tokens") {
  pack_features f;
  f.tokens = 8192;
  f.image_tokens = 3000;
  const payload_model payload;
  CHECK(payload(f) == 4 * 5192 + 4704 * 3000);
  const payload_model custom{2, 100, 64};
  CHECK(custom(f) == 2 * 5192 + 100 * 3000 + 64);
}

TEST_CASE("the payload model refuses negative sizes and overflow") {
  pack_features f;
  f.tokens = 10;
  f.image_tokens = 5;
  CHECK_THROWS_AS((payload_model{-1, 4704, 0}(f)), packswap::error);
  const payload_model huge{1, std::numeric_limits<std::int64_t>::max(), 0};
  try {
    (void)huge(f);
    FAIL("no overflow reported");
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::overflow);
  }
}
