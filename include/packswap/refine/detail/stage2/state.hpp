#pragma once

#include "packswap/refine/detail/stage2/level_lists.hpp"
#include "packswap/refine/detail/stage2/tuning.hpp"

#include <cstdint>
#include <limits>
#include <utility>

namespace packswap::detail::stage2 {

/// What every phase of stage 2 reads and changes, in layers: the batch (batch_facts.hpp, fixed by
/// `prepare`), the current placement of its packs (placement.hpp, emptied by every attempt), and
/// the level lists and away rows that index it (level_lists.hpp). This last layer swaps packs,
/// keeping all three up to date, and counts the work against the bound.
///
/// Costs: prepare() O(n log k); swap_packs O(1) for packs of one level, else O(|a - b| + w) on
/// each of the two ranks for packs of levels a and b, w the levels below min(a, b) down to the
/// rank's previous full level (placement::relevel), plus O(1) for the level lists where they live
/// (placement.hpp and level_lists.hpp for the rest); ensure_levels() and ensure_away_rows() O(n +
/// dp k) where they build, else O(1).
struct state : level_lists {
  // Takes a new batch, reusing the memory of earlier ones: `order` lists pack ids by cost
  // descending (ties by id), `caps` the micro-step caps (non-increasing), `b_limit` the limit on
  // every rank's load. The work count starts again from 0, with no bound and no review.
  void prepare(span<const pack_meta> packs, const shape& s, const topology& topo,
               span<const std::int64_t> caps, std::int64_t b_limit,
               span<const std::int32_t> order) {
    read_batch(packs, s, topo, caps, b_limit, order);
    rows_live = false;
    work = 0;
    work_limit = std::numeric_limits<std::int64_t>::max();
    gave_up = false;
    review_at = std::numeric_limits<std::int64_t>::max();
    review = review_hook{};
    abandoned = false;
  }

  // Empties every rank (see placement::empty_ranks); the level lists are stale until built again.
  void reset() {
    empty_ranks();
    levels_live = false;
  }

  // Exchanges pack x (on rank a) with pack y (on rank b).
  void swap_packs(std::size_t x, std::size_t y) {
    const auto a = static_cast<std::size_t>(pk[x].rank);
    const auto b = static_cast<std::size_t>(pk[y].rank);
    if (places_live) {
      std::swap(items[a * k + static_cast<std::size_t>(pk[x].slot)],
                items[b * k + static_cast<std::size_t>(pk[y].slot)]);
      std::swap(pk[x].slot, pk[y].slot);
    }
    pk[x].rank = static_cast<std::int32_t>(b);
    pk[y].rank = static_cast<std::int32_t>(a);
    const std::int64_t d = pk[x].cost - pk[y].cost;
    const std::int64_t before = excess(a) + excess(b);
    load[a] -= d;
    load[b] += d;
    total_excess += excess(a) + excess(b) - before;
    if (pk[x].level != pk[y].level) { // a same-level swap changes no level count
      relevel(a, pk[x].level, pk[y].level);
      relevel(b, pk[y].level, pk[x].level);
    }
    if (levels_live) {
      unlink(x, a);
      unlink(y, b);
      link(x, b);
      link(y, a);
    }
  }

  // The level lists, built now unless swap_packs() has kept them since they were.
  void ensure_levels() {
    if (!levels_live) {
      index_levels();
      work += static_cast<std::int64_t>(n + dp);
    }
  }

  // The away rows (see level_lists::build_away_rows), built now with the level lists they come
  // from, unless swaps have kept them since they were.
  void ensure_away_rows() {
    ensure_levels();
    if (rows_live) {
      return;
    }
    build_away_rows();
    work += static_cast<std::int64_t>(dp * k / 16 + dp);
  }

  // Work: the candidates and items the searches read, counted so that a solve can stop at a
  // bound every rank reaches at the same point (never a clock). out_of_work() once past it.
  std::int64_t work = 0;
  std::int64_t work_limit = std::numeric_limits<std::int64_t>::max();
  // Work kept back from the search for its caller's fallback, past work_limit: the repair's pace
  // is judged as if the search could spend it too (see repair_pace, refine_sorted).
  std::int64_t work_reserved = 0;
  // Set when a search gives up the rest of its allowance (see repair_phase): out of work too.
  bool gave_up = false;
  bool out_of_work() const { return gave_up || work > work_limit; }
  // The search's review: once its work reaches review_at, `review` is called (once); where it
  // abandons the search, the search gives up the rest of its work (see home_first::review_at).
  std::int64_t review_at = std::numeric_limits<std::int64_t>::max();
  review_hook review;
  bool abandoned = false;
  void review_if_due() {
    if (work < review_at) {
      return;
    }
    review_at = std::numeric_limits<std::int64_t>::max();
    if (review && review()) {
      abandoned = true;
      gave_up = true;
    }
  }
  // The excess (load above the limit) summed over ranks: exact from the repair's start, which
  // counts it, as swap_packs() keeps it (place, unplace and the re-deal do not).
  std::int64_t total_excess = 0;
};

} // namespace packswap::detail::stage2
