#include <packswap/refine/movement.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <algorithm>
#include <set>
#include <utility>
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

TEST_CASE("peers are the distinct pairs of ranks that exchange a pack, counted on both sides") {
  prng rng(21);
  for (int trial = 0; trial < 300; ++trial) {
    const auto s = test::random_shape(rng, 64, 8, 2);
    const auto packs = test::random_batch(s, rng(), test::all_mixes[rng.below(7)], true);
    // Any valid assignment: the cells dealt at random, a few packs per rank left home.
    std::vector<cell> cells;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      for (std::int32_t j = 0; j < s.ga * s.mbs; ++j) {
        cells.push_back({r, j / s.mbs});
      }
    }
    for (std::size_t i = cells.size(); i > 1; --i) {
      if (rng.chance(3, 4)) {
        std::swap(cells[i - 1], cells[rng.below(i)]);
      }
    }
    const assignment a = cells;
    std::set<std::pair<std::int32_t, std::int32_t>> pairs;
    for (std::size_t p = 0; p < packs.size(); ++p) {
      const std::int32_t from = packs[p].source_rank;
      const std::int32_t to = a[p].rank;
      if (from != to) {
        pairs.insert({std::min(from, to), std::max(from, to)});
      }
    }
    std::vector<std::int32_t> count(static_cast<std::size_t>(s.dp), 0);
    for (const auto& [lo, hi] : pairs) {
      ++count[static_cast<std::size_t>(lo)];
      ++count[static_cast<std::size_t>(hi)];
    }
    const auto m = measure_movement(packs, a, s);
    CHECK(m.max_peers == *std::max_element(count.begin(), count.end()));
    CHECK(m.mean_peers ==
          doctest::Approx(2.0 * static_cast<double>(pairs.size()) / static_cast<double>(s.dp)));
  }
}
