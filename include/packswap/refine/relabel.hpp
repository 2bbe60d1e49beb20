#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
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

namespace detail {

// relabel_ranks() without validating its inputs, for callers whose inputs are valid already.
inline assignment relabel_valid(span<const pack_meta> packs, const shape& s, assignment a,
                                const topology& topo) {
  const auto dp = static_cast<std::size_t>(s.dp);
  const std::size_t n = packs.size();
  // Each pack's (source rank, bytes) by column (counting sort, in one pass over the packs in
  // their own order), then each column's pairs summed in place and ordered by bytes descending,
  // ties by rank: the greedy's order within a column.
  std::vector<std::size_t> first(dp + 1, 0);
  for (std::size_t p = 0; p < n; ++p) {
    ++first[static_cast<std::size_t>(a[p].rank) + 1];
  }
  for (std::size_t c = 0; c < dp; ++c) {
    first[c + 1] += first[c];
  }
  struct pair_weight {
    std::int64_t bytes;
    std::int32_t rank;
  };
  std::vector<pair_weight> pairs(n); // column c's: pairs[first[c] .. end[c])
  {
    auto pos = first;
    for (std::size_t p = 0; p < n; ++p) {
      pairs[pos[static_cast<std::size_t>(a[p].rank)]++] = {packs[p].bytes, packs[p].source_rank};
    }
  }
  std::vector<std::size_t> end(dp);
  std::vector<std::size_t> slot(dp, 0);  // where rank r's pair of the current column is
  std::vector<std::size_t> seen(dp, dp); // the column that slot[r] belongs to
  for (std::size_t c = 0; c < dp; ++c) {
    std::size_t m = first[c]; // m <= i: the sums overwrite entries already read
    for (std::size_t i = first[c]; i < first[c + 1]; ++i) {
      const pair_weight e = pairs[i];
      const auto r = static_cast<std::size_t>(e.rank);
      if (seen[r] != c) {
        seen[r] = c;
        slot[r] = m;
        pairs[m++] = {0, e.rank};
      }
      pairs[slot[r]].bytes += e.bytes;
    }
    end[c] = m;
    std::sort(pairs.begin() + static_cast<std::ptrdiff_t>(first[c]),
              pairs.begin() + static_cast<std::ptrdiff_t>(m),
              [](const pair_weight& x, const pair_weight& y) {
                return x.bytes > y.bytes || (x.bytes == y.bytes && x.rank < y.rank);
              });
  }
  // The greedy over all pairs by (bytes descending, column, rank) is a merge of the columns'
  // ordered lists: a heap holds each unassigned column's next pair; a pair whose rank is taken
  // gives way to its column's next. A column is assigned at its first pair with a free rank.
  struct head {
    std::int64_t bytes;
    std::int32_t column;
    std::int32_t rank;
    std::size_t at; // its index in pairs
  };
  // Whether x comes after y in the greedy's order: the heap's top is the pair that comes first.
  const auto later = [](const head& x, const head& y) {
    return std::tie(x.bytes, y.column, y.rank) < std::tie(y.bytes, x.column, x.rank);
  };
  std::vector<head> heap;
  heap.reserve(dp);
  for (std::size_t c = 0; c < dp; ++c) {
    if (end[c] > first[c]) {
      const auto& e = pairs[first[c]];
      heap.push_back({e.bytes, static_cast<std::int32_t>(c), e.rank, first[c]});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);
  std::vector<std::int32_t> rank_of_column(dp, -1);
  std::vector<char> rank_taken(dp, 0);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    head h = heap.back();
    heap.pop_back();
    const auto c = static_cast<std::size_t>(h.column);
    if (!rank_taken[static_cast<std::size_t>(h.rank)]) {
      rank_of_column[c] = h.rank;
      rank_taken[static_cast<std::size_t>(h.rank)] = 1;
      continue;
    }
    if (++h.at < end[c]) {
      h.bytes = pairs[h.at].bytes;
      h.rank = pairs[h.at].rank;
      heap.push_back(h);
      std::push_heap(heap.begin(), heap.end(), later);
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

} // namespace detail

/// Renames the ranks of `a` (whole columns move together, so A and B do not change) to keep as
/// many bytes on their source rank as a greedy matching finds: column/rank pairs are taken in
/// order of the bytes they would keep, largest first (ties: lower column, then lower rank), each
/// column and rank used once. Returns `a` unchanged when the renaming would not move fewer
/// weighted bytes (under `topo`, saturated at the int64 maximum) than the names `a` already has.
/// O(N log(ga mbs)) to sum and order each column's pairs, plus O(log dp) for every pair the
/// greedy passes over (one per column, and one per pair whose rank was taken first: at most N).
/// Validates its inputs.
[[nodiscard]] inline assignment relabel_ranks(span<const pack_meta> packs, const shape& s,
                                              assignment a, const topology& topo = {}) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  topo.validate_for(s.dp);
  return detail::relabel_valid(packs, s, std::move(a), topo);
}

} // namespace packswap
