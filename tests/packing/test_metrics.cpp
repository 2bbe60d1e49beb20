#include <packswap/packing/metrics.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::nearest_rank_percentiles;
using packswap::pack_list;

TEST_CASE("percentiles follow the nearest-rank definition") {
  std::vector<std::int64_t> v;
  for (int i = 100; i >= 1; --i) {
    v.push_back(i);
  }
  auto p = nearest_rank_percentiles(v);
  CHECK(p.min == 1);
  CHECK(p.median == 50);
  CHECK(p.p90 == 90);
  CHECK(p.p99 == 99);
  CHECK(p.max == 100);
  // n = 7: ranks ceil(3.5) = 4, ceil(6.3) = 7, ceil(6.93) = 7.
  p = nearest_rank_percentiles(std::vector<std::int64_t>{70, 10, 30, 20, 60, 40, 50});
  CHECK(p.median == 40);
  CHECK(p.p90 == 70);
  CHECK(p.p99 == 70);
  // Even n: the lower middle value.
  CHECK(nearest_rank_percentiles(std::vector<std::int64_t>{1, 2, 3, 4}).median == 2);
  p = nearest_rank_percentiles(std::vector<std::int64_t>{5});
  CHECK((p.min == 5 && p.median == 5 && p.p90 == 5 && p.p99 == 5 && p.max == 5));
  p = nearest_rank_percentiles(std::vector<std::int64_t>{});
  CHECK((p.min == 0 && p.median == 0 && p.max == 0));
}

TEST_CASE("measure_packing reports efficiency, counts and the image tokens per pack") {
  pack_list packs(100);
  packs.add(0, 60, 50);
  packs.add(1, 39, 0);
  packs.close();
  packs.add(2, 80, 10);
  packs.close();
  packs.add(3, 50, 30);
  packs.close();
  packs.skip(4);
  const auto m = packswap::measure_packing(packs);
  CHECK(m.samples == 4);
  CHECK(m.skipped == 1);
  CHECK(m.packs == 3);
  CHECK(m.capacity == 100);
  CHECK(m.tokens == 229);
  CHECK(m.image_tokens == 90);
  CHECK(m.efficiency() == doctest::Approx(229.0 / 300.0));
  CHECK(m.image_tokens_per_pack.min == 10);
  CHECK(m.image_tokens_per_pack.median == 30);
  CHECK(m.image_tokens_per_pack.max == 50);
  CHECK(packswap::mean_image_tokens_per_pack(packs) == 30);
}

TEST_CASE("an empty pack list has zero efficiency and a zero mean") {
  const pack_list packs;
  CHECK(packswap::measure_packing(packs).efficiency() == 0.0);
  CHECK(packswap::mean_image_tokens_per_pack(packs) == 0);
}

TEST_CASE("the mean image tokens per pack rounds to nearest, halves up") {
  pack_list packs(100);
  packs.add(0, 10, 1);
  packs.close();
  packs.add(1, 10, 2);
  packs.close();
  CHECK(packswap::mean_image_tokens_per_pack(packs) == 2); // 1.5
  packs.add(2, 10, 2);
  packs.close();
  CHECK(packswap::mean_image_tokens_per_pack(packs) == 2); // 1.67
  packs.add(3, 10, 0);
  packs.close();
  CHECK(packswap::mean_image_tokens_per_pack(packs) == 1); // 1.25
}
