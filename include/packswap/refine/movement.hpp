#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/select.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap {

/// How much data an assignment moves (DESIGN.md §2).
struct movement_metrics {
  std::int64_t moved = 0;            ///< packs whose assigned rank differs from their source rank
  std::int64_t moved_bytes = 0;      ///< bytes of those packs
  std::int64_t inter_node_bytes = 0; ///< bytes among them that cross nodes
  std::int64_t weighted_bytes = 0;   ///< intra-node bytes + inter-node weight * inter-node bytes
                                     ///< (saturated at the int64 maximum)
  std::int32_t max_peers =
      0; ///< most distinct peers one rank sends to or receives from (0 if not counted)
  double mean_peers = 0.0; ///< distinct peers per rank, averaged over ranks (0 if not counted)
};

namespace detail {

// Movement of a valid assignment, no validation. O(packs), plus a sort of the moved (source,
// destination) pairs when `peers` is set.
inline movement_metrics movement_of(span<const pack_meta> packs, const assignment& a,
                                    std::int32_t dp, const topology& topo, bool peers) {
  movement_metrics m;
  std::vector<std::int32_t> node(static_cast<std::size_t>(dp));
  for (std::int32_t r = 0; r < dp; ++r) {
    node[static_cast<std::size_t>(r)] = topo.node(r);
  }
  std::vector<std::uint64_t> links;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const std::int32_t from = packs[p].source_rank;
    const std::int32_t to = a[p].rank;
    // Summed without a branch on whether the pack moved, which follows no pattern.
    const bool moved = from != to;
    m.moved += keep_if(moved, 1);
    m.moved_bytes += keep_if(moved, packs[p].bytes);
    const bool cross = node[static_cast<std::size_t>(from)] != node[static_cast<std::size_t>(to)];
    m.inter_node_bytes += keep_if(cross, packs[p].bytes); // a pack that stays crosses nothing
    if (peers && moved) {
      const auto lo = static_cast<std::uint64_t>(std::min(from, to));
      const auto hi = static_cast<std::uint64_t>(std::max(from, to));
      links.push_back(lo * static_cast<std::uint64_t>(dp) + hi);
    }
  }
  m.weighted_bytes = topo.weighted(m.moved_bytes - m.inter_node_bytes, m.inter_node_bytes);
  if (peers) {
    // Each distinct pair of ranks that exchange anything is one peer of each.
    std::sort(links.begin(), links.end());
    links.erase(std::unique(links.begin(), links.end()), links.end());
    std::vector<std::int32_t> count(static_cast<std::size_t>(dp), 0);
    for (const auto link : links) {
      ++count[static_cast<std::size_t>(link / static_cast<std::uint64_t>(dp))];
      ++count[static_cast<std::size_t>(link % static_cast<std::uint64_t>(dp))];
    }
    for (const auto c : count) {
      m.max_peers = std::max(m.max_peers, c);
    }
    m.mean_peers = 2.0 * static_cast<double>(links.size()) / static_cast<double>(dp);
  }
  return m;
}

} // namespace detail

/// Movement of assignment `a`: every pack not computed on its source rank is sent once. Validates
/// its inputs.
[[nodiscard]] inline movement_metrics measure_movement(span<const pack_meta> packs,
                                                       const assignment& a, const shape& s,
                                                       const topology& topo = {}) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  topo.validate_for(s.dp);
  return detail::movement_of(packs, a, s.dp, topo, true);
}

} // namespace packswap
