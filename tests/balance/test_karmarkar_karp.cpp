#include <packswap/balance/karmarkar_karp.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/detail/sort.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

using namespace packswap;

TEST_CASE("every set of Karmarkar-Karp takes exactly one item of every chunk") {
  prng rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const auto k = static_cast<std::int32_t>(rng.uniform(1, 40));
    const auto chunks = static_cast<std::int32_t>(rng.uniform(1, 12));
    std::vector<std::int64_t> value(static_cast<std::size_t>(k * chunks));
    for (auto& v : value) {
      v = rng.uniform(0, 1000);
    }
    const auto order = detail::order_desc(value);
    std::vector<std::int32_t> set_of(value.size(), -1);
    detail::karmarkar_karp(value, order, k).assign(set_of);
    for (std::int32_t c = 0; c < chunks; ++c) {
      std::vector<int> hits(static_cast<std::size_t>(k), 0);
      for (std::int32_t i = 0; i < k; ++i) {
        const auto item = static_cast<std::size_t>(order[static_cast<std::size_t>(c * k + i)]);
        REQUIRE(set_of[item] >= 0);
        ++hits[static_cast<std::size_t>(set_of[item])];
      }
      CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    }
  }
}

TEST_CASE("the final spread of Karmarkar-Karp is at most the largest chunk spread") {
  prng rng(4);
  for (int trial = 0; trial < 500; ++trial) {
    const auto k = static_cast<std::int32_t>(rng.uniform(2, 30));
    const auto chunks = static_cast<std::int32_t>(rng.uniform(1, 10));
    std::vector<std::int64_t> value(static_cast<std::size_t>(k * chunks));
    for (auto& v : value) {
      v = rng.chance(1, 10) ? rng.uniform(0, 1'000'000) : rng.uniform(0, 1000);
    }
    const auto order = detail::order_desc(value);
    std::int64_t widest = 0;
    for (std::int32_t c = 0; c < chunks; ++c) {
      const auto hi = value[static_cast<std::size_t>(order[static_cast<std::size_t>(c * k)])];
      const auto lo =
          value[static_cast<std::size_t>(order[static_cast<std::size_t>(c * k + k - 1)])];
      widest = std::max(widest, hi - lo);
    }
    std::vector<std::int32_t> set_of(value.size(), 0);
    detail::karmarkar_karp kk(value, order, k);
    kk.assign(set_of);
    std::vector<std::int64_t> sums(static_cast<std::size_t>(k), 0);
    for (std::size_t i = 0; i < value.size(); ++i) {
      sums[static_cast<std::size_t>(set_of[i])] += value[i];
    }
    const auto [lo, hi] = std::minmax_element(sums.begin(), sums.end());
    CHECK(*hi - *lo <= widest);
    CHECK(kk.sum(0) == *hi); // sets are numbered by sum, largest first
  }
}
