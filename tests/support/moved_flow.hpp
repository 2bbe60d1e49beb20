#pragma once

// The fewest bytes any assignment with A = LB_A moves (mbs = 1), at any dp, exactly: a min-cost
// flow. The limit on B is ignored, as in moved_lower_bound (moved_bound.hpp), whose two families
// of limits this solves together; read by the stress benchmark (bench/refine/stress.cpp) and
// checked against exhaustive search by tests/refine/test_moved_bound.cpp.
//
// The model (see moved_bound.hpp): a pack of level l sits in one of a rank's slots 0 .. l, every
// slot holds one pack, so each rank holds at most j + 1 packs of level <= j for every j, and
// exactly ga in all. Where slack_j = dp (j + 1) - (packs of level <= j) is 0, every rank holds
// exactly j + 1 packs of level <= j, so the levels split into blocks at those j, which no
// assignment mixes: a block of levels [a, e] gives every rank exactly e - a + 1 of its packs, at
// most j - a + 1 of levels a .. j. A block of one level (every level, where costs are distinct)
// gives each rank one of its dp packs: each home keeps its largest in bytes, and the rest move.
//
// A longer block is a flow network: each pack sends one unit either to its home rank's node of
// its level (cost 0) or to its level's pool (cost: its bytes), which feeds the same level's node
// of every rank; a rank's nodes form a chain along the block's non-empty levels, each link
// carrying at most the packs of the levels so far the rank may hold, and the last link every pack
// of the block it holds. The cheapest flow that routes every pack is the fewest bytes
// moved. The packs join one at a time, largest in bytes first, each routed along a shortest path
// of the residual network (Dijkstra on reduced costs, which the node potentials keep
// non-negative, stopped at the sink): after each, the flow is the cheapest for the packs so far.
// About one search per pack, each over the nodes nearer than the sink: the work is counted (nodes
// settled and links weighed), and past `most_work` the answer is none.

#include <packswap/batch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "moved_bound.hpp"

namespace packswap::test {

namespace flow_detail {

// A min-cost flow network whose units are routed one at a time, each from its own node to the
// sink along a shortest path. Costs are non-negative.
class unit_flow {
 public:
  static constexpr std::int64_t unreached = std::numeric_limits<std::int64_t>::max();

  explicit unit_flow(std::size_t nodes)
      : out_(nodes), potential_(nodes, 0), dist_(nodes, unreached), via_(nodes, -1) {}

  std::size_t add_node() {
    out_.emplace_back();
    potential_.push_back(0);
    dist_.push_back(unreached);
    via_.push_back(-1);
    return out_.size() - 1;
  }

  void add_link(std::size_t from, std::size_t to, std::int64_t capacity, std::int64_t cost) {
    out_[from].push_back(links_.size());
    links_.push_back({to, capacity, cost});
    out_[to].push_back(links_.size());
    links_.push_back({from, 0, -cost});
  }

  // Routes one unit from `source`, a node no unit has passed yet, to `sink`: the cost of its
  // path, or none where no path is left or the work would pass `most_work`.
  std::optional<std::int64_t> route(std::size_t source, std::size_t sink, std::int64_t& work,
                                    std::int64_t most_work) {
    // A potential that leaves the source's links non-negative in reduced cost.
    std::int64_t top = std::numeric_limits<std::int64_t>::min();
    for (const auto id : out_[source]) {
      const auto& l = links_[id];
      if (l.capacity > 0) {
        top = std::max(top, potential_[l.to] - l.cost);
      }
    }
    if (top == std::numeric_limits<std::int64_t>::min()) {
      return std::nullopt;
    }
    potential_[source] = top;
    settled_.clear();
    dist_[source] = 0;
    touched_.assign(1, source);
    heap_.clear();
    push({0, source});
    bool found = false;
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      const auto [d, u] = heap_.back();
      heap_.pop_back();
      if (d > dist_[u]) {
        continue;
      }
      settled_.push_back(u);
      if (u == sink) {
        found = true;
        break;
      }
      work += 1 + static_cast<std::int64_t>(out_[u].size());
      if (work > most_work) {
        break;
      }
      for (const auto id : out_[u]) {
        const auto& l = links_[id];
        if (l.capacity <= 0) {
          continue;
        }
        const std::int64_t nd = d + l.cost + potential_[u] - potential_[l.to];
        if (nd < dist_[l.to]) {
          if (dist_[l.to] == unreached) {
            touched_.push_back(l.to);
          }
          dist_[l.to] = nd;
          via_[l.to] = static_cast<std::int64_t>(id);
          push({nd, l.to});
        }
      }
    }
    std::optional<std::int64_t> cost;
    if (found) {
      // Settled nodes move by their distance less the sink's, the rest not at all: every
      // residual link keeps a non-negative reduced cost (the usual update, less a constant).
      const std::int64_t ds = dist_[sink];
      for (const auto v : settled_) {
        potential_[v] += dist_[v] - ds;
      }
      std::int64_t c = 0;
      for (std::size_t v = sink; v != source;) {
        const auto id = static_cast<std::size_t>(via_[v]);
        links_[id].capacity -= 1;
        links_[id ^ 1U].capacity += 1;
        c += links_[id].cost;
        v = links_[id ^ 1U].to;
      }
      cost = c;
    }
    for (const auto v : touched_) {
      dist_[v] = unreached;
    }
    return cost;
  }

 private:
  using entry = std::pair<std::int64_t, std::size_t>; // distance, node

  void push(const entry& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }

  struct link {
    std::size_t to = 0;
    std::int64_t capacity = 0;
    std::int64_t cost = 0;
  };
  std::vector<link> links_;
  std::vector<std::vector<std::size_t>> out_;
  std::vector<std::int64_t> potential_, dist_, via_;
  std::vector<std::size_t> settled_, touched_;
  std::vector<entry> heap_; // nearest first, its memory kept from one route to the next
};

// The fewest bytes the packs `block` move: their levels (`level`) run from a to e, the last
// non-empty (every rank holding e - a + 1 of them); none past `most_work`.
inline std::optional<std::int64_t> block_fewest(const std::vector<pack_meta>& packs,
                                                const std::vector<std::size_t>& level,
                                                std::vector<std::size_t> block, std::size_t dp,
                                                std::size_t a, std::int64_t& work,
                                                std::int64_t most_work) {
  // The block's non-empty levels, each with its index among them.
  std::vector<std::size_t> used;
  for (const auto p : block) {
    used.push_back(level[p]);
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  const std::size_t m = used.size();
  const auto index_of = [&](std::size_t l) {
    return static_cast<std::size_t>(std::lower_bound(used.begin(), used.end(), l) - used.begin());
  };
  // Nodes: the sink 0, rank r's node of the i-th level 1 + r m + i, the pools 1 + dp m + i, then
  // the packs.
  const std::size_t sink = 0;
  const auto node = [&](std::size_t r, std::size_t i) { return 1 + r * m + i; };
  const auto pool = [&](std::size_t i) { return 1 + dp * m + i; };
  unit_flow net(1 + dp * m + m);
  const auto size = static_cast<std::int64_t>(block.size());
  for (std::size_t r = 0; r < dp; ++r) {
    for (std::size_t i = 0; i < m; ++i) {
      // Of levels a .. used[i] (and so up to the next non-empty level) a rank holds at most
      // used[i] - a + 1; of the whole block, exactly e - a + 1 (used[m - 1] is e).
      const auto hold = static_cast<std::int64_t>(used[i] - a + 1);
      net.add_link(node(r, i), i + 1 < m ? node(r, i + 1) : sink, hold, 0);
    }
  }
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t r = 0; r < dp; ++r) {
      net.add_link(pool(i), node(r, i), size, 0);
    }
  }
  std::sort(block.begin(), block.end(), [&](std::size_t x, std::size_t y) {
    return packs[x].bytes > packs[y].bytes || (packs[x].bytes == packs[y].bytes && x < y);
  });
  std::int64_t moved = 0;
  for (const auto p : block) {
    const std::size_t i = index_of(level[p]);
    const std::size_t v = net.add_node();
    net.add_link(v, node(static_cast<std::size_t>(packs[p].source_rank), i), 1, 0);
    net.add_link(v, pool(i), 1, packs[p].bytes);
    const auto cost = net.route(v, sink, work, most_work);
    if (!cost) {
      return std::nullopt;
    }
    moved += *cost;
  }
  return moved;
}

} // namespace flow_detail

/// The fewest bytes any assignment of `packs` in shape `s` (mbs = 1) with A = LB_A moves
/// (unweighted, one node), ignoring the limit on B; none where the flow's work would pass
/// `most_work` (see the comment above).
inline std::optional<std::int64_t> moved_fewest_exact(const std::vector<pack_meta>& packs,
                                                      const shape& s, std::int64_t most_work) {
  const auto n = packs.size();
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto k = static_cast<std::size_t>(s.ga);
  const auto caps = chunk_caps(packs, s);
  const auto level = pack_levels(packs, caps);
  std::vector<std::vector<std::size_t>> on_level(k);
  for (std::size_t p = 0; p < n; ++p) {
    on_level[level[p]].push_back(p);
  }
  std::int64_t moved = 0;
  std::int64_t work = 0;
  std::vector<std::int64_t> largest(dp);
  std::vector<std::size_t> block;
  std::size_t a = 0;
  std::size_t prefix = 0;
  for (std::size_t j = 0; j < k; ++j) {
    prefix += on_level[j].size();
    if (prefix != dp * (j + 1)) {
      continue; // slack: the block goes on
    }
    if (a == j) {
      // One level, one pack per rank: each home keeps its largest.
      std::fill(largest.begin(), largest.end(), -1);
      for (const auto p : on_level[j]) {
        auto& big = largest[static_cast<std::size_t>(packs[p].source_rank)];
        if (big < 0) {
          big = packs[p].bytes;
        } else {
          moved += std::min(big, packs[p].bytes);
          big = std::max(big, packs[p].bytes);
        }
      }
      work += static_cast<std::int64_t>(dp);
    } else {
      block.clear();
      for (std::size_t l = a; l <= j; ++l) {
        block.insert(block.end(), on_level[l].begin(), on_level[l].end());
      }
      const auto part = flow_detail::block_fewest(packs, level, block, dp, a, work, most_work);
      if (!part) {
        return std::nullopt;
      }
      moved += *part;
    }
    if (work > most_work) {
      return std::nullopt;
    }
    a = j + 1;
  }
  return moved;
}

} // namespace packswap::test
