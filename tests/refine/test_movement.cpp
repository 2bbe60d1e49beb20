#include <packswap/refine/movement.hpp>

#include <doctest/doctest.h>

#include <vector>

using namespace packswap;

TEST_CASE("movement counts moved packs, their bytes, node crossings and distinct peers") {
  const shape s{4, 1, 1};
  // Pack p comes from rank p. Packs 0 and 1 trade places, pack 2 goes to rank 3, pack 3 to 2.
  const std::vector<pack_meta> packs{{1, 100, 0}, {1, 200, 1}, {1, 300, 2}, {1, 400, 3}};
  const assignment a{{1, 0}, {0, 0}, {3, 0}, {2, 0}};
  const auto m = measure_movement(packs, a, s, topology::uniform(2, 5));
  CHECK(m.moved == 4);
  CHECK(m.moved_bytes == 1000);
  CHECK(m.inter_node_bytes == 0); // 0<->1 on node 0, 2<->3 on node 1
  CHECK(m.weighted_bytes == 1000);
  CHECK(m.max_peers == 1);
  CHECK(m.mean_peers == doctest::Approx(1.0));
  const assignment across{{2, 0}, {3, 0}, {0, 0}, {1, 0}};
  const auto x = measure_movement(packs, across, s, topology::uniform(2, 5));
  CHECK(x.inter_node_bytes == 1000);
  CHECK(x.weighted_bytes == 5000);
}

TEST_CASE("an assignment that keeps every pack home moves nothing") {
  const shape s{2, 2, 1};
  const std::vector<pack_meta> packs{{1, 10, 0}, {2, 10, 0}, {3, 10, 1}, {4, 10, 1}};
  const assignment a{{0, 0}, {0, 1}, {1, 1}, {1, 0}};
  const auto m = measure_movement(packs, a, s);
  CHECK(m.moved == 0);
  CHECK(m.moved_bytes == 0);
  CHECK(m.max_peers == 0);
}
