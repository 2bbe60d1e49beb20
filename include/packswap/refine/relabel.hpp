#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace packswap {

namespace detail {

// The batch's byte total and the bytes that computing pack p on rank `rank_of(p)` moves, within
// and across nodes (each at most the total, so none of the sums overflows).
struct byte_totals {
  std::int64_t all = 0, intra = 0, inter = 0;
};

template <class RankOf>
byte_totals bytes_of(span<const pack_meta> packs, const topology& topo, RankOf rank_of) {
  byte_totals t;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const std::int32_t from = packs[p].source_rank;
    const std::int32_t to = rank_of(p);
    t.all += packs[p].bytes;
    if (from != to) {
      (topo.node(from) == topo.node(to) ? t.intra : t.inter) += packs[p].bytes;
    }
  }
  return t;
}

} // namespace detail

/// Renames the ranks of `a` (whole columns move together, so A and B do not change) to keep as
/// many bytes on their source rank as a greedy matching finds: column/rank pairs are taken in
/// order of the bytes they would keep, largest first (ties: lower column, then lower rank), each
/// column and rank used once. Returns `a` unchanged when the renaming would not move fewer
/// weighted bytes (under `topo`, saturated at the int64 maximum) than the names `a` already has.
/// O(N log N). Validates its inputs.
[[nodiscard]] inline assignment relabel_ranks(span<const pack_meta> packs, const shape& s,
                                              assignment a, const topology& topo = {}) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  topo.validate_for(s.dp);
  const auto dp = static_cast<std::size_t>(s.dp);
  // (column, source rank) -> bytes kept if that column becomes that rank.
  struct pair_weight {
    std::int64_t bytes;
    std::int32_t column;
    std::int32_t rank;
  };
  std::vector<pair_weight> w;
  w.reserve(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    w.push_back({packs[p].bytes, a[p].rank, packs[p].source_rank});
  }
  std::sort(w.begin(), w.end(), [](const pair_weight& x, const pair_weight& y) {
    return std::tie(x.column, x.rank) < std::tie(y.column, y.rank);
  });
  std::vector<pair_weight> merged;
  for (const auto& x : w) {
    if (!merged.empty() && merged.back().column == x.column && merged.back().rank == x.rank) {
      merged.back().bytes += x.bytes;
    } else {
      merged.push_back(x);
    }
  }
  std::sort(merged.begin(), merged.end(), [](const pair_weight& x, const pair_weight& y) {
    return std::tie(y.bytes, x.column, x.rank) < std::tie(x.bytes, y.column, y.rank);
  });
  std::vector<std::int32_t> rank_of_column(dp, -1);
  std::vector<char> rank_taken(dp, 0);
  for (const auto& x : merged) {
    auto& target = rank_of_column[static_cast<std::size_t>(x.column)];
    if (target < 0 && !rank_taken[static_cast<std::size_t>(x.rank)]) {
      target = x.rank;
      rank_taken[static_cast<std::size_t>(x.rank)] = 1;
    }
  }
  std::size_t next_free = 0;
  for (auto& target : rank_of_column) {
    if (target < 0) {
      while (rank_taken[next_free]) {
        ++next_free;
      }
      target = static_cast<std::int32_t>(next_free);
      rank_taken[next_free] = 1;
    }
  }
  const auto before = detail::bytes_of(packs, topo, [&](std::size_t p) { return a[p].rank; });
  const auto after = detail::bytes_of(packs, topo, [&](std::size_t p) {
    return rank_of_column[static_cast<std::size_t>(a[p].rank)];
  });
  if (topo.weighted(after.intra, after.inter) >= topo.weighted(before.intra, before.inter)) {
    return a;
  }
  for (auto& c : a) {
    c.rank = rank_of_column[static_cast<std::size_t>(c.rank)];
  }
  return a;
}

} // namespace packswap
