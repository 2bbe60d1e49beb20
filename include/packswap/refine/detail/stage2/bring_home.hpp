#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 5: bring home. Trades packs away from home for packs their home rank holds for
/// others, where that moves fewer weighted bytes.
///
/// Every trade keeps every rank within the limit and its level constraints, and lowers the
/// weighted moved bytes; no trade sends a pack away from home.
///
/// Complexity: per pass, one pass over the records, then per pack away from home O(k) over its
/// home rank's packs (times the ranks of the home node with several nodes), plus O(k) per
/// compensating candidate: O(n k) at worst per pass.
class bring_home_phase {
 public:
  // (4) For every pack p away from home, trade it for a pack q its home rank h holds for somebody
  // else, when fewer weighted bytes move, levels stay valid and both loads stay within the limit.
  // When the loads would not, a second, compensating trade between the same two ranks may carry
  // the difference back: two packs u (on h) and v (on p's rank) of one level, both away from
  // home, so moving them again costs nothing. With several nodes, ranks on p's home node are
  // tried as partners too: a pack one hop from home inside its node is cheaper than one across.
  void run(state& st, const tuning& tune) {
    // Every rank's st.full up to date in one sequential pass, rather than rebuilt on first use
    // from a st.cnt line fetched at random.
    for (std::size_t r = 0; r < st.dp; ++r) {
      st.full_from(r);
    }
    // Largest cost difference within each level: its top quantile less its bottom one.
    std::vector<std::int64_t> level_spread = st.level_quantile(1000);
    {
      const auto cheapest = st.level_quantile(0);
      for (std::size_t l = 0; l < st.k; ++l) {
        level_spread[l] -= cheapest[l];
      }
    }
    for (std::int32_t pass = 0; pass < tune.home_passes; ++pass) {
      bool changed = false;
      // In input order: batches list each rank's packs together, so consecutive packs share a
      // home rank and its items stay in cache. Only packs away from home now need a visit: no
      // trade below sends a pack away from home (each moves packs that are away already, or
      // brings one home), so those visited are those the full walk would not skip, and the
      // records of the packs already home are never fetched.
      list_away(st);
      const std::size_t visits = away_.size();
      // Records of packs a few steps ahead are fetched early: input order is random in the
      // internal numbering.
      for (std::size_t next = 0; next < visits; ++next) {
        if (next + state::prefetch_distance < visits) {
          prefetch(&st.pk[static_cast<std::size_t>(away_[next + state::prefetch_distance])]);
        }
        if (next + state::prefetch_distance / 2 < visits) {
          // Fetched half the distance ago: its rank's state can be fetched now.
          const auto ahead = static_cast<std::size_t>(
              st.pk[static_cast<std::size_t>(away_[next + state::prefetch_distance / 2])].rank);
          prefetch(&st.load[ahead]);
          prefetch(&st.full[ahead * st.k]);
        }
        const auto p = static_cast<std::size_t>(away_[next]);
        const auto r = static_cast<std::size_t>(st.pk[p].rank);
        const std::size_t h = st.src(p);
        if (r == h) {
          continue;
        }
        struct move {
          std::size_t q = 0, u = 0, v = 0; // u == v: no compensating trade
          std::int64_t delta = 0;
        } best;
        bool found = false;
        const auto consider = [&](const move& m) {
          if (m.delta < 0 && (!found || m.delta < best.delta)) {
            best = m;
            found = true;
          }
        };
        bool indexed = false;
        const std::int32_t p_level = st.pk[p].level;
        // Levels first: trading p for q keeps r's levels valid iff q's level is p's or r can
        // take it in p's place (st.full_from(r)[q level] >= p's level, which holds for the levels
        // from `lowest` up to p's, as full_from is non-decreasing), and keeps t's levels valid
        // iff q's level is at most st.full_from(t)[p's level] (see level_room). So each candidate
        // needs one range test, from the item's level beside it: most packs of another level
        // fail here (no slack), before q's record is read.
        std::int32_t lowest = p_level;
        {
          const std::int32_t* r_full = st.full_from(r);
          while (lowest > 0 && r_full[lowest - 1] >= p_level) {
            --lowest;
          }
        }
        const auto try_rank = [&](std::size_t t) {
          if (t == r) {
            return;
          }
          const std::int64_t p_delta =
              st.away(p, t) - st.away(p, r); // p's part of every trade here
          const std::int64_t p_cost = st.pk[p].cost;
          const std::int32_t* t_items = &st.items[t * st.k];
          const std::int32_t* t_homes = &st.item_home[t * st.k];
          const std::int32_t* t_levels = &st.item_level[t * st.k];
          const std::int32_t highest = st.full_from(t)[p_level]; // may be k: then any level fits
          const std::size_t t_used = st.used[t];                 // no trade below changes it
          for (std::size_t i = 0; i < t_used; ++i) {
            const auto hq = static_cast<std::size_t>(t_homes[i]);
            const std::int32_t q_level = t_levels[i];
            if (hq == t || q_level < lowest || q_level > highest) {
              continue; // home (trading it away gains nothing in general), or no level room
            }
            // q's part of the byte change is its bytes times a weight its home rank decides;
            // where that weight is zero, the change is known before q's record is read.
            const std::int64_t q_weight = st.weight(hq, r) - st.weight(hq, t);
            if (q_weight == 0 && (p_delta >= 0 || (found && p_delta >= best.delta))) {
              continue;
            }
            const auto q = static_cast<std::size_t>(t_items[i]);
            const std::int64_t delta = p_delta + q_weight * st.pk[q].bytes;
            if (delta >= 0 || (found && delta >= best.delta)) {
              continue;
            }
            const std::int64_t d = p_cost - st.pk[q].cost; // load moving from r to t
            const bool loads_fit = st.load[t] + d <= st.limit && st.load[r] - d <= st.limit;
            // Compensation only for the trade that brings p home.
            if (!loads_fit && t != h) {
              continue;
            }
            if (loads_fit) {
              consider({q, 0, 0, delta});
              continue;
            }
            // A same-level trade u (on t) <-> v (on r) moving e back from t to r; v is r's
            // away-from-home pack of u's level, looked up in `movable_`. Both loads fit iff e
            // lies in [e_lo, e_hi]; u and v share a level, so |e| is at most that level's
            // spread: u of a level whose spread cannot reach the range is passed over before
            // any record is read, and r's packs are indexed only if some u remains.
            const std::int64_t e_lo = st.load[t] + d - st.limit;
            const std::int64_t e_hi = st.limit - st.load[r] + d;
            const auto can_compensate = [&](std::size_t a) {
              const std::int64_t spread = level_spread[static_cast<std::size_t>(t_levels[a])];
              return static_cast<std::size_t>(t_items[a]) != q &&
                     static_cast<std::size_t>(t_homes[a]) != t && e_lo <= spread && e_hi >= -spread;
            };
            bool any = false;
            for (std::size_t a = 0; a < t_used && !any; ++a) {
              any = can_compensate(a);
            }
            if (!any) {
              continue;
            }
            if (!indexed) {
              index_movable(st, r, p);
              indexed = true;
            }
            for (std::size_t a = 0; a < t_used; ++a) {
              if (!can_compensate(a)) {
                continue;
              }
              const auto u = static_cast<std::size_t>(t_items[a]);
              const std::int64_t vv = movable_[static_cast<std::size_t>(t_levels[a])];
              if (vv < 0) {
                continue;
              }
              const auto v = static_cast<std::size_t>(vv);
              const std::int64_t e = st.pk[u].cost - st.pk[v].cost;
              if (e < e_lo || e > e_hi) {
                continue;
              }
              consider({q, u, v, delta + st.swap_delta(u, t, v, r)});
            }
          }
        };
        try_rank(h);
        if (st.multi_node && st.node[r] != st.node[h]) {
          const auto node = static_cast<std::size_t>(st.node[h]);
          for (std::size_t i = st.node_start[node]; i < st.node_start[node + 1]; ++i) {
            if (st.node_ranks[i] != h) {
              try_rank(st.node_ranks[i]);
            }
          }
        }
        if (found) {
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

  // movable_[l]: a pack of level l on rank r that is away from home (other than `skip`), or -1.
  void index_movable(const state& st, std::size_t r, std::size_t skip) {
    movable_.assign(st.k, -1);
    // Levels from st.item_level: no pack record is read.
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const auto v = static_cast<std::size_t>(st.items[r * st.k + i]);
      if (v != skip && static_cast<std::size_t>(st.item_home[r * st.k + i]) != r) {
        movable_[static_cast<std::size_t>(st.item_level[r * st.k + i])] =
            static_cast<std::int64_t>(v);
      }
    }
  }

  std::vector<std::int64_t> movable_; // see index_movable
  std::vector<std::int32_t> away_;    // see list_away
  std::vector<char> away_mark_;
};

} // namespace packswap::detail::stage2
