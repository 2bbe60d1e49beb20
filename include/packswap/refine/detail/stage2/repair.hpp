#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/stage2/chain.hpp"
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
/// Every step lowers the total excess (load above the limit, summed over ranks) or, on a rank
/// that crowds a level, moves a pack at or below its lowest crowded level out for one above it;
/// swaps keep every other rank's level constraints. A step on rank r tries, in order: (1) single
/// swaps of r's picked packs (`pack_picker`: those that can shed its excess, fewest bytes first,
/// and those that can shed the most) with packs of the roomiest ranks (by level, `level_tables`)
/// and of the cost index, where a full fix (r and its partner within the limit) moving the
/// fewest bytes wins (with 64 levels or more, or once the attempt runs short of work, no
/// partner is read after one that gave a full fix; once it runs short of work, nor the cost
/// index); (2) with 64 levels or more, several same-level swaps at once with the roomiest ranks
/// (`batch_step`); (3) the best single partial fix, among four times as many picks (by gain with
/// 64 levels or more, else by bytes); (4) in the chained attempts, two swaps in a chain
/// (`chain_search`). A rank no swap helps is passed over while the attempt is not short of work
/// (`repair_pace::hurried`), and the others repaired; the run then returns false, naming the ranks
/// passed over (`stuck_ranks`), for the caller to free their pins. It also returns false when
/// out of swaps or out of work (`state::out_of_work`), or when the attempt's repairs, at the pace
/// they go, cannot end it within the work left (`repair_pace::hopeless`: then the search gives up
/// the rest of its work and no later attempt runs, as the answer at the bound would be the
/// fallback's anyway).
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
      if (!careful && batch_step(st, r, exc)) {
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

  // Where no single swap fixes rank r: several same-level swaps at once, with the roomiest
  // ranks. For each level r and a partner both hold, r's most expensive pack of it for the
  // partner's cheapest (`mine_` as repair_step left it) gives one swap moving d. The swaps that
  // move no bytes go first, largest d first, then the fewest bytes per unit of d; each is taken
  // while r stays above the limit, its pack is still there and the partner stays within the
  // limit. Once only swaps that move bytes are left, with fewer than `careful_below_levels`
  // levels and in a rank's first `careful_steps` steps, one more ends the batch: the one that
  // ends r's excess alone moving the fewest bytes, or else the one moving the fewest per unit of
  // d; later (a rank that needs many steps), or with more levels, they are taken in order too,
  // which takes far fewer steps for slightly more bytes. (With a thousand levels a step reads
  // tens of thousands of units of work, for a swap that may carry a thousandth of the excess.)
  // Same-level swaps keep every rank's level counts. O(m k + t log(m k)) for m partners and t
  // swaps taken or passed over. Where none fits a partner's room: the one swap that overloads a
  // partner least, when that still lowers the total excess (the partner is repaired in its turn).
  bool batch_step(state& st, std::size_t r, std::int64_t exc) {
    swaps_.clear();
    unfit_.clear();
    for (std::size_t j = 0; j < scratch_ranks_.size(); ++j) {
      const std::size_t s2 = scratch_ranks_[j];
      if (st.load[s2] >= st.limit) {
        continue;
      }
      const std::vector<level_entry>& theirs = tables_.partner(st, j, scratch_ranks_[j]);
      std::size_t i = 0;
      for (const auto& e : theirs) {
        while (i < mine_.size() && mine_[i].level < e.level) {
          ++i;
        }
        if (i < mine_.size() && mine_[i].level == e.level && e.lo_cost < mine_[i].hi_cost) {
          const std::size_t x = mine_[i].hi;
          const std::int64_t d = mine_[i].hi_cost - e.lo_cost;
          // A swap that overloads its partner now does so throughout the step (a partner's
          // load only grows in it): it is kept aside, out of the heap.
          (st.load[s2] + d <= st.limit ? swaps_ : unfit_)
              .push_back({d, st.swap_delta(x, r, e.lo, s2), x, e.lo, s2});
        }
      }
    }
    st.work += static_cast<std::int64_t>(swaps_.size() + unfit_.size());
    // The order the swaps are taken in (a total order: no two share x and y). A step takes few
    // of them, so they come off a heap, O(m + t log m) for t taken, rather than a sort of all.
    const auto later = [](const batch_swap& a, const batch_swap& b) {
      const bool a_free = a.delta <= 0;
      const bool b_free = b.delta <= 0;
      if (a_free != b_free) {
        return b_free;
      }
      if (a_free) {
        return std::tie(a.d, b.delta, b.x, b.y) < std::tie(b.d, a.delta, a.x, a.y);
      }
      const int c = compare_products(b.delta, a.d, a.delta, b.d);
      return c != 0 ? c < 0 : std::tie(b.x, b.y) < std::tie(a.x, a.y);
    };
    std::make_heap(swaps_.begin(), swaps_.end(), later);
    const auto usable = [&](const batch_swap& sw) {
      return st.pk[sw.x].rank == static_cast<std::int32_t>(r) &&
             st.pk[sw.y].rank == static_cast<std::int32_t>(sw.partner) &&
             st.load[sw.partner] + sw.d <= st.limit;
    };
    bool any = false;
    // swaps_[0, left): the heap of the swaps not taken yet; the next one goes to swaps_[left].
    for (std::size_t left = swaps_.size(); left > 0 && st.load[r] > st.limit;) {
      std::pop_heap(swaps_.begin(), swaps_.begin() + static_cast<std::ptrdiff_t>(left), later);
      const batch_swap& next = swaps_[--left];
      if (!usable(next)) {
        continue;
      }
      // A swap that moves bytes while another usable one (of it and the rest) finishes the job:
      // the one of those that moves the fewest bytes, and done.
      if (next.delta > 0 && st.k < careful_below_levels && steps_on_[r] <= careful_steps) {
        const std::int64_t rest = st.load[r] - st.limit;
        const batch_swap* finish = nullptr;
        for (std::size_t j = 0; j <= left; ++j) {
          const auto& sw = swaps_[j];
          if (sw.d >= rest && usable(sw) &&
              (finish == nullptr ||
               std::tie(sw.delta, sw.x, sw.y) < std::tie(finish->delta, finish->x, finish->y))) {
            finish = &sw;
          }
        }
        // Counted as if the swaps kept aside were in the heap: those after `next` in the order.
        std::size_t unfit_after = 0;
        for (const auto& sw : unfit_) {
          unfit_after += later(sw, next) ? 1 : 0;
        }
        st.work += static_cast<std::int64_t>(left + 1 + unfit_after);
        // Else the one moving the fewest bytes per unit of d, alone: the next step weighs the
        // rest again, with what the swap changed.
        const batch_swap& take = finish != nullptr ? *finish : next;
        st.swap_packs(take.x, take.y);
        changed_.push_back(take.partner);
        return true;
      }
      st.swap_packs(next.x, next.y);
      changed_.push_back(next.partner);
      any = true;
    }
    if (any) {
      return true;
    }
    const batch_swap* least = nullptr;
    std::int64_t least_over = 0;
    for (const auto* kept : {&swaps_, &unfit_}) {
      for (const auto& sw : *kept) {
        const std::int64_t over = sw.d - (st.limit - st.load[sw.partner]);
        if (over < std::min(sw.d, exc) &&
            (least == nullptr || std::tie(over, sw.delta, sw.x, sw.y) <
                                     std::tie(least_over, least->delta, least->x, least->y))) {
          least = &sw;
          least_over = over;
        }
      }
    }
    if (least == nullptr) {
      return false;
    }
    st.swap_packs(least->x, least->y);
    changed_.push_back(least->partner);
    return true;
  }

  // The first index in [first, last) of the ascending `v` whose entry is not below `key`, else
  // `last`: std::lower_bound with the comparison feeding a conditional move, not a branch (a
  // search for a pack's cost goes either way at random, and mispredictions cost more than the
  // scans that follow). O(log(last - first)).
  static std::size_t first_not_below(const std::vector<std::int64_t>& v, std::size_t first,
                                     std::size_t last, std::int64_t key) {
    if (first >= last) {
      return last;
    }
    const std::int64_t* base = v.data() + first;
    std::size_t len = last - first;
    while (len > 1) {
      const std::size_t half = len / 2;
      base = base[half] < key ? base + half : base;
      len -= half;
    }
    return static_cast<std::size_t>(base - v.data()) + (*base < key ? 1 : 0);
  }

  // The same over the cost index, for a key at most pack x's cost (x's own entry is not below
  // it): within x's level, at or below x, where most such searches end, else below the level.
  static std::size_t cost_index_at(const state& st, std::size_t x, std::int64_t key) {
    const std::size_t lb = st.level_begin[static_cast<std::size_t>(st.pk[x].level)];
    return st.sorted_cost[lb] < key ? first_not_below(st.sorted_cost, lb + 1, st.n - 1 - x, key)
                                    : first_not_below(st.sorted_cost, 0, lb, key);
  }

  // Partners for the picked packs through the cost index: a full fix needs cost(y) <= cost(x) -
  // exc; scan downward from there (growing difference), then upward toward cost(x) (partial
  // fixes), and, where x's level has no slack, the cheapest packs of its level (the largest
  // partial fixes). Each scan's ends come from the index before it starts (a search for the
  // split, and one for the reach where it cuts a scan short). Once `full_known()` (a full fix is
  // the best so far), a pack whose cost, read from the index, rules out a full fix is weighed
  // there without a call to `consider`: the partial fixes, and the cheapest packs of x's level
  // that no rank has room for. Every pack the scans pass counts as one unit of work either way.
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
    const auto limit = static_cast<std::size_t>(tuning_.scan_limit);
    std::int64_t weighed = 0; // the packs the scans pass, each one unit of work
    for (const std::size_t x : pick_.picks) {
      const std::int64_t x_cost = st.pk[x].cost;
      const std::int64_t want = x_cost - std::max<std::int64_t>(exc, 1);
      const std::size_t split = cost_index_at(st, x, want + 1); // the first entry above want
      // The cost index holds each level contiguously. Where no rank holds fewer than l + 1
      // packs of level <= l (no slack), only packs of x's own level can trade places with it.
      // No rank can absorb more than the largest room, so larger differences are never useful
      // (outside level repairs, which may overload a partner).
      const auto level = static_cast<std::size_t>(st.pk[x].level);
      const std::size_t lb = st.level_begin[level];
      const std::size_t le = st.level_end[level];
      const std::int64_t reach = crowded ? x_cost : max_room;
      // max(i, the first entry within reach: cost(x) - cost(y) <= reach from there up), searched
      // for only where entry i is out of reach (most scans end within it first).
      std::size_t reached = st.n; // not searched yet
      const auto within_reach_from = [&](std::size_t i) {
        if (st.sorted_cost[i] >= x_cost - reach) {
          return i;
        }
        if (reached == st.n) {
          reached = cost_index_at(st, x, x_cost - reach);
        }
        return std::max(i, reached);
      };
      // Full fixes of x's level: downward from the split, growing difference.
      const std::size_t level_split = std::min(std::max(split, lb), le);
      const std::size_t level_low =
          within_reach_from(std::max(lb, level_split > limit ? level_split - limit : 0));
      for (std::size_t i2 = level_split; i2 > level_low; --i2) {
        consider(x, static_cast<std::size_t>(st.by_cost(i2 - 1)));
      }
      weighed += static_cast<std::int64_t>(level_split - std::min(level_split, level_low));
      // Where the level has slack, across levels too: the cheaper packs of later levels, below
      // x's level's stretch.
      if (crowded || st.slack[level] != 0) {
        const std::size_t start = std::min(split, lb);
        const std::size_t low = within_reach_from(start > limit ? start - limit : 0);
        for (std::size_t i2 = start; i2 > low; --i2) {
          consider(x, static_cast<std::size_t>(st.by_cost(i2 - 1)));
        }
        weighed += static_cast<std::int64_t>(start - std::min(start, low));
      }
      // Partial fixes: upward from the split toward cost(x) (a difference below exc, so never a
      // full fix), and the cheapest packs of x's level (the largest differences).
      const bool partial_useless = full_known();
      for (std::size_t i2 = within_reach_from(split), step = 0; i2 < st.n && step < limit / 2;
           ++i2, ++step) {
        if (st.sorted_cost[i2] >= x_cost) {
          break;
        }
        ++weighed;
        if (!partial_useless) {
          consider(x, static_cast<std::size_t>(st.by_cost(i2)));
        }
      }
      for (std::size_t i2 = lb; i2 < std::min(le, lb + limit / 2); ++i2) {
        if (st.sorted_cost[i2] >= x_cost) {
          break;
        }
        ++weighed;
        const std::int64_t d = x_cost - st.sorted_cost[i2];
        if (crowded || (d <= max_room && d >= exc) || !full_known()) {
          consider(x, static_cast<std::size_t>(st.by_cost(i2)));
        }
      }
    }
    st.work += weighed;
  }

  tuning tuning_{};
  repair_pace pace_; // when the attempt gives up or hurries: see pace.hpp
  static constexpr std::int64_t crowded_key = std::int64_t{1} << 62; // see over_key()
  std::vector<std::size_t> scratch_ranks_;
  std::vector<std::size_t> roomiest_one_; // see index_search
  pack_picker pick_;
  chain_search chain_;
  std::vector<std::size_t> changed_;                       // the ranks a step changed
  std::vector<std::size_t> stuck_;                         // see stuck_ranks()
  std::vector<std::int32_t> steps_on_;                     // steps taken on each rank in this run
  bool run_charged_ = false;                               // see repair_step()
  static constexpr std::int32_t careful_steps = 2;         // see batch_step()
  static constexpr std::size_t careful_below_levels = 512; // see batch_step()
  static constexpr std::int32_t careful_rank_steps = 8;
  struct batch_swap {
    std::int64_t d, delta;
    std::size_t x, y, partner;
  };
  std::vector<batch_swap> swaps_; // see batch_step()
  std::vector<batch_swap> unfit_; // see batch_step()
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
