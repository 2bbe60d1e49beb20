#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
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

// The greedy matching behind relabel_ranks(): every (column, source rank) pair with the bytes it
// would keep, taken by bytes descending (ties: lower column, then lower rank) while its column
// and rank are both free; columns left over get the free ranks in order.
//
// The pairs come grouped by source rank (counting sort, in one pass over the packs in their own
// order: batches list each rank's packs together, so the writes run in sequence), each rank's
// summed in place. The greedy is then a merge of the ranks' lists, each in the order (bytes
// descending, column): a heap holds each unassigned rank's next pair whose column is free.
// Columns once taken stay taken, so passing over a pair whose column is taken before the merge
// reaches it changes nothing. A rank is assigned at the first pair the heap yields whose column
// is still free; otherwise its next pair with a free column replaces it at the top.
class rank_matching {
 public:
  // Column c's new name, for c < dp: name[c]; also names() until the next run.
  const std::vector<std::int32_t>& run(span<const pack_meta> packs, const assignment& a,
                                       std::size_t dp) {
    gather(packs, a, dp);
    merge(dp);
    auto& rank_taken = rank_taken_;
    rank_taken.assign(dp, 0);
    for (const auto r : name_) {
      if (r >= 0) {
        rank_taken[static_cast<std::size_t>(r)] = 1;
      }
    }
    std::size_t next_free = 0;
    for (auto& target : name_) {
      if (target < 0) {
        while (rank_taken[next_free]) {
          ++next_free;
        }
        target = static_cast<std::int32_t>(next_free);
        rank_taken[next_free] = 1;
      }
    }
    return name_;
  }

  const std::vector<std::int32_t>& names() const { return name_; }

 private:
  struct pair_weight {
    std::int64_t bytes;
    std::int32_t column;
  };
  struct head {
    std::int64_t bytes;
    std::int32_t column;
    std::int32_t rank;
    std::size_t at; // its index in pairs_
  };

  // Rank r's pairs into pairs_[first_[r] .. end_[r]), one per column it has packs in. O(N + dp).
  void gather(span<const pack_meta> packs, const assignment& a, std::size_t dp) {
    const std::size_t n = packs.size();
    first_.assign(dp + 1, 0);
    for (std::size_t p = 0; p < n; ++p) {
      ++first_[static_cast<std::size_t>(packs[p].source_rank) + 1];
    }
    for (std::size_t r = 0; r < dp; ++r) {
      first_[r + 1] += first_[r];
    }
    pairs_.resize(n);
    {
      auto pos = first_;
      for (std::size_t p = 0; p < n; ++p) {
        pairs_[pos[static_cast<std::size_t>(packs[p].source_rank)]++] = {packs[p].bytes, a[p].rank};
      }
    }
    end_.resize(dp);
    auto& slot = slot_; // where column c's pair of the current rank is
    auto& seen = seen_; // the rank that slot[c] belongs to
    slot.assign(dp, 0);
    seen.assign(dp, dp);
    for (std::size_t r = 0; r < dp; ++r) {
      std::size_t m = first_[r]; // m <= i: the sums overwrite entries already read
      for (std::size_t i = first_[r]; i < first_[r + 1]; ++i) {
        const pair_weight e = pairs_[i];
        const auto c = static_cast<std::size_t>(e.column);
        if (seen[c] != r) {
          seen[c] = r;
          slot[c] = m;
          pairs_[m++] = {0, e.column};
        }
        pairs_[slot[c]].bytes += e.bytes;
      }
      end_[r] = m;
    }
  }

  // Whether x comes before y in a rank's list.
  struct comes_first {
    bool operator()(const pair_weight& x, const pair_weight& y) const {
      return x.bytes > y.bytes || (x.bytes == y.bytes && x.column < y.column);
    }
  };
  // Whether x comes after y in the greedy's order: the heap's top is the pair that comes first.
  struct later {
    bool operator()(const head& x, const head& y) const {
      return x.bytes < y.bytes ||
             (x.bytes == y.bytes &&
              (x.column > y.column || (x.column == y.column && x.rank > y.rank)));
    }
  };

  // Moves rank r's next pair with a free column to `at` or past it, and returns where it is
  // (end_[r] when there is none). A rank's first `selected_heads` come by selection, O(m) each
  // for its m pairs, as most ranks are assigned at their first or second; then its pairs left
  // are sorted once, O(m log m), and read in order.
  std::size_t next_head(std::size_t r, std::size_t at) {
    // Read through local pointers: the writes below could otherwise alias the vectors' own.
    pair_weight* pairs = pairs_.data();
    const std::int32_t* name = name_.data();
    const std::size_t end = end_[r];
    const auto taken = [name](const pair_weight& e) {
      return name[static_cast<std::size_t>(e.column)] >= 0;
    };
    if (heads_[r] < selected_heads) {
      ++heads_[r];
      std::size_t best = end;
      for (std::size_t i = at; i < end; ++i) {
        if (!taken(pairs[i]) && (best == end || comes_first{}(pairs[i], pairs[best]))) {
          best = i;
        }
      }
      if (best == end) {
        return best;
      }
      std::swap(pairs[at], pairs[best]);
      return at;
    }
    if (heads_[r] == selected_heads) {
      ++heads_[r];
      std::sort(pairs + at, pairs + end, comes_first{});
    }
    while (at < end && taken(pairs[at])) {
      ++at;
    }
    return at;
  }

  // The merge, into name_ (-1 for columns no pair names). O(log dp) per pair it passes over.
  void merge(std::size_t dp) {
    name_.assign(dp, -1);
    heads_.assign(dp, 0);
    heap_.clear();
    for (std::size_t r = 0; r < dp; ++r) {
      const std::size_t at = next_head(r, first_[r]);
      if (at < end_[r]) {
        heap_.push_back({pairs_[at].bytes, pairs_[at].column, static_cast<std::int32_t>(r), at});
      }
    }
    std::make_heap(heap_.begin(), heap_.end(), later{});
    while (!heap_.empty()) {
      head h = heap_.front();
      auto& name = name_[static_cast<std::size_t>(h.column)];
      if (name < 0) {
        name = h.rank;
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        heap_.pop_back();
        continue;
      }
      const auto r = static_cast<std::size_t>(h.rank);
      h.at = next_head(r, h.at + 1);
      if (h.at == end_[r]) {
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        heap_.pop_back();
        continue;
      }
      h.bytes = pairs_[h.at].bytes;
      h.column = pairs_[h.at].column;
      replace_top(h);
    }
  }

  // The heap's top replaced by `h`, sifted down: one walk instead of a pop and a push.
  void replace_top(const head& h) {
    const std::size_t size = heap_.size();
    std::size_t i = 0;
    for (std::size_t child = 1; child < size; child = 2 * i + 1) {
      if (child + 1 < size && later{}(heap_[child], heap_[child + 1])) {
        ++child;
      }
      if (!later{}(h, heap_[child])) {
        break;
      }
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = h;
  }

  static constexpr std::uint32_t selected_heads = 4;

  std::vector<std::size_t> first_, end_; // see gather()
  std::vector<std::size_t> slot_, seen_; // gather()'s working memory
  std::vector<pair_weight> pairs_;
  std::vector<std::uint32_t> heads_; // heads found per rank, see next_head()
  std::vector<head> heap_;
  std::vector<std::int32_t> name_;
  std::vector<char> rank_taken_; // run()'s working memory
};

// The bytes `a` moves with its ranks renamed by `name` (column c's new rank: name[c]).
inline byte_totals renamed_bytes(span<const pack_meta> packs, const assignment& a,
                                 const topology& topo, const std::vector<std::int32_t>& name) {
  return bytes_of(packs, topo,
                  [&](std::size_t p) { return name[static_cast<std::size_t>(a[p].rank)]; });
}

// `a` with its ranks renamed by `name` (a rank_matching's, for `a`), where that moves fewer
// weighted bytes than `a` does as it stands. O(N).
inline assignment rename_valid(span<const pack_meta> packs, assignment a, const topology& topo,
                               const std::vector<std::int32_t>& name) {
  const auto before = bytes_of(packs, topo, [&](std::size_t p) { return a[p].rank; });
  const auto after = renamed_bytes(packs, a, topo, name);
  if (topo.weighted(after.intra, after.inter) >= topo.weighted(before.intra, before.inter)) {
    return a;
  }
  for (auto& c : a) {
    c.rank = name[static_cast<std::size_t>(c.rank)];
  }
  return a;
}

// relabel_ranks() without validating its inputs, for callers whose inputs are valid already;
// `matching` is working memory (about 16 bytes per pack), which a caller that renames every step
// keeps, so that it touches no new memory once its batches stop growing.
inline assignment relabel_valid(span<const pack_meta> packs, const shape& s, assignment a,
                                const topology& topo, rank_matching& matching) {
  const auto& name = matching.run(packs, a, static_cast<std::size_t>(s.dp));
  return rename_valid(packs, std::move(a), topo, name);
}

inline assignment relabel_valid(span<const pack_meta> packs, const shape& s, assignment a,
                                const topology& topo) {
  rank_matching matching;
  return relabel_valid(packs, s, std::move(a), topo, matching);
}

} // namespace detail

/// Renames the ranks of `a` (whole columns move together, so A and B do not change) to keep as
/// many bytes on their source rank as a greedy matching finds: column/rank pairs are taken in
/// order of the bytes they would keep, largest first (ties: lower column, then lower rank), each
/// column and rank used once. Returns `a` unchanged when the renaming would not move fewer
/// weighted bytes (under `topo`, saturated at the int64 maximum) than the names `a` already has.
/// O(N) to sum each source rank's bytes by column; a rank's first four candidate columns by
/// selection over its m pairs, O(m) each, the rest after one sort, O(m log m); plus O(log dp)
/// for every pair the greedy passes over (one per rank, and one per pair whose column was taken
/// first: at most N). O(N log N) at worst.
/// Validates its inputs.
[[nodiscard]] inline assignment relabel_ranks(span<const pack_meta> packs, const shape& s,
                                              assignment a, const topology& topo = {}) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  topo.validate_for(s.dp);
  return detail::relabel_valid(packs, s, std::move(a), topo);
}

} // namespace packswap
