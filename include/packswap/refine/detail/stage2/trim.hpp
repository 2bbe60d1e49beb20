#pragma once

#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 4b: trim, after a repair that fails with a few ranks just above the limit.
/// Clears each such rank's excess with one swap, or two, with one partner: packs of one level
/// traded, so that every rank keeps its level counts, carrying a load that fits the partner.
///
/// Where costs have no common step (a measured or fitted cost model) and the limit is stage 1's
/// B (eps = 0), Karmarkar-Karp leaves the ranks' loads within a few units of one another, and a
/// search that keeps most packs home can end with a few ranks above the limit by a millionth of it
/// or less. A single swap rarely carries so little (two packs of one level seldom differ by so
/// little, and the repair's candidates are few), so the repair gives up and the fallback, stage 1
/// renamed, moves up to three times the bytes. The difference of two cost differences with one
/// partner covers a narrow range far more densely: with k pairs of packs, about k^2 sums.
/// Each trim keeps the partner within the limit, so the total excess only falls, and any prefix
/// of the trims keeps every limit the repair had kept.
///
/// Only where at most `max_ranks` ranks are above the limit, no rank crowds a level, and no
/// rank's excess is above the spread (dearest less cheapest pack) of a sixteenth of the levels:
/// larger excesses need the few widest levels, where the trims seldom succeed (on the stress set,
/// none did, and each failure spent up to 0.17 M units).
///
/// Complexity: per trim, for P partners: O(dp log P) to rank them, then per partner O(u + k) to
/// list two packs a level of each rank (u packs a rank), O(m log m) to sort the m <= 4 k pairs
/// of packs by the load they carry, and O(m (log m + w)) for the pairs of swaps (w second swaps
/// read per first); at most `max_rounds` trims a rank. Counted as work; no partner is read past
/// the work limit.
class trim_phase {
 public:
  // Whether every rank ends within the limit: the ranks above it trimmed, the heaviest first,
  // each with the partners with the most room first. False where the trim does not apply (see
  // above), at a rank no partner helps, or where the work a partner needs would pass the work
  // limit (the trims already made keep the limits).
  bool run(state& st) {
    over_.clear();
    // The excess one swap at a sixteenth of the levels can carry (their spread, the level's
    // dearest pack less its cheapest, is at least this much).
    const std::int64_t carried = st.widest_spread[std::min(st.k - 1, st.k / 16)];
    for (std::size_t r = 0; r < st.dp; ++r) {
      if (st.level_excess(r) > 0 || st.excess(r) > carried) {
        return false;
      }
      if (st.excess(r) > 0) {
        over_.push_back(r);
        if (over_.size() > max_ranks) {
          return false;
        }
      }
    }
    if (over_.empty()) {
      return false;
    }
    // The largest excess first, while the partners have the most room (ties by rank).
    std::sort(over_.begin(), over_.end(), [&](std::size_t x, std::size_t y) {
      return st.load[x] > st.load[y] || (st.load[x] == st.load[y] && x < y);
    });
    for (const std::size_t r : over_) {
      for (std::int32_t round = 0; st.excess(r) > 0; ++round) {
        if (round == max_rounds || !trim(st, r)) {
          return false;
        }
      }
    }
    return true;
  }

 private:
  // One same-level swap: pack a (on the rank trimmed) for pack b (on the partner), which moves
  // d = cost(a) - cost(b) of load to the partner and changes the weighted bytes by `delta`.
  struct swap {
    std::int64_t d = 0, delta = 0;
    std::int32_t a = 0, b = 0;
  };
  // A trim: one or two swaps (second.a < 0: one), the excess it leaves on r, its bytes.
  struct pick {
    std::int64_t left = 0, delta = 0;
    swap first, second;
  };

  // One trim of rank r: the best over its partners (least excess left, then fewest weighted
  // bytes, then partner and packs, so every rank picks the same). False when none lowers r's
  // excess.
  bool trim(state& st, std::size_t r) {
    if (st.work + static_cast<std::int64_t>(st.dp / 16 + 1) + list_work(st, r) > st.work_limit) {
      return false;
    }
    rank_partners(st, r);
    list(st, r, mine_);
    st.work += list_work(st, r);
    bool found = false;
    pick best;
    std::size_t best_t = 0;
    // The most work best_with() counts for a partner's m <= 4 k pairs, beside its list: no trim
    // passes the limit.
    const auto most = static_cast<std::int64_t>(4 * st.k);
    const std::int64_t most_work = most * (2 + width + log2_up(4 * st.k) / 4);
    for (const std::size_t t : partners_) {
      if (st.work + list_work(st, t) + most_work > st.work_limit) {
        break; // the trims already made keep the limits
      }
      pick p;
      if (best_with(st, r, t, p)) {
        if (!found || std::tie(p.left, p.delta, t, p.first.a, p.first.b, p.second.a) <
                          std::tie(best.left, best.delta, best_t, best.first.a, best.first.b,
                                   best.second.a)) {
          best = p;
          best_t = t;
          found = true;
        }
        if (best.left == 0 && best.delta <= 0) {
          break; // nothing a later partner gives can be better in both
        }
      }
    }
    if (!found) {
      return false;
    }
    st.swap_packs(static_cast<std::size_t>(best.first.a), static_cast<std::size_t>(best.first.b));
    if (best.second.a >= 0) {
      st.swap_packs(static_cast<std::size_t>(best.second.a),
                    static_cast<std::size_t>(best.second.b));
    }
    return true;
  }

  // partners_: the ranks other than r with room below the limit, the most room first (ties by
  // rank), at most `max_partners`.
  void rank_partners(state& st, std::size_t r) {
    room_.clear();
    for (std::size_t t = 0; t < st.dp; ++t) {
      if (t != r && st.load[t] < st.limit) {
        room_.emplace_back(st.limit - st.load[t], t);
      }
    }
    const auto keep = std::min(room_.size(), max_partners);
    std::partial_sort(room_.begin(), room_.begin() + static_cast<std::ptrdiff_t>(keep), room_.end(),
                      [](const auto& x, const auto& y) {
                        return x.first > y.first || (x.first == y.first && x.second < y.second);
                      });
    partners_.clear();
    for (std::size_t i = 0; i < keep; ++i) {
      partners_.push_back(room_[i].second);
    }
    st.work += static_cast<std::int64_t>(st.dp / 16 + 1);
  }

  // Work of list() for rank r: its places read twice in sequence, and the slots written.
  static std::int64_t list_work(const state& st, std::size_t r) {
    return static_cast<std::int64_t>((2 * st.used[r] + 2 * st.k) / 16 + 1);
  }

  // Up to two packs of each level of rank r, those away from home first (a swap moving them again
  // costs nothing in general), by place: out[2 l] and out[2 l + 1], -1 where none. O(u + k).
  static void list(const state& st, std::size_t r, std::vector<std::int32_t>& out) {
    out.assign(2 * st.k, -1);
    const state::item* items = &st.items[r * st.k];
    for (const bool away : {true, false}) {
      for (std::size_t i = 0; i < st.used[r]; ++i) {
        if ((static_cast<std::size_t>(items[i].home) != r) != away) {
          continue;
        }
        std::int32_t* slot = &out[2 * static_cast<std::size_t>(items[i].level)];
        if (slot[0] < 0) {
          slot[0] = items[i].pack;
        } else if (slot[1] < 0) {
          slot[1] = items[i].pack;
        }
      }
    }
  }

  // The best trim of r with partner t into `out`: a swap whose load fits t's room and clears r's
  // excess, or two whose loads together do, or else the swap that lowers r's excess the most.
  bool best_with(state& st, std::size_t r, std::size_t t, pick& out) {
    list(st, t, theirs_);
    st.work += list_work(st, t);
    const std::int64_t need = st.excess(r);
    const std::int64_t room = st.limit - st.load[t];
    swaps_.clear();
    for (std::size_t l = 0; l < st.k; ++l) {
      for (std::size_t i = 0; i < 2; ++i) {
        const std::int32_t a = mine_[2 * l + i];
        for (std::size_t j = 0; a >= 0 && j < 2; ++j) {
          const std::int32_t b = theirs_[2 * l + j];
          if (b < 0) {
            continue;
          }
          const auto ua = static_cast<std::size_t>(a);
          const auto ub = static_cast<std::size_t>(b);
          const std::int64_t d = st.pk[ua].cost - st.pk[ub].cost;
          if (d != 0) {
            swaps_.push_back({d, st.swap_delta(ua, r, ub, t), a, b});
          }
        }
      }
    }
    // A unit per pair weighed and per second swap read, and a quarter per comparison of the
    // sort and per step of each search in it.
    const auto m = static_cast<std::int64_t>(swaps_.size());
    st.work += m * (2 + log2_up(swaps_.size()) / 4);
    std::sort(swaps_.begin(), swaps_.end(), [](const swap& x, const swap& y) {
      return std::tie(x.d, x.delta, x.a, x.b) < std::tie(y.d, y.delta, y.a, y.b);
    });
    bool found = false;
    const auto consider = [&](const pick& p) {
      if (!found || std::tie(p.left, p.delta, p.first.a, p.first.b, p.second.a) <
                        std::tie(out.left, out.delta, out.first.a, out.first.b, out.second.a)) {
        out = p;
        found = true;
      }
    };
    const auto by_d = [](const swap& x, std::int64_t v) { return x.d < v; };
    const std::int64_t lo = room >= need ? need : (room + 1) / 2;
    for (const swap& s : swaps_) {
      if (s.d > 0 && s.d <= room) { // one swap: clears r, or lowers its excess
        consider({std::max<std::int64_t>(0, need - s.d), s.delta, s, swap{0, 0, -1, -1}});
      }
      // A second swap with d in [lo - s.d, room - s.d]: the pair clears r (or, where t has
      // less room than r's excess, carries at least half that room) and fits t. The first
      // `width` of them read; each pair is met from both sides.
      auto it = std::lower_bound(swaps_.begin(), swaps_.end(), lo - s.d, by_d);
      for (std::int32_t read = 0; it != swaps_.end() && it->d <= room - s.d && read < width;
           ++it, ++read) {
        ++st.work;
        if (it->a == s.a || it->b == s.b) { // s itself, or a pack it trades
          continue;
        }
        consider({std::max<std::int64_t>(0, need - s.d - it->d), s.delta + it->delta, s, *it});
      }
    }
    return found && out.left < need;
  }

  // The bits of v - 1: log2(v) rounded up, 0 for v <= 1.
  static std::int64_t log2_up(std::size_t v) { return v < 2 ? 0 : bit_width_of(v - 1); }

  static constexpr std::size_t max_ranks = 32;   // above the limit; more: no trim
  static constexpr std::size_t max_partners = 8; // tried per trim
  static constexpr std::int32_t max_rounds = 8;  // trims per rank
  static constexpr std::int32_t width = 8;       // second swaps read per first swap

  std::vector<std::size_t> over_, partners_;
  std::vector<std::pair<std::int64_t, std::size_t>> room_;
  std::vector<std::int32_t> mine_, theirs_;
  std::vector<swap> swaps_;
};

} // namespace packswap::detail::stage2
