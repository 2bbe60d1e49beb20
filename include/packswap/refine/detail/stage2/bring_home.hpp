#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/stage2/compensate.hpp"
#include "packswap/refine/detail/stage2/payoff.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 5: bring home. Trades packs away from home for packs their home rank holds for
/// others, where that moves fewer weighted bytes.
///
/// Every trade keeps every rank within the limit and its level constraints, and lowers the
/// weighted moved bytes; no trade sends a pack away from home.
///
/// Complexity: per pass O(n) to list the packs away from home, then per such pack O(1 + L / 16 +
/// q): L the levels the trade may take (one where a level has no slack), read from the level
/// row of the home rank, q their packs there (none read where all are home: `state::away_at`;
/// with several nodes, where no trade brings the pack home, the same for each rank of its home
/// node, over the levels whose costs let the loads fit: O(1 + the packs there) to tell whether
/// any can trade, with `mates_by_window_from` levels or more), plus the compensating pairs: at most
/// `compensating_pairs::compensation_pairs` per trade weighed with many levels, O(k) per trade with
/// few (k <= 64; in a settle of `settle_by_level_from` packs or more, k <= 16), and at most
/// `settle_pairs` per visit in a settle of `capped_settle_from` packs or more; with many levels,
/// and in a settle of `capped_settle_from` to `rows_settle_up_to` packs with more levels than
/// `settle_pairs`, the levels read from two rows instead, O(k / 16), and only the pairs that fit
/// weighed (a settle takes the first; the rows cost O(n + dp k) to build). O(n) per pass where
/// costs are distinct. In a dense settle with many levels, a visit at a tied level whose row's pack
/// trades without compensation is O(1). Stops at the work limit (and a dense pass with up to 64
/// levels where its visits stop paying: `payoff`): every trade keeps the limits, so any prefix is
/// an answer.
class bring_home_phase {
 public:
  // (4) For every pack p away from home, trade it for a pack q its home rank h holds for somebody
  // else, when fewer weighted bytes move, levels stay valid and both loads stay within the limit.
  // When the loads would not, a second, compensating trade between the same two ranks may carry
  // the difference back: two packs u (on h) and v (on p's rank) of one level, both away from
  // home, so moving them again costs nothing. With several nodes, where no such trade is found,
  // ranks on p's home node are tried as partners too: a pack one hop from home inside its node
  // is cheaper than one across.
  // `dense`: most packs start away from home, and most visits weigh trades (the settle from
  // stage 1); from `capped_settle_from` packs each visit then weighs at most `settle_pairs`
  // compensating pairs, and from `prefetch_settle_from` packs the records their trades read are
  // fetched ahead (see below; with many levels, at any size, the home rank's list at the pack's
  // level and the first pack on it); with few levels the packs are visited heaviest first, and a
  // pass ends where its visits stop paying.
  void run(state& st, const tuning& tune, bool dense = false) {
    // Every rank's st.full up to date in one sequential pass, rather than rebuilt on first use
    // from a st.cnt line fetched at random.
    for (std::size_t r = 0; r < st.dp; ++r) {
      st.full_from(r);
    }
    // With many levels the home rank's packs are read by level, from the level lists; with
    // few, its places (home, level, cost and bytes beside each pack) are read in sequence
    // instead, which needs no lists and no pack records. A settle of `settle_by_level_from` packs
    // or more reads by level from more than `settle_scan_items_up_to` levels: there nearly every
    // visit weighs trades (at eps = 0 about half of them trade), and the lists' packs at the
    // levels a trade may take cost less than the home rank's places read whole (2 KB at 64
    // levels) at every visit. On the stress set only the fallbacks change: at 16,384 packs the ten
    // of ga 64 (dp 256, seeds 1-3) take 0.83-0.93 times their solve's time (paired runs) and move
    // up to 0.029 of Karmarkar-Karp's bytes fewer (`high-res` seed 2: 0.479 -> 0.450), none more;
    // at 262,144 packs (dp 4,096) `high-res` moves 0.43-0.46 instead of 0.50-0.54 in 0.91-0.97
    // times the time and `bimodal` 0.8% fewer bytes in 0.81-0.82; with 32 levels alike (0.85-0.95
    // times, up to 7% fewer bytes). With 16 levels it took 1.01 times the time at 16,384 packs and
    // 1.11-1.17 at 262,144 and 1,048,576 packs, for 0.3-1.2% fewer bytes: not there.
    const bool by_level =
        st.k > (dense && st.n >= settle_by_level_from ? settle_scan_items_up_to : scan_items_up_to);
    // By level, nothing here reads the places, and the bring-home is a run's last phase: after
    // it only the records' ranks are read (the cells, the moved bytes), and the next run or
    // settle starts from reset(), which places every pack anew (or, after the bring-home of a
    // round of home_first::loosen_and_repair, the repair from state::rebuild_places). So its swaps
    // leave the places alone: one line fewer written on each rank (the places of a rank are read by
    // the scans with few levels only).
    st.places_live = !by_level;
    // Dense, with few levels, and where the records outgrow the caches: the visits ahead fetch the
    // places of both ranks of their trades. Where most visits weigh no trade (after the search),
    // or the records fit the caches, that costs more than it saves (4% at 16,384 packs, when the
    // packs' records were fetched too).
    const bool prefetch_items = dense && st.n >= prefetch_settle_from && !by_level;
    // A settle of many packs runs out of work before its first pass ends (its allowance, 8 units
    // per pack plus a constant, is 16 per pack at 8,192 packs; at 262,144 packs it ends after
    // about 30% to 95% of its visits), so each visit weighs at most `settle_pairs` compensating
    // pairs: more packs visited for the same work, which brings more bytes home than weighing
    // every pair of the few visited. (With fewer packs the allowance lasts longer, and the cap
    // moved more bytes on the stress set.)
    const std::int32_t pairs_per_visit = dense && st.n >= capped_settle_from
                                             ? settle_pairs
                                             : std::numeric_limits<std::int32_t>::max();
    // With many levels compensate_ reads the pairs from the rows (see compensating_pairs::by_rows),
    // and a settle takes the first that fits. With few, a visit weighs the home rank's items in
    // order instead, which weighs every pair but in a settle of `capped_settle_from` packs or
    // more, where it stops at `settle_pairs` and, at eps = 0, these rarely fit. There, with more
    // levels than that (up to settle_scan_items_up_to: more read by level) and up to
    // `rows_settle_up_to` packs, the settle reads the rows too. (Measured where it was chosen,
    // with 64 levels, which such a settle now reads by level: the fallback of `high-res` 256 x 64
    // moved 0.46-0.48 of Karmarkar-Karp's bytes instead of 0.60-0.64, for 1.03-1.07 times the
    // time.) Not with more packs: with 16 levels (`bimodal` 16,384 x 16, the shape of the
    // 1,048,576-pack target's batches too) 0.001-0.003 less for 1.04-1.06 times the time, as the
    // level lists and rows the trades keep up come from beyond the caches. Those rows are built
    // before the payoff's windows are sized, which judge visits alone.
    const bool rows_few =
        !by_level && static_cast<std::size_t>(pairs_per_visit) < st.k && st.n <= rows_settle_up_to;
    compensate_.start(dense, by_level || rows_few);
    // A dense settle by level tries the pack a row holds first, at crowded tied levels (see
    // try_rank), where the batch has any. O(k) to tell.
    quick_ = dense && by_level && crowded_level(st);
    // With several nodes and enough levels, the level lists tell which ranks of a home node can
    // trade at all (see try_rank).
    const bool mates_by_window = st.ranks.multi_node && (by_level || st.k >= mates_by_window_from);
    if (rows_few || quick_) {
      st.ensure_away_rows();
    } else if (by_level || mates_by_window) {
      st.ensure_levels();
    }
    // A dense settle with up to `scan_items_up_to` levels (read in sequence, or by level as
    // above) visits the heaviest packs first (see list_away_heaviest), and each pass ends where
    // its visits stop paying (see `payoff`). (The settles by level above took 1.46 times as long
    // in input order on `bimodal` 4,096 x 64, whose pass the payoff ends early; with more levels,
    // heaviest first moved 7.6% more bytes on `bimodal` 64 x 256 and took 1.25 times the time
    // on `pareto` 16 x 1,024, at 16,384 packs.)
    const bool heaviest_first = dense && st.k <= scan_items_up_to;
    payoff pays;
    if (heaviest_first) {
      pays.size(st);
    }
    for (std::int32_t pass = 0; pass < tune.home_passes; ++pass) {
      bool changed = false;
      pays.start(st);
      // Only packs away from home need a visit: no trade below sends a pack away from home (each
      // moves packs that are away already, or brings one home), so those visited are those a
      // full walk would not skip, and the records of the packs already home are never fetched.
      // In input order (batches list each rank's packs together, so consecutive packs share a
      // home rank and its items stay in cache), or heaviest first.
      if (heaviest_first) {
        list_away_heaviest(st);
      } else {
        list_away(st);
      }
      const std::size_t visits = away_.size();
      // Records of packs a few steps ahead are fetched early: input order is random in the
      // internal numbering.
      for (std::size_t next = 0; next < visits; ++next) {
        if (next + state::prefetch_distance < visits) {
          prefetch(&st.pk[static_cast<std::size_t>(away_[next + state::prefetch_distance])]);
        }
        if (next + state::prefetch_distance / 2 < visits) {
          // Fetched half the distance ago: its rank's state can be fetched now.
          const auto pack = static_cast<std::size_t>(away_[next + state::prefetch_distance / 2]);
          const auto ahead = static_cast<std::size_t>(st.pk[pack].rank);
          prefetch(&st.load[ahead]);
          // The line of its level in its rank's full_from row, where the walk down from it
          // begins.
          prefetch(&st.full[ahead * st.k + static_cast<std::size_t>(st.pk[pack].level)]);
          if (prefetch_items) {
            // The places of its home rank and its own, which the trades and the compensating
            // pairs read in sequence (and no pack record of theirs): every line of their used
            // part.
            for (const std::size_t t : {st.src(pack), ahead}) {
              prefetch_lines(&st.items[t * st.k], st.used[t]);
            }
          }
        }
        if (by_level && dense) {
          // The settle, by level: the home rank's list head and away count at the pack's level
          // (the pack's record came in half the distance ago), then, a quarter of the distance
          // later, the first pack on that list: its record and its link, which every trade reads.
          // The home rank's row start and the level of the pack `ahead` visits on.
          const auto row_level = [&](std::size_t ahead) {
            const auto pack = static_cast<std::size_t>(away_[next + ahead]);
            return std::pair<std::size_t, std::size_t>{st.src(pack) * st.k,
                                                       static_cast<std::size_t>(st.pk[pack].level)};
          };
          if (next + state::prefetch_distance / 2 < visits) {
            const auto [row, l] = row_level(state::prefetch_distance / 2);
            prefetch(&st.at_level[row + l]);
            prefetch(&st.away_at[row + l]);
          }
          if (next + state::prefetch_distance / 4 < visits) {
            const auto [row, l] = row_level(state::prefetch_distance / 4);
            const std::int32_t q = st.at_level[row + l];
            if (q >= 0) {
              prefetch(&st.pk[static_cast<std::size_t>(q)]);
              prefetch(&st.next_at_level[static_cast<std::size_t>(q)]);
            }
          }
        }
        st.review_if_due(); // may abandon the search: then out of work
        if (st.out_of_work()) {
          return; // every trade so far kept the limits: stopping anywhere is safe
        }
        if (heaviest_first && pays.spent(st)) {
          break; // the pass has stopped paying: the next one, if any, starts over
        }
        ++st.work;
        const auto p = static_cast<std::size_t>(away_[next]);
        compensate_.visit(st, pairs_per_visit);
        const auto r = static_cast<std::size_t>(st.pk[p].rank);
        const std::size_t h = st.src(p);
        if (r == h) {
          continue;
        }
        home_trade best;
        bool found = false;
        const auto consider = [&](const home_trade& m) {
          if (m.delta < 0 && (!found || m.delta < best.delta)) {
            best = m;
            found = true;
          }
        };
        const std::int32_t p_level = st.pk[p].level;
        // Levels first: trading p for q keeps r's levels valid iff q's level is p's or r can
        // take it in p's place (st.full_from(r)[q level] >= p's level, which holds for the levels
        // from `lowest` up to p's, as full_from is non-decreasing), and keeps t's levels valid
        // iff q's level is at most st.full_from(t)[p's level] (see level_room). So each candidate
        // needs one range test, from the item's level beside it: most packs of another level
        // fail here (no slack), before q's record is read.
        std::int32_t lowest = -1; // read on first need: a quick trade (below) needs none
        const auto find_lowest = [&] {
          if (lowest >= 0) {
            return;
          }
          lowest = p_level;
          const std::int32_t* r_full = st.full_from(r);
          while (lowest > 0 && r_full[lowest - 1] >= p_level) {
            --lowest;
          }
          st.work += (p_level - lowest) / 16;
        };
        const bool quick = quick_ && crowded(st, static_cast<std::size_t>(p_level));
        const auto try_rank = [&](std::size_t t) {
          if (t == r) {
            return;
          }
          const std::int64_t p_delta =
              st.away(p, t) - st.away(p, r); // p's part of every trade here
          const std::int64_t p_cost = st.pk[p].cost;
          // may be k: then any level fits
          const auto highest =
              std::min<std::size_t>(st.k - 1, static_cast<std::size_t>(st.full_from(t)[p_level]));
          // q, of source rank hq, cost and bytes (from its place or its record).
          const auto trade = [&](std::size_t q, std::size_t hq, std::int64_t q_cost,
                                 std::int64_t q_bytes) {
            const std::int64_t delta = p_delta + (st.weight(hq, r) - st.weight(hq, t)) * q_bytes;
            if (delta >= 0 || (found && delta >= best.delta)) {
              return;
            }
            const std::int64_t d = p_cost - q_cost; // load moving from r to t
            const bool loads_fit = st.load[t] + d <= st.limit && st.load[r] - d <= st.limit;
            if (loads_fit) {
              consider({q, 0, 0, delta});
            } else if (t == h) { // compensation only for the trade that brings p home
              compensate_(st, t, r, p, q, d, delta, consider);
            }
          };
          // A quick trade: at a crowded tied level, in a dense settle by level, the pack t's row
          // holds at p's level (one away from home there), taken where it fits without
          // compensation. Reading t's levels instead costs a visit every pack t holds from the
          // lowest level p can be traded at up to the highest, at such a level some tens: the
          // settle's allowance (8 units a pack) then lasts a few hundred visits at 16,384 packs.
          // On the stress set (seeds 1-12 at 16,384 packs) eight fallbacks of `bimodal` 16 x
          // 1,024 at eps = 0 (its zero-cost packs, 51 a rank) move up to 0.086 of Karmarkar-Karp's
          // bytes fewer (seed 1: 0.472 instead of 0.558), one 0.003 more; with no search,
          // `multiples` 16 x 1,024 (some 70 packs a rank at each level) 0.08 instead of 0.94; no
          // batch of 262,144 packs changes. Tried from 2 packs a rank, `bimodal` 64 x 256 (13
          // zero-cost packs a rank), whose best trades are often at other levels, moved 0.01-0.02
          // more. O(1).
          if (quick) {
            ++st.work;
            const std::int32_t in_row =
                st.away_pack[t * st.k + st.spread_pos[static_cast<std::size_t>(p_level)]];
            if (in_row >= 0) {
              const auto q = static_cast<std::size_t>(in_row);
              trade(q, st.src(q), st.pk[q].cost, st.pk[q].bytes);
              if (found && best.q == q && best.u == best.v) {
                return;
              }
            }
          }
          find_lowest();
          // The levels a by-level walk reads: all those the trade may take, unless narrowed below.
          auto from = static_cast<std::size_t>(lowest);
          auto to = highest;
          if (t != h && mates_by_window) {
            // A rank of the home node other than h: its trades take no compensating pair, so
            // only a pack q whose cost lets both loads fit can trade, cost(q) in [cost(p) - room
            // of t, cost(p) + room of r]: only the levels whose costs meet that range are read
            // (`window_levels`), from the lists. By level that is the walk; with few levels it
            // tells whether t has any such pack, and only then are t's places read as for h,
            // so the same trades are weighed in the same order, for less work counted. (Reading
            // every level, or every place, of the node's ranks, whose trades rarely fit the loads
            // at eps = 0, `uniform` 256 x 64 on nodes of 8 ranks took 5.6 ms instead of 3.1, and
            // `vlm-pretrain` 4,096 x 64 136 ms instead of 102, with the same plans; where the
            // work bounds a settle, it now goes further. With 16 levels the lists cost more than
            // the places they spare at 262,144 packs and more, `pareto` 16,384 x 16 taking
            // 1.16-1.18 times as long, and the work they count moved searches (`pareto` 4,096 x
            // 16: 1.23 times the weighted bytes): from `mates_by_window_from` levels only.)
            const std::int64_t c_lo = p_cost - (st.limit - st.load[t]);
            const std::int64_t c_hi = p_cost + (st.limit - st.load[r]);
            std::tie(from, to) =
                window_levels(st, static_cast<std::size_t>(p_level), c_lo, c_hi, from, to);
            if (from > to) {
              return;
            }
            if (!by_level && !walk_levels(st, t, from, to, [&](std::size_t q) {
                  return st.pk[q].cost >= c_lo && st.pk[q].cost <= c_hi;
                })) {
              return;
            }
          }
          if (!by_level) {
            // t's places in sequence, passing over the packs home (trading one away gains
            // nothing in general) or of a level outside [lowest, highest]; no record is read.
            const state::item* t_items = &st.items[t * st.k];
            const std::size_t t_used = st.used[t];
            st.work += static_cast<std::int64_t>(t_used / 16 + 1);
            // The items that pass, listed first without a branch (which of them pass follows no
            // pattern a predictor learns), then traded in the same order.
            const auto lo = static_cast<std::uint32_t>(lowest);
            const auto width = static_cast<std::uint32_t>(highest) - lo; // highest >= lowest
            std::size_t m = 0;
            for (std::size_t i = 0; i < t_used; ++i) {
              passing_[m] = static_cast<std::int32_t>(i);
              m += static_cast<std::size_t>(static_cast<std::size_t>(t_items[i].home) != t) &
                   static_cast<std::size_t>(static_cast<std::uint32_t>(t_items[i].level) - lo <=
                                            width);
            }
            for (std::size_t j = 0; j < m; ++j) {
              const state::item& it = t_items[passing_[j]];
              ++st.work;
              trade(static_cast<std::size_t>(it.pack), static_cast<std::size_t>(it.home), it.cost,
                    it.bytes);
            }
            return;
          }
          walk_levels(st, t, from, to, [&](std::size_t q) {
            trade(q, st.src(q), st.pk[q].cost, st.pk[q].bytes);
            return false;
          });
        };
        try_rank(h);
        // With several nodes, ranks of p's home node are tried too, where no trade brings p
        // home: a trade that leaves p one hop from home forgoes the trades home that a later
        // visit would find (the search's bring-home visits each pack once). Trying them at every
        // visit and taking the best trade of all, over the stress grid of 16,384 packs on nodes
        // of 8 ranks (a byte across nodes weighing 4), moved 1.17 times the weighted bytes in the
        // geometric mean (182 of 1,170 batches moved fewer, by up to 6%; 317 more), and took the
        // time of the reads of every visit.
        if (!found && st.ranks.multi_node && st.ranks.node[r] != st.ranks.node[h]) {
          const auto node = static_cast<std::size_t>(st.ranks.node[h]);
          for (std::size_t i = st.node_start[node]; i < st.node_start[node + 1]; ++i) {
            if (st.node_ranks[i] != h) {
              try_rank(st.node_ranks[i]);
            }
          }
        }
        if (found) {
          pays.gained -= best.delta;
          st.swap_packs(p, best.q);
          if (best.u != best.v) {
            st.swap_packs(best.u, best.v);
          }
          changed = true;
        }
      }
      if (!changed) {
        break;
      }
    }
  }

 private:
  // Rank t's packs away from home at levels [from, to], from the level lists, each passed to
  // `fn` until it returns true; returns whether it did. The level rows are read in sequence, 16
  // to a cache line: counted as such, and the packs of a level all home as if read. O((to -
  // from) / 16 + 1 + the packs read).
  template <class Fn>
  static bool walk_levels(state& st, std::size_t t, std::size_t from, std::size_t to, Fn&& fn) {
    st.work += static_cast<std::int64_t>(to + 16 - from) / 16;
    for (std::size_t l = from; l <= to; ++l) {
      if (st.away_at[t * st.k + l] == 0) { // all home: counted, not read
        st.work += st.cnt[t * st.k + l];
        continue;
      }
      for (std::int32_t next_q = st.at_level[t * st.k + l]; next_q >= 0;) {
        const auto q = static_cast<std::size_t>(next_q);
        next_q = st.next_at_level[q];
        ++st.work;
        if (st.src(q) != t && fn(q)) {
          return true;
        }
      }
    }
    return false;
  }

  // The levels within [lowest, highest] whose costs meet [c_lo, c_hi], as [from, to] (from > to
  // where none can): levels run from the dearest packs to the cheapest, so they are those from
  // the pack's own level (which holds cost(p), in that range) up while the dearer level's
  // cheapest pack is at most c_hi, and down while the cheaper level's dearest is at least c_lo
  // (a level with no packs is passed over). O(1) per level in the range.
  static std::pair<std::size_t, std::size_t> window_levels(const state& st, std::size_t l,
                                                           std::int64_t c_lo, std::int64_t c_hi,
                                                           std::size_t lowest,
                                                           std::size_t highest) {
    if (c_lo > c_hi) {
      return {1, 0};
    }
    const auto empty = [&](std::size_t j) { return st.level_end[j] == st.level_begin[j]; };
    std::size_t from = l;
    while (from > lowest && (empty(from - 1) || st.sorted_cost[st.level_begin[from - 1]] <= c_hi)) {
      --from;
    }
    std::size_t to = l;
    while (to < highest && (empty(to + 1) || st.sorted_cost[st.level_end[to + 1] - 1] >= c_lo)) {
      ++to;
    }
    return {from, to};
  }

  // Whether level l is a crowded tied level: `quick_level_packs` packs a rank or more, as costs
  // from a few values give (a fixed-resolution encoder; levels of equal caps share their packs).
  // O(1).
  static bool crowded(const state& st, std::size_t l) {
    return st.level_end[l] - st.level_begin[l] >= quick_level_packs * st.dp;
  }

  // Whether some level is crowded. O(k).
  static bool crowded_level(const state& st) {
    for (std::size_t l = 0; l < st.k; ++l) {
      if (crowded(st, l)) {
        return true;
      }
    }
    return false;
  }

  // away_: the packs away from home (internal ids) in input order. One pass over the records in
  // their own order marks them by input id; one pass over the marks lists them.
  void list_away(const state& st) {
    auto& mark = away_mark_;
    mark.resize(st.n);
    for (std::size_t p = 0; p < st.n; ++p) {
      mark[static_cast<std::size_t>(st.input_id[p])] = st.pk[p].rank != st.pk[p].home ? 1 : 0;
    }
    away_.resize(st.n);
    std::size_t m = 0;
    for (std::size_t next = 0; next < st.n; ++next) {
      away_[m] = st.internal_id[next]; // kept only if marked: no branch to mispredict
      m += static_cast<std::size_t>(mark[next]);
    }
    away_.resize(m);
  }

  // away_: the packs away from home (internal ids), heaviest first: by weighted bytes away in
  // buckets of a quarter octave (the bit width and the two bits below the top one), the
  // heaviest bucket first, in input order within each. Where the settle's allowance ends
  // mid-pass, the visits it makes are those that can bring the most home; with few levels a
  // visit reads all the places of the home rank whatever the pack, so it costs about the
  // same whichever is visited. A counting sort: O(n + buckets).
  void list_away_heaviest(const state& st) {
    auto& bucket = away_mark_;
    bucket.resize(st.n);
    for (std::size_t p = 0; p < st.n; ++p) {
      const auto& k = st.pk[p];
      std::uint8_t b = 0; // home: not listed
      if (k.rank != k.home) {
        const auto w = static_cast<std::uint64_t>(st.away(p, static_cast<std::size_t>(k.rank)));
        const int bits = bit_width_of(w); // <= 63: weighted bytes are non-negative int64
        const int below = bits > 2 ? static_cast<int>((w >> (bits - 3)) & 3u) : 0;
        // 1 (heaviest) to 255; the two top quarters of bit width 63 share bucket 1.
        b = static_cast<std::uint8_t>(away_buckets - std::min(bits * 4 + below, 254));
      }
      bucket[static_cast<std::size_t>(st.input_id[p])] = b;
    }
    std::size_t start[away_buckets + 1] = {};
    for (std::size_t i = 0; i < st.n; ++i) {
      ++start[bucket[i]];
    }
    std::size_t m = 0;
    for (int b = 1; b <= away_buckets; ++b) {
      const std::size_t c = start[b];
      start[b] = m;
      m += c;
    }
    away_.resize(m);
    for (std::size_t i = 0; i < st.n; ++i) {
      if (bucket[i] != 0) {
        away_[start[bucket[i]]++] = st.internal_id[i];
      }
    }
  }

  // Packs a rank at a level from which a dense settle tries a quick trade there (see run()).
  static constexpr std::size_t quick_level_packs = 32;
  static constexpr std::size_t scan_items_up_to = 64;        // levels; see run()
  static constexpr std::size_t settle_scan_items_up_to = 16; // levels, in large settles; see run()
  static constexpr std::size_t settle_by_level_from = 8192;  // packs; see run()
  static constexpr std::size_t capped_settle_from = 8192;    // packs; see run()
  static constexpr std::size_t prefetch_settle_from = 65536; // packs; see run()
  static constexpr std::size_t rows_settle_up_to = 65536;    // packs, with few levels; see run()
  static constexpr std::int32_t settle_pairs = 8;            // per visit; see run()
  static constexpr std::size_t mates_by_window_from = 32;    // levels; see try_rank in run()

  static_assert(scan_items_up_to <= compensating_pairs::items_up_to);
  std::int32_t passing_[scan_items_up_to]; // items of a rank that a trade may take; see run()
  compensating_pairs compensate_;          // see compensate.hpp
  bool quick_ = false;                     // quick trades at tied levels: see run()
  std::vector<std::int32_t> away_;         // see list_away
  std::vector<std::uint8_t> away_mark_;    // by input id: see list_away and list_away_heaviest
  static constexpr int away_buckets = 255; // see list_away_heaviest
};

} // namespace packswap::detail::stage2
