#include <packswap/batch.hpp>
#include <packswap/error.hpp>
#include <packswap/simulate/placement.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::cell;
using packswap::shape;

TEST_CASE("the loader places contiguous shards in loader order") {
  const shape s{3, 2, 2}; // 4 packs per rank, 2 per micro-step
  const auto a = packswap::loader_placement(s);
  REQUIRE(a.size() == 12);
  CHECK(a[0] == cell{0, 0});
  CHECK(a[1] == cell{0, 0});
  CHECK(a[2] == cell{0, 1});
  CHECK(a[5] == cell{1, 0});
  CHECK(a[11] == cell{2, 1});
  CHECK_NOTHROW(packswap::validate_assignment(a, s));
}

TEST_CASE("local reordering keeps every pack home and runs it heaviest first") {
  const shape s{2, 3};
  const std::vector<std::int64_t> costs = {1, 9, 5, /* rank 1: */ 7, 7, 2};
  const auto a = packswap::local_placement(costs, s);
  CHECK(a[1] == cell{0, 0});
  CHECK(a[2] == cell{0, 1});
  CHECK(a[0] == cell{0, 2});
  CHECK(a[3] == cell{1, 0}); // ties: the lower pack id first
  CHECK(a[4] == cell{1, 1});
  CHECK(a[5] == cell{1, 2});
}

TEST_CASE("local reordering fills micro-steps mbs packs at a time") {
  const shape s{1, 2, 2};
  const std::vector<std::int64_t> costs = {1, 4, 3, 2};
  const auto a = packswap::local_placement(costs, s);
  CHECK(a[1].micro_step == 0);
  CHECK(a[2].micro_step == 0);
  CHECK(a[3].micro_step == 1);
  CHECK(a[0].micro_step == 1);
  CHECK_NOTHROW(packswap::validate_assignment(a, s));
}

TEST_CASE("local reordering needs one cost per pack") {
  const std::vector<std::int64_t> costs = {1, 2, 3};
  CHECK_THROWS_WITH_AS(packswap::local_placement(costs, shape{2, 2}),
                       doctest::Contains("got 3 packs, shape dp=2 ga=2 mbs=1 needs 4"),
                       packswap::error);
}

TEST_CASE("local reordering refuses a negative cost, naming the pack") {
  const std::vector<std::int64_t> costs = {1, 2, -3, 4};
  CHECK_THROWS_WITH_AS(packswap::local_placement(costs, shape{2, 2}),
                       doctest::Contains("pack 2 has cost -3, must be >= 0"), packswap::error);
}
