#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap::detail::stage2 {

/// One level of a rank's level table: the rank's cheapest and most expensive pack of `level`
/// (ties: the lower id), with their costs.
struct level_entry {
  std::size_t level, lo, hi;
  std::int64_t lo_cost, hi_cost;
};

/// The repair's level tables (stage 2, phase 4): a rank's packs by level, for every level it
/// holds, ascending. A repair step reads the table of the rank it repairs and those of its
/// roomiest partners, each partner's twice (in the single swaps and in the batch of same-level
/// swaps) with no swap between: the second read takes the table kept from the first and counts
/// the same work, so every rank's work count, and with it the plan, is the same as when it is
/// rebuilt. O(k + packs on the rank) to build a table, O(1) to read a kept one.
class level_tables {
 public:
  /// Rank r's table into `out`. Read from r's places (level, cost and pack id beside each, in
  /// sequence), not from the level lists, whose walk waits on a pack record and a link fetched at
  /// random for every pack. Counts `work_of(st, r)`. O(k + packs on r).
  void build(state& st, std::size_t r, std::vector<level_entry>& out) {
    out.resize(st.k);
    entry_of_.resize(st.k);
    std::size_t levels = 0;
    const std::int32_t* cnt = &st.cnt[r * st.k];
    for (std::size_t l = 0; l < st.k; ++l) {
      if (cnt[l] == 0) {
        continue;
      }
      // No pack yet: every pack of the level has a lower id and a cost no higher.
      entry_of_[l] = static_cast<std::int32_t>(levels);
      out[levels++] = level_entry{l, st.n, st.n, std::numeric_limits<std::int64_t>::max(), 0};
    }
    out.resize(levels);
    const state::item* items = &st.items[r * st.k];
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const state::item& it = items[i];
      level_entry& e = out[static_cast<std::size_t>(entry_of_[static_cast<std::size_t>(it.level)])];
      const auto p = static_cast<std::size_t>(it.pack);
      // Its record, which the repair's weighing reads for the candidates: fetched now, all of a
      // rank's at once, rather than one at a time there (with 1,048,576 packs, `multiples` at ga
      // 16, 0.91 times the time without, paired runs).
      prefetch(&st.pk[p]);
      // Internal ids run by cost descending, ties by input id: the lowest id is the most
      // expensive.
      if (p < e.hi) {
        e.hi = p;
        e.hi_cost = it.cost;
      }
      if (it.cost < e.lo_cost || (it.cost == e.lo_cost && p < e.lo)) {
        e.lo = p;
        e.lo_cost = it.cost;
      }
    }
    st.work += work_of(st, r);
  }

  /// The work a table of rank r counts, built or kept: its level counts and its places, read in
  /// sequence.
  static std::int64_t work_of(const state& st, std::size_t r) {
    return static_cast<std::int64_t>(st.k / 16 + st.used[r]);
  }

  /// A step begins with `partners` partners: no partner's table is kept.
  void start_step(std::size_t partners) { kept_.assign(partners, 0); }

  /// The table of partner j of the step, rank `r`: built on the first read in the step, kept
  /// for the second.
  const std::vector<level_entry>& partner(state& st, std::size_t j, std::size_t r) {
    if (tables_.size() <= j) {
      tables_.resize(j + 1);
    }
    if (kept_[j] != 0) {
      st.work += work_of(st, r);
    } else {
      build(st, r, tables_[j]);
      kept_[j] = 1;
    }
    return tables_[j];
  }

 private:
  std::vector<std::int32_t> entry_of_;           // by level: its entry's index in the table
  std::vector<std::vector<level_entry>> tables_; // the step's partners'
  std::vector<char> kept_;                       // per partner: its table is the step's
};

} // namespace packswap::detail::stage2
