#include <packswap/cost/pack_meta.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::pack_features;
using packswap::shape;

TEST_CASE("each rank owns a contiguous shard of the global batch's packs") {
  std::vector<pack_features> f(12);
  for (std::size_t p = 0; p < f.size(); ++p) {
    f[p].tokens = 8192;
    f[p].image_tokens = static_cast<std::int64_t>(100 * p);
    f[p].images = p > 0 ? 1 : 0;
  }
  const shape s{/*dp=*/3, /*ga=*/2, /*mbs=*/2}; // K = 4 packs per rank
  const auto meta = packswap::make_pack_meta(f, s);
  REQUIRE(meta.size() == 12);
  for (std::size_t p = 0; p < meta.size(); ++p) {
    CHECK(meta[p].source_rank == static_cast<std::int32_t>(p / 4));
    CHECK(meta[p].cost == packswap::cost_model{}(f[p]));
    CHECK(meta[p].bytes == packswap::payload_model{}(f[p]));
  }
  CHECK_NOTHROW(packswap::validate_batch(meta, s));
}

TEST_CASE("make_pack_meta takes any cost model policy") {
  struct tokens_only {
    std::int64_t operator()(const pack_features& f) const { return f.tokens; }
  };
  std::vector<pack_features> f(2);
  f[1].tokens = 7;
  const auto meta = packswap::make_pack_meta(f, shape{2, 1}, tokens_only{});
  CHECK(meta[1].cost == 7);
  CHECK(meta[1].source_rank == 1);
}

TEST_CASE("make_pack_meta cuts global batches out of a packed stream") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 5'000, 6);
  const auto packs = packswap::greedy_packer{}(set);
  const shape s{4, 8}; // 32 packs per global batch
  const auto f = packswap::features_of(set, packs);
  const auto second = packswap::make_pack_meta(set, packs, 1, s);
  const auto direct =
      packswap::make_pack_meta(packswap::span<const pack_features>(f.data() + 32, 32), s);
  REQUIRE(second.size() == 32);
  for (std::size_t p = 0; p < 32; ++p) {
    CHECK(second[p].cost == direct[p].cost);
    CHECK(second[p].bytes == direct[p].bytes);
    CHECK(second[p].source_rank == direct[p].source_rank);
  }
  const auto whole = static_cast<std::int64_t>(packs.size()) / 32;
  CHECK_NOTHROW(packswap::make_pack_meta(set, packs, whole - 1, s));
  CHECK_THROWS_AS(packswap::make_pack_meta(set, packs, whole, s), packswap::error);
  CHECK_THROWS_AS(packswap::make_pack_meta(set, packs, -1, s), packswap::error);
}

TEST_CASE("make_pack_meta needs exactly one global batch of features") {
  std::vector<pack_features> f(5);
  CHECK_THROWS_WITH_AS(packswap::make_pack_meta(f, shape{2, 2}),
                       "packswap [invalid_argument]: got 5 packs, shape dp=2 ga=2 mbs=1 needs 4",
                       packswap::error);
  CHECK_THROWS_AS(packswap::make_pack_meta(f, shape{0, 2}), packswap::error);
}
