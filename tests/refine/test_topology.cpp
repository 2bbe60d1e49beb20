#include <packswap/refine/topology.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

using namespace packswap;

TEST_CASE("a byte costs nothing on its rank, one within a node, the weight across nodes") {
  const auto t = topology::uniform(4, 8);
  CHECK(t.weight(5, 5) == 0);
  CHECK(t.weight(4, 7) == 1);
  CHECK(t.weight(3, 4) == 8);
  CHECK(t.node(9) == 2);
  const topology flat;
  CHECK(flat.weight(0, 1000) == 1);
}

TEST_CASE("weighted byte totals saturate at the int64 maximum") {
  const auto t = topology::uniform(4, 8);
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  CHECK(t.weighted(5, 3) == 29);
  CHECK(t.weighted(most, 0) == most);
  CHECK(t.weighted(0, most / 8) == most / 8 * 8);
  CHECK(t.weighted(0, most / 8 + 1) == most);
  CHECK(t.weighted(most - 7, 1) == most);
  CHECK(t.weighted(most - 8, 1) == most);
  CHECK(t.weighted(most - 9, 1) == most - 1);
}

TEST_CASE("a rank-to-node map places ranks anywhere") {
  const auto t = topology::from_map({0, 1, 0, 1}, 3);
  CHECK(t.weight(0, 2) == 1);
  CHECK(t.weight(0, 1) == 3);
  CHECK_THROWS_WITH_AS(t.node(4), doctest::Contains("rank 4 is not in the topology's map of 4"),
                       error);
  CHECK_THROWS_WITH_AS(t.validate_for(5), doctest::Contains("maps 4 ranks, dp is 5"), error);
}

TEST_CASE("bad topology parameters are refused with their values") {
  CHECK_THROWS_WITH_AS(topology::uniform(0), doctest::Contains("ranks per node is 0"), error);
  CHECK_THROWS_WITH_AS(topology::uniform(8, 0), doctest::Contains("inter-node weight is 0"), error);
  CHECK_THROWS_WITH_AS(topology::from_map({0, -1}),
                       doctest::Contains("rank 1 is mapped to node -1"), error);
}
