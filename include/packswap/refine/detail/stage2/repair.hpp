#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/batch_swaps.hpp"
#include "packswap/refine/detail/stage2/chain.hpp"
#include "packswap/refine/detail/stage2/cost_index.hpp"
#include "packswap/refine/detail/stage2/level_tables.hpp"
#include "packswap/refine/detail/stage2/pace.hpp"
#include "packswap/refine/detail/stage2/pick.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 4: repair. Swaps packs until no rank is above the limit or crowds a level.
///
/// Every step lowers the total excess (load above the limit, summed over ranks) or, on a rank that
/// crowds a level, moves a pack at or below its lowest crowded level out for one above it; swaps
/// keep every other rank's level constraints. A step on rank r tries, in order: (1) single swaps of
/// r's picked packs (`pack_picker`: those that can shed its excess, fewest bytes first, and those
/// that can shed the most) with packs of the roomiest ranks (by level, `level_tables`) and of the
/// cost index, where a full fix (r and its partner within the limit) moving the fewest bytes wins
/// (with 64 levels or more, or once the attempt runs short of work, no partner is read after one
/// that gave a full fix; once it runs short of work, nor the cost index); (2) with 64 levels or
/// more, or on a rank past its first eight steps, several same-level swaps at once with the
/// roomiest ranks (`batch_swaps`, batch_swaps.hpp); (3) the best single partial fix, among four
/// times as many picks (by gain with 64 levels or more, else by bytes); (4) in the chained
/// attempts, two swaps in a chain (`chain_search`). A rank no swap helps is passed over while the
/// attempt is not short of work (`repair_pace::hurried`), and the others repaired; the run then
/// returns false, naming the ranks passed over (`stuck_ranks`), for the caller to free their pins.
/// It also returns false when out of swaps or out of work (`state::out_of_work`), or when the
/// attempt's repairs, at the pace they go, cannot end it within the work left
/// (`repair_pace::hopeless`: then the search gives up the rest of its work and no later attempt
/// runs, as the answer at the bound would be the fallback's anyway).
///
/// Complexity: per step, for p picks (repair_picks of each kind, four times as many for a partial
/// fix) and the m roomiest ranks: O(k) to read the rank and pick, O(m (k / 16 + k)) for the level
/// tables (from the places) with at most scan_limit levels of r per level of a partner, O(p (log n
/// + scan_limit)) through the cost index, O(m k + t log(m k)) for a batch taking t swaps; a chain
/// step O(c w (k + c w)) for c chain_picks and w chain_width; O(dp) at the start of each run to
/// count the excess (and n + dp units of work charged at its first step, see repair_step()), O(1)
/// per step to judge the pace. Up to 2n + 16 steps, and at most the work bound: the work counted
/// (candidates weighed, packs read) stops the phase at the first step past it.
class repair_phase {
 public:
  // Lowers every rank to the limit and fixes crowded levels, the worst rank first. Returns false
  // when out of swaps or work (`stuck_ranks()` then empty: the attempt gives up) or when no swap
  // helps some rank (`stuck_ranks()` lists every such rank). A rank no swap helps is passed over
  // while the attempt is not hurried (see repair_pace::hurried): the ranks after it are repaired in
  // the same run, and the caller frees the pins of all those passed over at once, before its next
  // re-deal. (`high-res` at dp 4,096 x ga 4, four packs a rank, meets such a rank after a few
  // hundred steps: ending the run there, one rank unlocking a round for up to five rounds, its six
  // batches at eps 0 and 0.001 take 0.37-0.90 million units of work; passing over, 0.09-0.28
  // million, moving within 0.008 of Karmarkar-Karp's bytes of that.) Once hurried, the run ends at
  // the next rank no swap helps: a repair that slow mostly sheds little per step, and going on
  // spends the work the re-deal after an unlock would use better (`bimodal` at dp 1,024 x ga 16,
  // eps 0.001, seed 2: passing over ran out of work where ending the run succeeds). With
  // `tuning::chains`, a rank no single swap helps tries two swaps in a chain (`chain_search`)
  // first, up to `tuning::chain_steps` times.
  bool run(state& st, const tuning& t) {
    stuck_.clear();
    // Out of swaps or work: no rank is named, whatever was passed over.
    const auto give_up = [&] {
      stuck_.clear();
      return false;
    };
    tuning_ = t;
    steps_on_.assign(st.dp, 0);
    run_charged_ = false;
    const std::int64_t budget =
        static_cast<std::int64_t>(st.n) * tuning_.repair_swaps_per_pack + 16;
    std::int64_t swaps = 0;
    std::int32_t chains_left = tuning_.chains ? tuning_.chain_steps : 0;
    // Lazy max-heaps: entries whose key no longer matches the rank's state are skipped.
    auto& over = over_heap_;
    over.clear();
    room_heap_.clear();
    st.total_excess = 0;
    for (std::size_t r = 0; r < st.dp; ++r) {
      st.total_excess += st.excess(r);
    }
    pace_.begin(st);
    for (std::size_t r = 0; r < st.dp; ++r) {
      const std::int64_t key = over_key(st, r);
      if (key > 0) {
        over.emplace(key, -static_cast<std::int64_t>(r));
      }
      if (st.load[r] < st.limit) {
        room_heap_.emplace(st.limit - st.load[r], -static_cast<std::int64_t>(r));
      }
    }
    while (!over.empty()) {
      const auto [key, neg] = over.top();
      over.pop();
      const auto r = static_cast<std::size_t>(-neg);
      if (key != over_key(st, r)) {
        continue; // stale; a fresh entry was pushed when the rank changed
      }
      st.review_if_due(); // may abandon the search: then out of work
      if (++swaps > budget || st.out_of_work()) {
        return give_up();
      }
      if (pace_.hopeless(st)) {
        st.gave_up = true; // the fallback's allowance is counted from here
        return give_up();
      }
      const bool hurried = pace_.hurry(st);
      changed_.assign(1, r);
      ++steps_on_[r];
      const std::int64_t work_before = st.work;
      const bool level_step = key >= crowded_key;
      if (!repair_step(st, r)) {
        std::size_t s1 = st.dp;
        std::size_t s2 = st.dp;
        if (chains_left == 0 || !chain_.step(st, tuning_, r, s1, s2)) {
          if (st.out_of_work()) {
            return give_up();
          }
          stuck_.push_back(r);
          if (hurried) {
            return false;
          }
          continue; // passed over
        }
        changed_.push_back(s1);
        changed_.push_back(s2);
        --chains_left;
      }
      pace_.step_done(level_step, st.work - work_before);
      for (const std::size_t changed : changed_) {
        const std::int64_t k2 = over_key(st, changed);
        if (k2 > 0) {
          over.emplace(k2, -static_cast<std::int64_t>(changed));
        }
        if (st.load[changed] < st.limit) {
          room_heap_.emplace(st.limit - st.load[changed], -static_cast<std::int64_t>(changed));
        }
      }
    }
    return stuck_.empty();
  }

  // The ranks the last run() could not repair, in the order it met them; empty when it gave up
  // (out of swaps or work) or succeeded.
  const std::vector<std::size_t>& stuck_ranks() const { return stuck_; }

  // A new attempt: its repair rounds are judged together (see repair_pace).
  void start_attempt() { pace_.start_attempt(); }

 private:
  // Order of repair: crowded levels first (they block everything), then load excess.
  static std::int64_t over_key(state& st, std::size_t r) {
    const std::int64_t crowd = st.level_excess(r);
    return crowd > 0 ? crowded_key + crowd : st.excess(r);
  }

  // Up to `m` ranks other than `skip` with the most room, most first (ties: lower rank).
  void roomiest(const state& st, std::size_t m, std::size_t skip, std::vector<std::size_t>& out) {
    out.clear();
    std::vector<std::pair<std::int64_t, std::int64_t>>& kept = scratch_entries_;
    kept.clear();
    while (!room_heap_.empty() && out.size() < m) {
      const auto e = room_heap_.top();
      room_heap_.pop();
      const auto r = static_cast<std::size_t>(-e.second);
      if (e.first != st.limit - st.load[r] || e.first <= 0) {
        continue; // stale
      }
      if (!out.empty() && out.back() == r) {
        continue; // duplicate entry
      }
      kept.push_back(e);
      if (r != skip) {
        out.push_back(r);
      }
    }
    for (const auto& e : kept) {
      room_heap_.push(e);
    }
  }

  struct candidate {
    std::int64_t full = 0;  // 1 when the swap ends r's excess without overloading the partner
    std::int64_t gain = 0;  // excess removed from the system
    std::int64_t delta = 0; // moved-bytes change
    std::size_t x = 0, y = 0;
  };

  // Full fixes first, the one moving the fewest bytes. Among partial fixes the largest gain,
  // then the fewest bytes: a rank no swap fixes outright gets there in the fewest steps; or, with
  // `by_bytes` (level repairs, and few levels), the fewest bytes, then the largest gain. Ties by
  // ids.
  static bool better(const candidate& a, const candidate& b, bool by_bytes) {
    if (a.full != b.full) {
      return a.full > b.full;
    }
    if (a.full == 1 || by_bytes) {
      return std::tie(a.delta, b.gain, a.x, a.y) < std::tie(b.delta, a.gain, b.x, b.y);
    }
    return std::tie(b.gain, a.delta, a.x, a.y) < std::tie(a.gain, b.delta, b.x, b.y);
  }

  // Swaps that lower rank r's excess (levels first, then load); the partners join changed_.
  bool repair_step(state& st, std::size_t r) {
    const std::int64_t exc = st.excess(r);
    const bool crowded = st.level_excess(r) > 0;
    // With few levels a step is cheap: partial fixes go by bytes, one swap at a time, which
    // moves the fewest bytes, unless the rank has taken many steps already. With many levels
    // each step reads O(k) and a rank may need hundreds of them: partial fixes go by gain, and
    // batches of swaps take the fewest steps.
    const bool bold = st.k >= bold_from_levels;
    const bool careful = !bold && steps_on_[r] <= careful_rank_steps;
    // The lowest crowded level: a pack at or below it must leave for one above it.
    std::int32_t crowded_level = -1;
    if (crowded) {
      std::int32_t prefix = 0;
      for (std::size_t j = 0; j < st.k; ++j) {
        prefix += st.cnt[r * st.k + j];
        if (prefix > static_cast<std::int32_t>(j) + 1) {
          crowded_level = static_cast<std::int32_t>(j);
          break;
        }
      }
    }
    bool found = false;
    candidate best;
    // Once a full fix is known, only a full fix moving fewer bytes can win: outside level repairs
    // every full fix gains exactly r's excess (its partner had room), so they rank by bytes, then
    // ids, and a swap that leaves r above the limit or puts its partner above it loses at once.
    bool full_only = false;
    // The swap of x (on r) for y (on s2) against the best so far.
    const auto weigh = [&](std::size_t x, std::size_t y, std::size_t s2) {
      if (full_only) {
        const std::int64_t delta = st.swap_delta(x, r, y, s2);
        if (std::tie(delta, x, y) < std::tie(best.delta, best.x, best.y) &&
            st.level_room(s2, st.pk[x].level, st.pk[y].level)) {
          best = {1, exc, delta, x, y};
        }
        return;
      }
      if (crowded ? (st.pk[x].level > crowded_level || st.pk[y].level <= crowded_level)
                  : st.pk[y].cost >= st.pk[x].cost) {
        return;
      }
      const std::int64_t d = st.pk[x].cost - st.pk[y].cost;
      const std::int64_t before = exc + st.excess(s2);
      const std::int64_t after = std::max<std::int64_t>(0, st.load[r] - d - st.limit) +
                                 std::max<std::int64_t>(0, st.load[s2] + d - st.limit);
      if (!crowded && after >= before) {
        return;
      }
      candidate c;
      c.full = (st.load[r] - d <= st.limit && st.load[s2] + d <= st.limit) ? 1 : 0;
      c.gain = before - after;
      // Lost before its bytes are counted where that is known: to a full fix, or, ranked by
      // gain, to a larger one.
      if (found &&
          (best.full > c.full || (c.full == 0 && !crowded && !careful && c.gain < best.gain))) {
        return;
      }
      c.delta = st.swap_delta(x, r, y, s2);
      c.x = x;
      c.y = y;
      // The level check is the costly part: only for a candidate that would win.
      if ((found && !better(c, best, crowded || careful)) ||
          !st.level_room(s2, st.pk[x].level, st.pk[y].level)) {
        return;
      }
      best = c;
      found = true;
      full_only = !crowded && c.full == 1;
    };
    // Every candidate the searches pass: the cheap tests here, inlined at each call (most
    // candidates fail them), the rest in weigh(). The callers count the candidates as work.
    // `consider_known` takes the costs and y's rank where the caller has them (the level tables
    // hold them), which spares reading the two pack records of every candidate; `consider`
    // reads them.
    const auto consider_known = [&](std::size_t x, std::int64_t x_cost, std::size_t y,
                                    std::int64_t y_cost, std::size_t s2) {
      const std::int64_t d = x_cost - y_cost;
      if (s2 == r || (!crowded && d <= 0) ||
          (full_only && (d < exc || st.load[s2] + d > st.limit))) {
        return;
      }
      weigh(x, y, s2);
    };
    const auto consider = [&](std::size_t x, std::size_t y) {
      consider_known(x, st.pk[x].cost, y, st.pk[y].cost, static_cast<std::size_t>(st.pk[y].rank));
    };
    const auto full_known = [&] { return found && best.full == 1; };
    // A full fix that moves no more bytes cannot be beaten by much, and once the attempt is
    // hurried any full fix is taken (see repair_pace::hurried): stop looking.
    const auto settled = [&] { return full_known() && (pace_.hurried() || best.delta <= 0); };
    pick_(st, r, exc, crowded_level, tuning_.repair_picks);
    roomiest(st, static_cast<std::size_t>(tuning_.roomy_partners), r, scratch_ranks_);
    // The partners' level counts and places, fetched now for their level tables below: they are
    // few and lie at random places (1,048,576 packs, `multiples` at ga 16: 0.93 times the time of
    // building the tables without it, paired runs).
    for (const std::size_t s2 : scratch_ranks_) {
      prefetch(&st.cnt[s2 * st.k]);
      prefetch_lines(&st.items[s2 * st.k], st.used[s2]);
    }
    // The roomiest ranks first: most fixes need a partner with room. Both ranks' packs by level
    // (`level_tables`): outside level repairs, for each level of the partner's packs, r's packs of
    // that level and of the levels below it that the partner can take in its place (see
    // level_room); for a level repair, the most expensive pack the partner holds above the
    // crowded level (it overloads the partner least), for each pick. With many levels a partner
    // costs O(k): once one has given a full fix, the step reads no further partner (at eps = 0 a
    // limit within a hair of the mean load leaves hundreds of ranks just above it, one step
    // each, and reading all eight partners for each took 7.6 k units per step at ga 256, more
    // than the work bound holds for all of them: `vlm-pretrain` 1,024 x 256 ended at the bound).
    // With fewer levels, the same once the attempt is `hurried` (see repair_pace::hurried).
    if (!run_charged_) {
      // A run's first step is charged n + dp units: what indexing every pack by rank and level
      // cost, which the repair did at that step while its level tables were read from level
      // lists. The judges of repair_pace count their pace from the run's start and were tuned
      // with the charge in it: without it they judge later, and searches that end in the
      // fallback anyway run on (on the stress set, `bimodal` at dp 65,536 x ga 16: 13.0-14.6
      // million units instead of 5.8 million, for the same answer). With it every plan is as
      // it was.
      st.work += static_cast<std::int64_t>(st.n + st.dp);
      run_charged_ = true;
    }
    tables_.build(st, r, mine_);
    std::int64_t weighed = 0; // candidates, and pairs of levels, counted as work
    tables_.start_step(scratch_ranks_.size());
    for (std::size_t j = 0; j < scratch_ranks_.size(); ++j) {
      const std::size_t s2 = scratch_ranks_[j];
      if ((bold || pace_.hurried()) && full_known()) {
        break;
      }
      const std::vector<level_entry>& theirs = tables_.partner(st, j, scratch_ranks_[j]);
      if (crowded) {
        for (const auto& e : theirs) {
          if (static_cast<std::int32_t>(e.level) > crowded_level) {
            for (const std::size_t x : pick_.picks) {
              consider(x, e.hi);
            }
            weighed += static_cast<std::int64_t>(pick_.picks.size());
            break;
          }
        }
        continue;
      }
      const std::int32_t* full = st.full_from(s2);
      std::size_t below = 0; // mine_[below - 1]: r's last level <= the partner's level
      for (const auto& e : theirs) {
        while (below < mine_.size() && mine_[below].level <= e.level) {
          ++below;
        }
        // r's levels from the partner's down, at most `scan_limit` of them.
        const std::size_t lowest = below > static_cast<std::size_t>(tuning_.scan_limit)
                                       ? below - static_cast<std::size_t>(tuning_.scan_limit)
                                       : 0;
        for (std::size_t i = below; i-- > lowest;) {
          const auto& m = mine_[i];
          if (m.level != e.level && static_cast<std::size_t>(full[m.level]) < e.level) {
            break; // nor any lower level: full_from is non-decreasing
          }
          weighed += 2;
          consider_known(m.hi, m.hi_cost, e.lo, e.lo_cost, s2);
          if (m.lo != m.hi || e.lo != e.hi) {
            weighed += 3;
            consider_known(m.lo, m.lo_cost, e.hi, e.hi_cost, s2);
            consider_known(m.hi, m.hi_cost, e.hi, e.hi_cost, s2);
            consider_known(m.lo, m.lo_cost, e.lo, e.lo_cost, s2);
          }
        }
      }
    }
    st.work += weighed;
    if (!settled()) {
      index_search(st, exc, crowded, consider, full_known);
    }
    if (!crowded && (!found || best.full == 0)) {
      if (!careful && batch_(st, r, exc, scratch_ranks_, tables_, mine_, steps_on_[r], changed_)) {
        return true;
      }
      // Nothing with the roomiest ranks: four times as many of r's packs through the cost
      // index, which reaches every rank (and, where levels have slack, packs of other levels).
      pick_(st, r, exc, crowded_level, 4 * tuning_.repair_picks);
      index_search(st, exc, crowded, consider, full_known);
    }
    if (!found) {
      return false;
    }
    changed_.push_back(static_cast<std::size_t>(st.pk[best.y].rank));
    st.swap_packs(best.x, best.y);
    return true;
  }

  // Partners for the picked packs through the cost index (see search_cost_index, cost_index.hpp),
  // up to the room of the roomiest rank outside level repairs.
  template <class Consider, class FullKnown>
  void index_search(state& st, std::int64_t exc, bool crowded, Consider&& consider,
                    FullKnown&& full_known) {
    std::int64_t max_room = 0;
    if (!crowded) {
      // The roomiest rank heads scratch_ranks_ when it lists any (r, above the limit, has no
      // room), as no load has changed since repair_step listed them.
      const std::vector<std::size_t>* top = &scratch_ranks_;
      if (scratch_ranks_.empty()) {
        roomiest(st, 1, st.dp, roomiest_one_);
        top = &roomiest_one_;
      }
      max_room = top->empty() ? 0 : st.limit - st.load[top->front()];
    }
    search_cost_index(st, pick_.picks, exc, crowded, max_room, tuning_.scan_limit, consider,
                      full_known);
  }

  tuning tuning_{};
  repair_pace pace_; // when the attempt gives up or hurries: see pace.hpp
  static constexpr std::int64_t crowded_key = std::int64_t{1} << 62; // see over_key()
  std::vector<std::size_t> scratch_ranks_;
  std::vector<std::size_t> roomiest_one_; // see index_search
  pack_picker pick_;
  chain_search chain_;
  std::vector<std::size_t> changed_;   // the ranks a step changed
  std::vector<std::size_t> stuck_;     // see stuck_ranks()
  std::vector<std::int32_t> steps_on_; // steps taken on each rank in this run
  bool run_charged_ = false;           // see repair_step()
  static constexpr std::int32_t careful_rank_steps = 8;
  batch_swaps batch_;             // several same-level swaps at once: see batch_swaps.hpp
  std::vector<level_entry> mine_; // the table of the rank under repair
  level_tables tables_;           // its partners', and how mine_ is built
  std::vector<std::pair<std::int64_t, std::int64_t>> scratch_entries_;
  // A max-heap of (key, -rank) that keeps its memory when cleared.
  struct heap : std::priority_queue<std::pair<std::int64_t, std::int64_t>> {
    void clear() { c.clear(); }
  };
  heap over_heap_; // (excess key, -rank), lazy: see run()
  heap room_heap_; // (room, -rank), lazy
};

} // namespace packswap::detail::stage2
