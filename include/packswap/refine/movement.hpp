#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace packswap {

/// How much data an assignment moves (DESIGN.md §2).
struct movement_metrics {
  std::int64_t moved = 0;            ///< packs whose assigned rank differs from their source rank
  std::int64_t moved_bytes = 0;      ///< bytes of those packs
  std::int64_t inter_node_bytes = 0; ///< bytes among them that cross nodes
  std::int64_t weighted_bytes = 0;   ///< intra-node bytes + inter-node weight * inter-node bytes
  std::int32_t max_peers = 0;        ///< most distinct peers one rank sends to or receives from
  double mean_peers = 0.0;           ///< distinct peers per rank, averaged over ranks
};

/// Movement of assignment `a`: every pack not computed on its source rank is sent once.
inline movement_metrics measure_movement(span<const pack_meta> packs, const assignment& a,
                                         const shape& s, const topology& topo = {}) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  topo.validate_for(s.dp);
  movement_metrics m;
  std::vector<std::pair<std::int32_t, std::int32_t>> links;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const std::int32_t from = packs[p].source_rank;
    const std::int32_t to = a[p].rank;
    if (from == to) {
      continue;
    }
    ++m.moved;
    m.moved_bytes += packs[p].bytes;
    const std::int64_t w = topo.weight(from, to);
    m.weighted_bytes += w * packs[p].bytes;
    if (topo.node(from) != topo.node(to)) {
      m.inter_node_bytes += packs[p].bytes;
    }
    links.emplace_back(from, to);
    links.emplace_back(to, from);
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  std::vector<std::int32_t> peers(static_cast<std::size_t>(s.dp), 0);
  for (const auto& link : links) {
    ++peers[static_cast<std::size_t>(link.first)];
  }
  m.max_peers = *std::max_element(peers.begin(), peers.end());
  m.mean_peers = static_cast<double>(links.size()) / static_cast<double>(s.dp);
  return m;
}

} // namespace packswap
