#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/select.hpp"
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
                                     ///< (saturated at the int64 maximum)
  std::int32_t max_peers =
      0; ///< most distinct peers one rank sends to or receives from (0 if not counted)
  double mean_peers = 0.0; ///< distinct peers per rank, averaged over ranks (0 if not counted)
};

namespace detail {

// movement_of's working memory, which a kept `solver` reuses from batch to batch.
struct movement_scratch {
  std::vector<std::int32_t> node;                           // node of every rank
  std::vector<std::pair<std::int32_t, std::int32_t>> links; // moved packs' (lower, higher) rank
  std::vector<std::size_t> first;                           // links by lower rank, as starts
  std::vector<std::size_t> pos;                             // where each bucket's next goes
  std::vector<std::int32_t> higher;                         // their higher ranks, so bucketed
  std::vector<std::int32_t> count;                          // distinct peers per rank
  std::vector<std::size_t> marked_for;                      // the lower rank that last marked it
};

// Movement of a valid assignment, no validation, with working memory from `ws`. O(packs), plus
// O(moved packs + dp) to count the distinct (source, destination) pairs when `peers` is set.
inline movement_metrics movement_of(span<const pack_meta> packs, const assignment& a,
                                    std::int32_t dp, const topology& topo, bool peers,
                                    movement_scratch& ws) {
  movement_metrics m;
  const auto ranks = static_cast<std::size_t>(dp);
  auto& node = ws.node;
  node.resize(ranks);
  for (std::int32_t r = 0; r < dp; ++r) {
    node[static_cast<std::size_t>(r)] = topo.node(r);
  }
  // The moved packs' rank pairs (lower rank, higher rank), and how many have each lower rank.
  auto& links = ws.links;
  links.clear();
  auto& first = ws.first;
  first.assign(peers ? ranks + 1 : 0, 0);
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
      const std::int32_t lo = std::min(from, to);
      links.emplace_back(lo, std::max(from, to));
      ++first[static_cast<std::size_t>(lo) + 1];
    }
  }
  m.weighted_bytes = topo.weighted(m.moved_bytes - m.inter_node_bytes, m.inter_node_bytes);
  if (peers) {
    // Each distinct pair of ranks that exchange anything is one peer of each: the higher ranks
    // bucketed by the lower one (counting sort), each bucket's repeats skipped by a mark.
    for (std::size_t r = 0; r < ranks; ++r) {
      first[r + 1] += first[r];
    }
    auto& higher = ws.higher;
    higher.resize(links.size());
    {
      auto& pos = ws.pos;
      pos.assign(first.begin(), first.end());
      for (const auto& [lo, hi] : links) {
        higher[pos[static_cast<std::size_t>(lo)]++] = hi;
      }
    }
    auto& count = ws.count;
    count.assign(ranks, 0);
    auto& marked_for = ws.marked_for;
    marked_for.assign(ranks, ranks);
    std::size_t distinct = 0;
    for (std::size_t lo = 0; lo < ranks; ++lo) {
      for (std::size_t i = first[lo]; i < first[lo + 1]; ++i) {
        const auto hi = static_cast<std::size_t>(higher[i]);
        if (marked_for[hi] != lo) {
          marked_for[hi] = lo;
          ++distinct;
          ++count[lo];
          ++count[hi];
        }
      }
    }
    for (const auto c : count) {
      m.max_peers = std::max(m.max_peers, c);
    }
    m.mean_peers = 2.0 * static_cast<double>(distinct) / static_cast<double>(dp);
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
  detail::movement_scratch ws;
  return detail::movement_of(packs, a, s.dp, topo, true, ws);
}

} // namespace packswap
