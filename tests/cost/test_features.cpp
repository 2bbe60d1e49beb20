#include <packswap/cost/features.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::features_of;
using packswap::sample_set;

TEST_CASE("pack features add up tokens, images and the squares attention costs depend on") {
  sample_set set;
  set.push_back(1000, std::vector<std::int64_t>{300, 200}, std::vector<std::int64_t>{600, 400});
  set.push_back(500);
  set.push_back(2000, std::vector<std::int64_t>{1500});
  const std::vector<std::int32_t> ids = {0, 1, 2};
  const auto f = features_of(set, ids);
  CHECK(f.samples == 3);
  CHECK(f.tokens == 3500);
  CHECK(f.image_tokens == 2000);
  CHECK(f.images == 3);
  CHECK(f.image_tokens_sq == 300 * 300 + 200 * 200 + 1500 * 1500);
  CHECK(f.documents == 4);
  CHECK(f.document_tokens_sq == 600 * 600 + 400 * 400 + 500 * 500 + 2000 * 2000);
  CHECK(features_of(set, std::vector<std::int32_t>{}) == packswap::pack_features{});
}

TEST_CASE("features of a pack list match each pack's totals") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 3'000, 2);
  const auto packs = packswap::greedy_packer{}(set);
  const auto f = features_of(set, packs);
  REQUIRE(f.size() == packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    CHECK(f[p].tokens == packs.tokens(p));
    CHECK(f[p].image_tokens == packs.image_tokens(p));
    CHECK(f[p].samples == static_cast<std::int64_t>(packs.samples(p).size()));
    CHECK(f[p].document_tokens_sq <= f[p].tokens * f[p].tokens);
  }
}

TEST_CASE("features refuse a sample id outside the set") {
  sample_set set;
  set.push_back(10);
  CHECK_THROWS_WITH_AS(features_of(set, std::vector<std::int32_t>{0, 1}),
                       "packswap [invalid_argument]: sample id 1 is outside the set of 1 samples",
                       packswap::error);
  CHECK_THROWS_AS(features_of(set, std::vector<std::int32_t>{-1}), packswap::error);
}

TEST_CASE("feature sums that leave int64 are an overflow error") {
  sample_set set;
  set.push_back(sample_set::max_count);
  std::vector<std::int32_t> ids(3, 0); // 3 * (2^31 - 1)^2 > 2^63
  CHECK_THROWS_WITH_AS(features_of(set, ids),
                       "packswap [overflow]: sum of document length^2 overflows int64: "
                       "9223372028264841218 + 4611686014132420609",
                       packswap::error);
}
