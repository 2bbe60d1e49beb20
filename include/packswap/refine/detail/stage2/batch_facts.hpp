#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/rank_weights.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2's view of the batch, fixed by `read_batch` and read by every phase: the packs'
/// records, their levels, the cost index, the levels' spreads, each rank's own packs by bytes.
/// The first layer of the shared state (state.hpp); only the records' rank and slot change after
/// read_batch (the placement's, placement.hpp).
///
/// Packs are numbered by cost descending (internal id i is `order[i]`), so the passes that walk
/// the packs of a level, or all packs by cost, read their per-pack arrays in sequence; the cost
/// index (ascending cost) is the internal ids backwards.
///
/// Levels: with the caps `caps[j]` non-increasing, level(p) is the last j with caps[j] >=
/// cost(p). A rank may hold at most j + 1 packs of level <= j, for every j: then its packs sorted
/// by cost descending sit at or below the caps, and dealing them to micro-steps in that order
/// keeps every micro-step's maximum within its cap (A <= sum(caps)). Every phase keeps this
/// for every rank, except where the repair's comment says otherwise.
///
/// Costs: read_batch() O(n log k) (each rank's own packs sorted by bytes); the rest O(1), but
/// level_quantile() O(k).
struct batch_facts {
  // How far ahead the passes over packs in input order fetch pack records.
  static constexpr std::size_t prefetch_distance = 8;

  // Takes a new batch, reusing the memory of earlier ones: `order` lists pack ids by cost
  // descending (ties by id), `caps` the micro-step caps (non-increasing), `b_limit` the limit on
  // every rank's load.
  void read_batch(span<const pack_meta> packs, const shape& s, const topology& topo,
                  span<const std::int64_t> caps, std::int64_t b_limit,
                  span<const std::int32_t> order) {
    dp = static_cast<std::size_t>(s.dp);
    k = static_cast<std::size_t>(s.ga);
    n = packs.size();
    limit = b_limit;
    ranks.assign(topo, dp);
    // Ranks grouped by node (counting sort), for the bring-home step.
    node_start.assign(static_cast<std::size_t>(ranks.nodes) + 1, 0);
    for (const auto nd : ranks.node) {
      ++node_start[static_cast<std::size_t>(nd) + 1];
    }
    for (std::size_t i = 0; i + 1 < node_start.size(); ++i) {
      node_start[i + 1] += node_start[i];
    }
    node_ranks.resize(dp);
    {
      auto pos = node_start;
      for (std::size_t r = 0; r < dp; ++r) {
        node_ranks[pos[static_cast<std::size_t>(ranks.node[r])]++] = r;
      }
    }
    input_id.assign(order.begin(), order.end());
    internal_id.resize(n);
    for (std::size_t p = 0; p < n; ++p) {
      if (p + prefetch_distance < n) {
        prefetch(&internal_id[static_cast<std::size_t>(input_id[p + prefetch_distance])]);
      }
      internal_id[static_cast<std::size_t>(input_id[p])] = static_cast<std::int32_t>(p);
    }
    // One pass in cost order: records, level counts, own-pack counts, the cost index. Costs fall
    // as ids rise, so levels only rise: one walk down the caps.
    pk.resize(n);
    sorted_cost.resize(n);
    auto& per_level = level_count;
    per_level.assign(k, 0);
    own_first.assign(dp + 1, 0);
    std::size_t level = 0;
    total_cost = 0;
    for (std::size_t p = 0; p < n; ++p) {
      if (p + prefetch_distance < n) {
        prefetch(&packs[static_cast<std::size_t>(input_id[p + prefetch_distance])]);
      }
      const auto& m = packs[static_cast<std::size_t>(input_id[p])];
      // The last j with caps[j] >= cost; caps[0] bounds every cost by construction.
      while (level + 1 < k && caps[level + 1] >= m.cost) {
        ++level;
      }
      pk[p] = {m.cost, m.bytes, m.source_rank, static_cast<std::int32_t>(level), -1, -1};
      sorted_cost[n - 1 - p] = m.cost;
      total_cost += m.cost;
      ++per_level[level];
      ++own_first[static_cast<std::size_t>(m.source_rank) + 1];
    }
    // Slack of level j: how many ranks may end with fewer than j + 1 packs of level <= j. Zero
    // where no costs tie across a chunk boundary, which forces one pack per chunk on every rank.
    // Levels rise with ids, so level j is ids [prefix before j, prefix after j): one stretch of
    // the cost index, read backwards.
    slack.assign(k, 0);
    level_begin.assign(k, 0);
    level_end.assign(k, 0);
    {
      std::int64_t prefix = 0;
      for (std::size_t j = 0; j < k; ++j) {
        const auto first_id = static_cast<std::size_t>(prefix);
        prefix += per_level[j];
        slack[j] = static_cast<std::int64_t>(dp) * static_cast<std::int64_t>(j + 1) - prefix;
        if (per_level[j] > 0) {
          level_begin[j] = n - static_cast<std::size_t>(prefix);
          level_end[j] = n - first_id;
        }
      }
    }
    // Each level's spread (its largest cost less its smallest), and the levels by it, widest
    // first (ties by level); the first spread_levels of them have a spread above 0.
    level_spread = level_quantile(1000);
    const auto cheapest = level_quantile(0);
    for (std::size_t j = 0; j < k; ++j) {
      level_spread[j] -= cheapest[j];
    }
    spread_order.resize(k);
    for (std::size_t j = 0; j < k; ++j) {
      spread_order[j] = j;
    }
    std::sort(spread_order.begin(), spread_order.end(), [&](std::size_t a, std::size_t b) {
      return level_spread[a] > level_spread[b] || (level_spread[a] == level_spread[b] && a < b);
    });
    spread_pos.resize(k);
    widest_spread.resize(k);
    spread_floor.resize(k);
    spread_levels = 0;
    for (std::size_t i = 0; i < k; ++i) {
      spread_pos[spread_order[i]] = i;
      widest_spread[i] = level_spread[spread_order[i]];
      spread_floor[i] = cheapest[spread_order[i]];
      spread_levels += widest_spread[i] > 0 ? 1 : 0;
    }
    // Each rank's own packs by bytes descending, ties by id: bucketed by home rank in id order,
    // then each bucket (ga * mbs packs) sorted on its own.
    for (std::size_t r = 0; r < dp; ++r) {
      own_first[r + 1] += own_first[r];
    }
    {
      // (bytes, id) pairs, so the sorts read no pack records.
      auto& bucket = own_bytes;
      bucket.resize(n);
      auto& pos = rank_pos;
      pos.assign(own_first.begin(), own_first.end() - 1);
      for (std::size_t p = 0; p < n; ++p) {
        if (p + prefetch_distance < n) {
          // Where that pack's entry will go, give or take the entries of its rank before it.
          prefetch(&bucket[pos[src(p + prefetch_distance)]]);
        }
        bucket[pos[src(p)]++] = {pk[p].bytes, static_cast<std::int32_t>(p)};
      }
      for (std::size_t r = 0; r < dp; ++r) {
        const std::size_t size = own_first[r + 1] - own_first[r];
        stable_sort_desc(bucket.data() + own_first[r], size, own_sort,
                         [](const std::pair<std::int64_t, std::int32_t>& e) { return e.first; });
      }
      own.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        own[i] = bucket[i].second;
      }
    }
  }

  // Weight of one byte computed on rank r that comes from rank h.
  std::int64_t weight(std::size_t h, std::size_t r) const { return ranks.weight(h, r); }

  // Weighted bytes of pack p when it is computed on rank r.
  std::int64_t away(std::size_t p, std::size_t r) const { return weight(src(p), r) * pk[p].bytes; }

  std::size_t src(std::size_t p) const { return static_cast<std::size_t>(pk[p].home); }

  // The pack at position i of the cost index (ascending cost): internal ids run by cost
  // descending, so the index is the ids backwards.
  std::int32_t by_cost(std::size_t i) const { return static_cast<std::int32_t>(n - 1 - i); }

  // Per-level quantile of costs (per mille), from the cost index where each level is contiguous.
  std::vector<std::int64_t> level_quantile(std::int32_t permille) const {
    std::vector<std::int64_t> q(k, 0);
    for (std::size_t l = 0; l < k; ++l) {
      if (level_end[l] > level_begin[l]) {
        q[l] = sorted_cost[level_begin[l] + (level_end[l] - level_begin[l] - 1) *
                                                static_cast<std::size_t>(permille) / 1000];
      }
    }
    return q;
  }

  // The batch.
  std::size_t dp = 0, k = 0, n = 0; // ranks, micro-steps (= levels), packs
  std::int64_t limit = 0;           // on every rank's load (B)
  std::int64_t total_cost = 0;
  rank_weights ranks;                  // every rank's node, the weight of a byte
  std::vector<std::size_t> node_start; // ranks of node i: node_ranks[node_start[i] ..]
  std::vector<std::size_t> node_ranks;
  std::vector<std::int32_t> input_id;    // input id of every pack; internal ids follow `order`
  std::vector<std::int32_t> internal_id; // the inverse
  // What every pass reads of a pack, in one 32-byte record instead of six arrays: one cache
  // line read per pack, not six.
  struct pack_state {
    std::int64_t cost = 0;
    std::int64_t bytes = 0;
    std::int32_t home = 0;  // source rank
    std::int32_t level = 0; // see the struct comment
    std::int32_t rank = -1; // where it is now (-1: unplaced)
    std::int32_t slot = -1; // its item index there
  };
  std::vector<pack_state> pk;            // by internal id
  std::vector<std::int32_t> own;         // rank r's own packs by bytes descending, ties by id:
  std::vector<std::size_t> own_first;    // own[own_first[r] .. own_first[r + 1] - 1]
  std::vector<std::int64_t> sorted_cost; // cost of by_cost(i)
  std::vector<std::int64_t> slack;       // per level, see read_batch()
  std::vector<std::size_t> level_begin, level_end; // level l: by_cost(begin .. end - 1)
  std::vector<std::int64_t> level_spread;          // per level, see read_batch()
  std::vector<std::size_t> spread_order;           // the levels by spread, widest first
  std::vector<std::size_t> spread_pos;             // the inverse
  std::vector<std::int64_t> widest_spread;         // level_spread in spread order
  std::vector<std::int64_t> spread_floor;          // each level's cheapest cost, in spread order
  std::size_t spread_levels = 0;                   // levels whose spread is above 0

  // Working memory of read_batch(), kept between batches.
  std::vector<std::int64_t> level_count;
  std::vector<std::pair<std::int64_t, std::int32_t>> own_bytes, own_sort;
  std::vector<std::size_t> rank_pos;
};

} // namespace packswap::detail::stage2
