#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/bring_home.hpp"
#include "packswap/refine/detail/stage2/fill.hpp"
#include "packswap/refine/detail/stage2/floor.hpp"
#include "packswap/refine/detail/stage2/pin.hpp"
#include "packswap/refine/detail/stage2/redeal.hpp"
#include "packswap/refine/detail/stage2/repair.hpp"
#include "packswap/refine/detail/stage2/snapshot.hpp"
#include "packswap/refine/detail/stage2/state.hpp"
#include "packswap/refine/detail/stage2/trim.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap::detail {

/// Stage 2 for mbs = 1: builds an assignment around the packs that stay home.
///
/// Constraints (integers only, so every rank derives the same answer):
/// - caps: `caps[j]`, non-increasing, bound micro-step j. With level(p) = the last j such that
///   caps[j] >= cost(p), a rank may hold at most j + 1 packs of level <= j, for every j. Then its
///   packs sorted by cost descending sit at or below the caps, dealing them to micro-steps in that
///   order keeps every micro-step's maximum within its cap, and A <= sum(caps).
/// - limit: every rank's total load <= `limit` (B).
///
/// Phases, one header each under `stage2/`, around the shared `stage2::state`: (1) pin each
/// rank's own packs, largest weighted bytes first, while the capacity left for its free slots
/// stays inside a band of typical pack costs; (2) fill: deal the rest, most constrained and
/// heaviest first, to the rank with the most capacity per free slot; (3) re-deal the unlocked
/// packs of each level to balance the loads; (4) repair loads above the limit with swaps found
/// through a cost-sorted index, each lowering the total excess, cheapest in moved bytes first (in
/// the attempts made after the others failed, where no single swap helps a rank, two swaps in a
/// chain), and where it fails with a few ranks just above the limit, (4b) trim them with one or
/// two same-level swaps with one partner each; (5) bring packs home by swapping them with packs
/// their home rank holds for others.
/// The searches (4, 4b, 5) count their work; past `limit_work` a run fails, and the caller may
/// `settle` from stage 1 instead: bring-home alone, from an assignment that already meets the
/// limits.
class home_first {
 public:
  using tuning = stage2::tuning;

  /// `order` lists pack ids by cost descending (ties by id).
  home_first(span<const pack_meta> packs, const shape& s, const topology& topo,
             span<const std::int64_t> caps, std::int64_t limit, span<const std::int32_t> order) {
    prepare(packs, s, topo, caps, limit, order);
  }

  /// An engine with no batch, for `prepare()`.
  home_first() = default;

  /// Takes a new batch (same arguments as the constructor), reusing the memory of earlier ones:
  /// a trainer that solves every step allocates nothing once its batches stop growing.
  void prepare(span<const pack_meta> packs, const shape& s, const topology& topo,
               span<const std::int64_t> caps, std::int64_t limit, span<const std::int32_t> order) {
    st_.prepare(packs, s, topo, caps, limit, order);
    start_.clear();
  }

  /// Bounds the work of the searches (repair and bring-home) in every later run() and settle()
  /// (see `stage2::state::work`): past it, a run fails and bring-home stops early. `reserved`:
  /// work kept back for the caller's fallback beyond the limit, which the repair's pace is
  /// judged against as if the search could spend it (see stage2::repair_pace).
  void limit_work(std::int64_t limit, std::int64_t reserved = 0) {
    st_.work_limit = limit;
    st_.work_reserved = reserved;
    st_.gave_up = false;
  }
  /// Reviews the searches of later runs once their work (counted since prepare()) reaches `at`:
  /// `hook` is called once, between two repair steps or two bring-home visits, and where it
  /// returns true the search is abandoned (the run fails, out of work, and `abandoned()` tells
  /// so) for the caller's own answer. The hook must outlive those runs; end_review() and
  /// prepare() drop it.
  void review_at(std::int64_t at, stage2::review_hook hook) {
    st_.review_at = at;
    st_.review = hook;
  }
  void end_review() { review_at(std::numeric_limits<std::int64_t>::max(), stage2::review_hook{}); }
  /// Whether the review abandoned the search.
  bool abandoned() const { return st_.abandoned; }
  /// A lower bound on the bytes any answer moves (stage2::moved_floor), for the review. O(n + dp).
  std::int64_t moved_floor() { return floor_.run(st_); }

  /// Work done since prepare().
  std::int64_t work() const { return st_.work; }
  /// Whether the searches stopped at the work limit.
  bool out_of_work() const { return st_.out_of_work(); }

  /// One attempt; false when some rank stays above the limit.
  bool run(const tuning& t) {
    if (st_.out_of_work()) {
      return false;
    }
    st_.reset();
    // An attempt whose pin, fill and first re-deal an earlier one ran with the same knobs (the
    // chained repair after the wide band) starts where that one's first repair began.
    const bool restored = start_.holds(t);
    if (restored) {
      start_.restore(st_);
    } else {
      pin_.run(st_, t); // also clears every pack's place and locks the pins
      fill_.run(st_);
    }
    repair_.start_attempt();
    // When the repair gets stuck on ranks (typically one holding a giant pack, which needs the
    // lightest pack of every level), their pins go and the pool is balanced again: the re-deal
    // hands the heaviest rank the lightest packs. A round that ends stuck no nearer than
    // the round before it (`shortfall`: no less load excess and no fewer crowded levels) ends
    // the attempt: releasing pins again has not helped, and the rounds left would repeat the
    // same work (on the stress set they end at the same excess, often on the same rank).
    bool repaired = false;
    shortfall before; // at the end of the previous round
    for (std::int32_t round = 0; round <= t.stuck_rounds && !repaired; ++round) {
      if (round > 0 || !restored) {
        redeal_.run(st_, t);
      }
      if (round == 0 && !restored && over_limit()) {
        start_.save(st_, t);
      }
      repaired = repair_and_trim(t);
      if (!repaired) {
        if (repair_.stuck_ranks().empty()) {
          return false; // out of swaps or work, or hopeless: give up
        }
        const shortfall now = shortfall_now();
        if (round > 0 && now.excess >= before.excess && now.crowded >= before.crowded) {
          return false; // no progress: give up
        }
        before = now;
        for (const std::size_t r : repair_.stuck_ranks()) {
          for (std::size_t i = 0; i < st_.used[r]; ++i) {
            st_.locked[static_cast<std::size_t>(st_.items[r * st_.k + i].pack)] = 0;
          }
        }
      }
    }
    if (!repaired) {
      return false;
    }
    home_.run(st_, t);
    return !st_.abandoned; // a review in the bring-home may abandon the search
  }

  /// From a successful run's answer, one round of a search beyond its local optimum: packs
  /// brought home with every rank's load allowed up to `looser` (above the limit), then the
  /// limit restored, the ranks above it repaired (and trimmed), and packs brought home again.
  /// Where the limit leaves the loads almost no room (eps = 0), the bring-home under the
  /// looser limit takes trades that no trade within the limit can, and the repair's swaps,
  /// cheapest in moved bytes first, give back fewer bytes than they took: see `refine_sorted`.
  /// False where the repair fails (the placement then breaks the limit: the caller keeps the
  /// answer it had). The limit is the batch's again on return. O(n) plus the searches' work.
  bool loosen_and_repair(const tuning& t, std::int64_t looser) {
    const std::int64_t limit = st_.limit;
    st_.limit = looser;
    home_.run(st_, t);
    st_.limit = limit;
    st_.rebuild_places(); // the bring-home with many levels leaves them behind
    repair_.start_attempt();
    if (!repair_and_trim(t)) {
      return false;
    }
    home_.run(st_, t);
    return true;
  }

  /// Starts from `a`, which must keep every rank within the limit and its level constraints
  /// (stage 1 does, whatever its rank labels), and brings packs home: `passes` passes of the
  /// bring-home phase, within the work limit (with few levels, visiting the heaviest packs first
  /// and ending each pass where it stops paying). O(n) plus the passes.
  void settle(const assignment& a, std::int32_t passes) {
    st_.reset();
    // Each pack's cell, and its rank's state, lie at random places: fetched a few packs ahead,
    // the cell first, the rank's lines once the cell is in.
    constexpr std::size_t ahead = 2 * stage2::state::prefetch_distance;
    const auto rank_of = [&](std::size_t p) {
      return static_cast<std::size_t>(a[static_cast<std::size_t>(st_.input_id[p])].rank);
    };
    for (std::size_t p = 0; p < st_.n; ++p) {
      if (p + ahead < st_.n) {
        prefetch(&a[static_cast<std::size_t>(st_.input_id[p + ahead])]);
      }
      if (p + ahead / 2 < st_.n) {
        const std::size_t q = p + ahead / 2;
        const std::size_t r = rank_of(q);
        prefetch(&st_.used[r]);
        prefetch(&st_.load[r]);
        prefetch(&st_.cnt[r * st_.k + static_cast<std::size_t>(st_.pk[q].level)]);
      }
      if (p + ahead / 4 < st_.n) {
        const std::size_t r = rank_of(p + ahead / 4);
        const std::size_t at = r * st_.k + st_.used[r];
        prefetch(&st_.items[at]);
      }
      st_.place(p, rank_of(p));
    }
    tuning t;
    t.home_passes = passes;
    home_.run(st_, t, true);
  }

  /// Writes every pack's cell (indexed by input id) after a successful `run` into `out`: its
  /// rank, and as micro-step its place among the rank's packs by cost descending (ties by id),
  /// which keeps every micro-step within its cap. `used` is working memory.
  void cells(assignment& out, std::vector<std::size_t>& used) const {
    used.assign(st_.dp, 0);
    out.resize(st_.n);
    // Internal ids run by cost descending, ties by input id: one pass deals each rank's packs
    // in that order.
    for (std::size_t p = 0; p < st_.n; ++p) {
      if (p + stage2::state::prefetch_distance < st_.n) {
        prefetch(
            &out[static_cast<std::size_t>(st_.input_id[p + stage2::state::prefetch_distance])]);
      }
      const std::int32_t r = st_.pk[p].rank;
      out[static_cast<std::size_t>(st_.input_id[p])] =
          cell{r, static_cast<std::int32_t>(used[static_cast<std::size_t>(r)]++)};
    }
  }

  /// Weighted bytes the current state moves.
  std::int64_t weighted_moved() const { return movement().weighted; }

  /// What the current state moves: the weighted bytes, and the largest pack (in bytes) away from
  /// its home rank. One pass over the packs.
  struct moved_summary {
    std::int64_t weighted = 0;
    std::int64_t largest_away = 0;
  };
  moved_summary movement() const {
    moved_summary m;
    for (std::size_t p = 0; p < st_.n; ++p) {
      const auto& k = st_.pk[p];
      m.weighted += st_.away(p, static_cast<std::size_t>(k.rank));
      m.largest_away = std::max(m.largest_away, k.rank != k.home ? k.bytes : 0);
    }
    return m;
  }

 private:
  // How far the placement is from a repaired one: the load excess summed over ranks, and the
  // crowded levels summed over ranks. O(dp) plus the level rows to bring up to date, O(n) at
  // most.
  struct shortfall {
    std::int64_t excess = 0;
    std::int64_t crowded = 0;
  };
  shortfall shortfall_now() {
    shortfall s;
    s.excess = st_.total_excess;
    for (std::size_t r = 0; r < st_.dp; ++r) {
      st_.full_from(r);
      s.crowded += st_.crowded_levels[r];
    }
    return s;
  }

  // The repair; where it fails with a few ranks just above the limit (costs with no common step,
  // at eps = 0), they are trimmed where one or two swaps with one partner clear each, and the
  // search goes on to bring packs home, even after a repair that judged its pace hopeless.
  bool repair_and_trim(const tuning& t) {
    if (repair_.run(st_, t)) {
      return true;
    }
    if (trim_.run(st_)) {
      st_.gave_up = false; // the search ends here, within its allowance
      return true;
    }
    return false;
  }

  // Whether some rank's load is above the limit. O(dp).
  bool over_limit() const {
    for (std::size_t r = 0; r < st_.dp; ++r) {
      if (st_.load[r] > st_.limit) {
        return true;
      }
    }
    return false;
  }

  stage2::state st_;
  stage2::pin_phase pin_;
  stage2::start_snapshot start_; // where the last attempt's first repair began
  stage2::fill_phase fill_;
  stage2::redeal_phase redeal_;
  stage2::repair_phase repair_;
  stage2::trim_phase trim_;
  stage2::bring_home_phase home_;
  stage2::moved_floor floor_;
};

} // namespace packswap::detail
