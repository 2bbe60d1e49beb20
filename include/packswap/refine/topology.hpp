#pragma once

#include "packswap/error.hpp"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace packswap {

/// Which node each rank sits on, and how much more a byte costs when it crosses nodes.
///
/// The refinement stage minimises `intra-node bytes + inter_node_weight * inter-node bytes`.
/// The default topology puts every rank on one node, so all moved bytes weigh the same.
///
/// ```
/// auto topo = packswap::topology::uniform(8, 4); // 8 GPUs per node, a crossing byte costs 4x
/// ```
class topology {
 public:
  /// Every rank on one node.
  topology() = default;

  /// Ranks `[k * ranks_per_node, (k + 1) * ranks_per_node)` form node k.
  [[nodiscard]] static topology uniform(std::int32_t ranks_per_node,
                                        std::int64_t inter_node_weight = 4) {
    PACKSWAP_EXPECTS(ranks_per_node >= 1, errc::invalid_argument,
                     "ranks per node is " << ranks_per_node << ", must be at least 1");
    check_weight(inter_node_weight);
    topology t;
    t.ranks_per_node_ = ranks_per_node;
    t.weight_ = inter_node_weight;
    return t;
  }

  /// Rank r sits on node `node_of_rank[r]`; ranks beyond the map are an error when queried.
  [[nodiscard]] static topology from_map(std::vector<std::int32_t> node_of_rank,
                                         std::int64_t inter_node_weight = 4) {
    for (std::size_t r = 0; r < node_of_rank.size(); ++r) {
      PACKSWAP_EXPECTS(node_of_rank[r] >= 0, errc::invalid_argument,
                       "rank " << r << " is mapped to node " << node_of_rank[r]
                               << ", must be >= 0");
    }
    check_weight(inter_node_weight);
    topology t;
    t.map_ = std::move(node_of_rank);
    t.weight_ = inter_node_weight;
    return t;
  }

  /// The node of `rank`.
  [[nodiscard]] std::int32_t node(std::int32_t rank) const {
    if (!map_.empty()) {
      if (rank < 0 || static_cast<std::size_t>(rank) >= map_.size()) {
        unmapped(rank); // out of line: this runs for every moved pack
      }
      return map_[static_cast<std::size_t>(rank)];
    }
    return ranks_per_node_ == 0 ? 0 : rank / ranks_per_node_;
  }

  /// Cost of one byte from `from` to `to`: 0 on the same rank, 1 within a node, the inter-node
  /// weight across nodes.
  [[nodiscard]] std::int64_t weight(std::int32_t from, std::int32_t to) const {
    if (from == to) {
      return 0;
    }
    return node(from) == node(to) ? 1 : weight_;
  }

  /// The weight of a byte that crosses nodes.
  [[nodiscard]] std::int64_t inter_node_weight() const noexcept { return weight_; }

  /// `intra_node_bytes + inter_node_weight() * inter_node_bytes` (both >= 0), saturated at the
  /// int64 maximum, which byte totals near it would exceed.
  [[nodiscard]] std::int64_t weighted(std::int64_t intra_node_bytes,
                                      std::int64_t inter_node_bytes) const noexcept {
    constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
    if (inter_node_bytes > (most - intra_node_bytes) / weight_) {
      return most;
    }
    return intra_node_bytes + weight_ * inter_node_bytes;
  }

  /// Checks that every rank below `dp` has a node; throws `errc::invalid_argument` if not.
  void validate_for(std::int32_t dp) const {
    PACKSWAP_EXPECTS(map_.empty() || map_.size() >= static_cast<std::size_t>(dp),
                     errc::invalid_argument,
                     "the topology maps " << map_.size() << " ranks, dp is " << dp);
  }

 private:
  [[noreturn]] void unmapped(std::int32_t rank) const {
    PACKSWAP_FAIL(errc::invalid_argument, "rank " << rank << " is not in the topology's map of "
                                                  << map_.size() << " ranks");
  }
  static void check_weight(std::int64_t w) {
    PACKSWAP_EXPECTS(w >= 1 && w <= (std::int64_t{1} << 20), errc::invalid_argument,
                     "inter-node weight is " << w << ", must be in [1, 2^20]");
  }

  std::vector<std::int32_t> map_;
  std::int32_t ranks_per_node_ = 0;
  std::int64_t weight_ = 1;
};

} // namespace packswap
