#include <packswap/batch.hpp>
#include <packswap/error.hpp>
#include <packswap/simulate/network.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::cell;
using packswap::network_model;
using packswap::pack_meta;
using packswap::shape;

namespace {

network_model simple_net() {
  network_model net;
  net.intra_node_bytes_per_s = 1'000'000'000; // 1,000 bytes per us
  net.inter_node_bytes_per_s = 100'000'000;   // 100 bytes per us
  net.latency_ns = 1'500;
  net.ranks_per_node = 2;
  return net;
}

} // namespace

TEST_CASE("a transfer takes the slower link plus the latency of every message") {
  const auto net = simple_net();
  CHECK(net.transfer_us(0, 0, 0) == 0);
  CHECK(net.transfer_us(10'000, 0, 1) == 10 + 2);     // 1.5 us latency rounds up
  CHECK(net.transfer_us(10'000, 2'000, 2) == 20 + 3); // links run at once: max(10, 20)
  CHECK(net.transfer_us(1, 0, 0) == 1);               // partial microseconds round up
  CHECK(net.transfer_us(0, 250'000'000, 0) == 2'500'000);
}

TEST_CASE("transfer times stay exact at the largest bandwidth and large byte counts") {
  network_model net;
  net.intra_node_bytes_per_s = network_model::max_bytes_per_s;
  net.latency_ns = 0;
  // 10^13 + 1 bytes at 10^13 bytes/s: one second and a sliver.
  CHECK(net.transfer_us(10'000'000'000'001, 0, 0) == 1'000'001);
}

TEST_CASE("the network model rejects bad parameters, naming them") {
  auto net = simple_net();
  net.inter_node_bytes_per_s = -5;
  CHECK_THROWS_WITH_AS(net.validate(), doctest::Contains("inter-node bandwidth is -5 bytes/s"),
                       packswap::error);
  net = simple_net();
  net.intra_node_bytes_per_s = 0;
  CHECK_THROWS_WITH_AS(net.validate(), doctest::Contains("intra-node bandwidth is 0"),
                       packswap::error);
  net = simple_net();
  net.ranks_per_node = 0;
  CHECK_THROWS_WITH_AS(net.validate(), doctest::Contains("ranks per node is 0"), packswap::error);
  net = simple_net();
  net.latency_ns = -1;
  CHECK_THROWS_WITH_AS(net.validate(), doctest::Contains("latency is -1 ns"), packswap::error);
}

TEST_CASE("the solver's topology weighs a crossing byte by the bandwidth ratio") {
  const auto topo = simple_net().topology();
  CHECK(topo.node(3) == 1);
  CHECK(topo.weight(0, 1) == 1);
  CHECK(topo.weight(0, 2) == 10);
  network_model even;
  even.inter_node_bytes_per_s = even.intra_node_bytes_per_s * 2; // faster across: still >= 1
  CHECK(even.topology().inter_node_weight() == 1);
}

TEST_CASE("each micro-step's exchange is the longer of a rank's sends and receives") {
  // dp = 4 on two nodes {0, 1} {2, 3}; ga = 2; rank r loaded packs 2r and 2r + 1.
  const shape s{4, 2};
  std::vector<pack_meta> packs(8);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    packs[p] =
        pack_meta{1, 1000 * static_cast<std::int64_t>(p + 1), static_cast<std::int32_t>(p / 2)};
  }
  packswap::assignment a = {
      {0, 0}, {1, 1}, // pack 1 (2,000 B) goes to rank 1, same node, micro-step 1
      {1, 0}, {3, 0}, // pack 3 (4,000 B) goes to rank 3, other node, micro-step 0
      {2, 0}, {2, 1}, // rank 2 keeps its packs
      {0, 1}, {3, 1}, // pack 6 (7,000 B) goes to rank 0, other node, micro-step 1
  };
  const auto x = packswap::measure_exchange(packs, a, s, simple_net());
  CHECK(x.moved == 3);
  CHECK(x.moved_bytes == 2000 + 4000 + 7000);
  CHECK(x.inter_node_bytes == 4000 + 7000);
  REQUIRE(x.time_us.size() == 8);
  // Rank 0: micro-step 1 receives 7,000 B across nodes: 70 us + 2 us latency.
  CHECK(x.time_us[0 * 2 + 0] == 0);
  CHECK(x.time_us[0 * 2 + 1] == 72);
  // Rank 1: sends 4,000 B across in micro-step 0 (42 us), receives 2,000 B in micro-step 1.
  CHECK(x.time_us[1 * 2 + 0] == 42);
  CHECK(x.time_us[1 * 2 + 1] == 2 + 2);
  // Rank 3: receives pack 3 in micro-step 0, sends pack 6 in micro-step 1.
  CHECK(x.time_us[3 * 2 + 0] == 42);
  CHECK(x.time_us[3 * 2 + 1] == 72);
  CHECK(x.time_us[2 * 2 + 0] == 0);
}

TEST_CASE("an assignment that keeps every pack home exchanges nothing") {
  const shape s{2, 2};
  const std::vector<pack_meta> packs = {{5, 100, 0}, {5, 100, 0}, {5, 100, 1}, {5, 100, 1}};
  const packswap::assignment a = {{0, 1}, {0, 0}, {1, 0}, {1, 1}};
  const auto x = packswap::measure_exchange(packs, a, s, network_model{});
  CHECK(x.moved == 0);
  CHECK(x.moved_bytes == 0);
  for (const auto t : x.time_us) {
    CHECK(t == 0);
  }
}
