#pragma once

#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail {

/// Every rank's node, copied from a topology once per batch, and the weight of a byte between
/// two ranks: what `topology::weight` answers, without its lookups (a map test, a division) in
/// the searches that weigh it for every candidate. O(dp) to assign.
struct rank_weights {
  std::vector<std::int32_t> node; // node of every rank
  std::int32_t nodes = 1;         // how many: the largest node + 1
  std::int64_t inter_weight = 1;
  bool multi_node = false;

  void assign(const topology& topo, std::size_t dp) {
    node.resize(dp);
    nodes = 0;
    for (std::size_t r = 0; r < dp; ++r) {
      node[r] = topo.node(static_cast<std::int32_t>(r));
      nodes = std::max(nodes, node[r] + 1);
    }
    inter_weight = topo.inter_node_weight();
    multi_node = nodes > 1;
  }

  /// Weight of one byte computed on rank r that comes from rank h.
  [[nodiscard]] std::int64_t weight(std::size_t h, std::size_t r) const {
    if (h == r) {
      return 0;
    }
    return multi_node && node[h] != node[r] ? inter_weight : 1;
  }
};

} // namespace packswap::detail
