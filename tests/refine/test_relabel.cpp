#include <packswap/balance/balance.hpp>
#include <packswap/balance/metrics.hpp>
#include <packswap/refine/movement.hpp>
#include <packswap/refine/relabel.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

using namespace packswap;

TEST_CASE("renaming ranks keeps A and B and never moves more bytes") {
  prng rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const auto s = test::random_shape(rng, 32, 8, 3);
    const auto packs =
        test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 2));
    const auto costs = test::costs_of(packs);
    const auto a = balance(costs, s);
    const auto b = relabel_ranks(packs, s, a);
    CHECK_NOTHROW(validate_assignment(b, s));
    const auto ma = measure_balance(costs, a, s);
    const auto mb = measure_balance(costs, b, s);
    CHECK(ma.a == mb.a);
    CHECK(ma.b == mb.b);
    CHECK(measure_movement(packs, b, s).moved_bytes <= measure_movement(packs, a, s).moved_bytes);
  }
}

TEST_CASE("with a node map, renaming never moves more weighted bytes than the names it got") {
  prng rng(12);
  for (int trial = 0; trial < 400; ++trial) {
    const auto s = test::random_shape(rng, 32, 8, 2);
    const auto packs = test::random_batch(s, rng(), test::all_mixes[rng.below(7)], true);
    const auto nodes =
        topology::uniform(static_cast<std::int32_t>(rng.uniform(1, 8)), rng.uniform(2, 16));
    const auto a = balance(test::costs_of(packs), s);
    const auto b = relabel_ranks(packs, s, a, nodes);
    CHECK(measure_movement(packs, b, s, nodes).weighted_bytes <=
          measure_movement(packs, a, s, nodes).weighted_bytes);
  }
}

TEST_CASE("a column that is one rank's own packs gets that rank's name") {
  const shape s{3, 2, 1};
  const std::vector<pack_meta> packs{{5, 10, 0}, {4, 10, 0}, {5, 10, 1},
                                     {4, 10, 1}, {5, 10, 2}, {4, 10, 2}};
  // Stage 1 put rank 2's packs in column 0, rank 0's in column 1, rank 1's in column 2.
  const assignment a{{1, 0}, {1, 1}, {2, 0}, {2, 1}, {0, 0}, {0, 1}};
  const auto b = relabel_ranks(packs, s, a);
  CHECK(measure_movement(packs, b, s).moved == 0);
}
