#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// Stage 2, phase 4: repair. Swaps packs until no rank is above the limit or crowds a level.
///
/// Every swap lowers the total excess (load above the limit, summed over ranks) or, on a rank
/// that crowds a level, moves a pack at or below its lowest crowded level out for one above it;
/// swaps keep every other rank's level constraints. Returns false, naming the rank, when no swap
/// helps a rank, or when out of swaps.
///
/// Complexity: per step O(k) to find the rank's state, O(m k log k) to pair its packs with the m
/// roomiest ranks' (a sort of each partner's packs and a binary search per pack), O(k s) through
/// the cost index (s entries per pack), and, when none of those holds a full fix, every cheaper
/// pack of the m partners (O(m k^2)). Up to 2n + 16 steps.
class repair_phase {
 public:
  // (3) Lowers every rank to the limit and fixes crowded levels. The worst rank goes first; its
  // partner is sought among the ranks with the most room (every pair of their packs), then, if
  // none fits, through the cost index across all ranks.
  // Returns false when out of swaps (`stuck` stays dp) or when no swap helps rank `stuck`. With
  // `tuning::chains`, a rank no single swap helps tries two swaps in a chain (`chain_step`)
  // first, up to `tuning::chain_steps` times.
  bool run(state& st, const tuning& t, std::size_t& stuck) {
    tuning_ = t;
    const std::int64_t budget =
        static_cast<std::int64_t>(st.n) * tuning_.repair_swaps_per_pack + 16;
    std::int64_t swaps = 0;
    std::int32_t chains_left = tuning_.chains ? tuning_.chain_steps : 0;
    // Lazy max-heaps: entries whose key no longer matches the rank's state are skipped.
    auto& over = over_heap_;
    over.clear();
    room_heap_.clear();
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
      if (++swaps > budget) {
        return false;
      }
      std::size_t other = st.dp;
      std::size_t third = st.dp; // a chain's last rank
      if (!repair_step(st, r, other)) {
        if (chains_left == 0 || !chain_step(st, r, other, third)) {
          stuck = r;
          return false;
        }
        --chains_left;
      }
      for (const std::size_t changed : {r, other, third}) {
        if (changed == st.dp) {
          continue;
        }
        const std::int64_t k2 = over_key(st, changed);
        if (k2 > 0) {
          over.emplace(k2, -static_cast<std::int64_t>(changed));
        }
        if (st.load[changed] < st.limit) {
          room_heap_.emplace(st.limit - st.load[changed], -static_cast<std::int64_t>(changed));
        }
      }
    }
    return true;
  }

 private:
  // Order of repair: crowded levels first (they block everything), then load excess.
  static std::int64_t over_key(const state& st, std::size_t r) {
    const std::int64_t crowd = st.level_excess(r);
    return crowd > 0 ? (std::int64_t{1} << 62) + crowd : st.excess(r);
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

  // Full fixes first, then least moved bytes, then most excess removed, then ids.
  static bool better(const candidate& a, const candidate& b) {
    return std::tie(b.full, a.delta, b.gain, a.x, a.y) <
           std::tie(a.full, b.delta, a.gain, b.x, b.y);
  }

  // One swap that lowers rank r's excess (levels first, then load). Sets `other` to the partner.
  bool repair_step(state& st, std::size_t r, std::size_t& other) {
    const std::int64_t exc = st.excess(r);
    const bool crowded = st.level_excess(r) > 0;
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
    const auto consider = [&](std::size_t x, std::size_t y) {
      const auto s2 = static_cast<std::size_t>(st.pk[y].rank);
      if (s2 == r) {
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
      c.delta = st.swap_delta(x, r, y, s2);
      c.x = x;
      c.y = y;
      // The level check is the costly part: only for a candidate that would win.
      if ((found && !better(c, best)) || !st.level_room(s2, st.pk[x].level, st.pk[y].level)) {
        return;
      }
      best = c;
      found = true;
    };
    // A full fix that moves no more bytes cannot be beaten by much: stop looking.
    const auto settled = [&] { return found && best.full == 1 && best.delta <= 0; };
    // Every pair of packs between r and the roomiest ranks. Outside level repairs a full fix
    // (which beats every partial one) moves d = cost(x) - cost(y) in [excess of r, room of the
    // partner]: those pairs go first, and the rest only if neither they nor the cost index hold
    // a fix. Same answer as considering every pair, with far fewer candidates.
    roomiest(st, static_cast<std::size_t>(tuning_.roomy_partners), r, scratch_ranks_);
    const auto pairs = [&](bool full_only) {
      for (const std::size_t s2 : scratch_ranks_) {
        if (settled()) {
          break;
        }
        const std::int64_t room = st.limit - st.load[s2];
        // The partner's packs, read once: (cost, level) beside the id.
        const std::size_t s2_used = st.used[s2];
        partner_.resize(s2_used);
        for (std::size_t j = 0; j < s2_used; ++j) {
          const auto y = static_cast<std::size_t>(st.items[s2 * st.k + j]);
          partner_[j] = {st.pk[y].cost, st.pk[y].level, static_cast<std::int32_t>(y)};
        }
        // Outside level repairs only a cheaper y can help (a full fix: cost within
        // [cost(x) - room, cost(x) - excess]); sorted by cost, those form one range per x.
        // The order of candidates does not matter: the best under `better` wins.
        if (!crowded) {
          std::sort(partner_.begin(), partner_.end(), [](const auto& a, const auto& b) {
            return a.cost < b.cost || (a.cost == b.cost && a.id < b.id);
          });
        }
        for (std::size_t i = 0; i < st.used[r]; ++i) {
          const auto x = static_cast<std::size_t>(st.items[r * st.k + i]);
          const std::int32_t x_level = st.pk[x].level;
          const std::int64_t x_cost = st.pk[x].cost;
          // Without slack at x's level only a pack of the same level can take its place.
          const bool same_level_only = !crowded && st.slack[static_cast<std::size_t>(x_level)] == 0;
          auto first = partner_.begin();
          auto last = partner_.end();
          if (!crowded) {
            const std::int64_t lo =
                full_only ? x_cost - room : std::numeric_limits<std::int64_t>::min();
            const std::int64_t hi = full_only ? x_cost - exc : x_cost - 1;
            first = std::lower_bound(partner_.begin(), partner_.end(), lo,
                                     [](const auto& y, std::int64_t c) { return y.cost < c; });
            last = std::upper_bound(first, partner_.end(), hi,
                                    [](std::int64_t c, const auto& y) { return c < y.cost; });
          }
          for (auto y = first; y < last; ++y) {
            if (!same_level_only || y->level == x_level) {
              consider(x, static_cast<std::size_t>(y->id));
            }
          }
        }
      }
    };
    // The cost index only when no partner among the roomiest fixes r outright: it is the
    // expensive part of a step, and most steps find their fix among the roomy ranks.
    if (crowded) {
      pairs(false);
      if (!found || best.full == 0) {
        index_search(st, r, exc, crowded, consider);
      }
    } else {
      pairs(true);
      if (!found) {
        // The partial fixes among the roomiest only when the cost index holds no full fix
        // either: a full fix beats every partial one, and the index finds one in most steps.
        index_search(st, r, exc, crowded, consider);
        if (!found || best.full == 0) {
          pairs(false);
        }
      }
    }
    if (!found) {
      return false;
    }
    other = static_cast<std::size_t>(st.pk[best.y].rank);
    st.swap_packs(best.x, best.y);
    return true;
  }

  // Calls f(y) for the packs y of x's level that cost less than x, among the `width` nearest
  // each side of cost `want` in the cost index (each level is one stretch of it).
  template <class F>
  static void same_level_below(const state& st, std::size_t x, std::int64_t want, std::size_t width,
                               F&& f) {
    const auto level = static_cast<std::size_t>(st.pk[x].level);
    const auto first = st.sorted_cost.begin() + static_cast<std::ptrdiff_t>(st.level_begin[level]);
    const auto last = st.sorted_cost.begin() + static_cast<std::ptrdiff_t>(st.level_end[level]);
    const auto split =
        static_cast<std::size_t>(std::upper_bound(first, last, want) - st.sorted_cost.begin());
    const std::size_t from = std::max(st.level_begin[level], split > width ? split - width : 0);
    const std::size_t to = std::min(st.level_end[level], split + width);
    for (std::size_t i = from; i < to; ++i) {
      const auto y = static_cast<std::size_t>(st.by_cost(i));
      if (st.pk[y].cost < st.pk[x].cost) {
        f(y);
      }
    }
  }

  // For a rank r above the limit that no single swap helps: two swaps in a chain, x (on r) for a
  // cheaper y of its level on s1, then x2 (on s1, now over) for a cheaper y2 of x2's level on s2,
  // that together lower the excess of the three ranks. Same-level swaps keep every rank's level
  // counts. Candidates come from the cost index near the difference each swap must carry; the
  // chain ending with the least excess wins, then the fewest weighted bytes, then ids. Each first
  // swap is tried in place and undone. Sets `s1` and `s2` to the partners.
  bool chain_step(state& st, std::size_t r, std::size_t& s1_out, std::size_t& s2_out) {
    const std::int64_t exc = st.excess(r);
    if (exc == 0 || st.level_excess(r) > 0) {
      return false;
    }
    const auto width = static_cast<std::size_t>(tuning_.scan_limit);
    struct chain {
      std::int64_t after = 0, delta = 0;
      std::size_t x = 0, y = 0, x2 = 0, y2 = 0;
    } best;
    bool found = false;
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const auto x = static_cast<std::size_t>(st.items[r * st.k + i]); // restored after each try
      same_level_below(st, x, st.pk[x].cost - exc, width, [&](std::size_t y) {
        const auto s1 = static_cast<std::size_t>(st.pk[y].rank);
        if (s1 == r) {
          return;
        }
        const std::int64_t before_1 = exc + st.excess(s1);
        const std::int64_t delta_1 = st.swap_delta(x, r, y, s1);
        st.swap_packs(x, y);
        const std::int64_t pushed = st.excess(s1);
        for (std::size_t j = 0; pushed > 0 && j < st.used[s1]; ++j) {
          const auto x2 = static_cast<std::size_t>(st.items[s1 * st.k + j]);
          same_level_below(st, x2, st.pk[x2].cost - pushed, width, [&](std::size_t y2) {
            const auto s2 = static_cast<std::size_t>(st.pk[y2].rank);
            if (s2 == r || s2 == s1) {
              return;
            }
            const std::int64_t d = st.pk[x2].cost - st.pk[y2].cost;
            const std::int64_t after = st.excess(r) +
                                       std::max<std::int64_t>(0, st.load[s1] - d - st.limit) +
                                       std::max<std::int64_t>(0, st.load[s2] + d - st.limit);
            if (after >= before_1 + st.excess(s2)) {
              return;
            }
            const chain c{after, delta_1 + st.swap_delta(x2, s1, y2, s2), x, y, x2, y2};
            if (!found || std::tie(c.after, c.delta, c.x, c.y, c.x2, c.y2) <
                              std::tie(best.after, best.delta, best.x, best.y, best.x2, best.y2)) {
              best = c;
              found = true;
            }
          });
        }
        st.swap_packs(x, y); // undone: both packs back in their slots
      });
    }
    if (!found) {
      return false;
    }
    s1_out = static_cast<std::size_t>(st.pk[best.y].rank);
    st.swap_packs(best.x, best.y);
    s2_out = static_cast<std::size_t>(st.pk[best.y2].rank);
    st.swap_packs(best.x2, best.y2);
    return true;
  }

  // Partners for r's packs through the cost index: a full fix needs cost(y) <= cost(x) - exc;
  // scan downward from there (growing difference), then upward toward cost(x) (partial fixes).
  template <class Consider>
  void index_search(state& st, std::size_t r, std::int64_t exc, bool crowded, Consider&& consider) {
    std::int64_t max_room = 0;
    if (!crowded) {
      roomiest(st, 1, st.dp, roomiest_one_); // scratch_ranks_ still lists the partners
      max_room = roomiest_one_.empty() ? 0 : st.limit - st.load[roomiest_one_[0]];
    }
    const auto limit = static_cast<std::size_t>(tuning_.scan_limit);
    for (std::size_t i = 0; i < st.used[r]; ++i) {
      const auto x = static_cast<std::size_t>(st.items[r * st.k + i]);
      const std::int64_t want = st.pk[x].cost - std::max<std::int64_t>(exc, 1);
      const auto split = static_cast<std::size_t>(
          std::upper_bound(st.sorted_cost.begin(), st.sorted_cost.end(), want) -
          st.sorted_cost.begin());
      // Where no rank holds fewer than l + 1 packs of level <= l (no slack), only packs of x's
      // own level can trade places with it; the cost index holds each level contiguously. No
      // rank can absorb more than the largest room, so larger differences are never useful
      // (outside level repairs, which may overload a partner).
      const bool same_level_only =
          !crowded && st.slack[static_cast<std::size_t>(st.pk[x].level)] == 0;
      const std::int64_t reach = crowded ? st.pk[x].cost : max_room;
      for (std::size_t step = 0; step < limit && step < split; ++step) {
        const auto y = static_cast<std::size_t>(st.by_cost(split - 1 - step));
        if ((same_level_only && st.pk[y].level != st.pk[x].level) ||
            st.pk[x].cost - st.pk[y].cost > reach) {
          break;
        }
        consider(x, y);
      }
      const auto first_partial =
          std::max(split, static_cast<std::size_t>(std::lower_bound(st.sorted_cost.begin(),
                                                                    st.sorted_cost.end(),
                                                                    st.pk[x].cost - reach) -
                                                   st.sorted_cost.begin()));
      for (std::size_t i2 = first_partial, step = 0; i2 < st.n && step < limit / 2; ++i2, ++step) {
        if (st.sorted_cost[i2] >= st.pk[x].cost) {
          break;
        }
        consider(x, static_cast<std::size_t>(st.by_cost(i2)));
      }
    }
  }

  tuning tuning_{};
  std::vector<std::size_t> scratch_ranks_;
  std::vector<std::size_t> roomiest_one_; // see index_search
  struct partner_pack {
    std::int64_t cost;
    std::int32_t level, id;
  };
  std::vector<partner_pack> partner_; // a repair partner's packs, see repair_step
  std::vector<std::pair<std::int64_t, std::int64_t>> scratch_entries_;
  // A max-heap of (key, -rank) that keeps its memory when cleared.
  struct heap : std::priority_queue<std::pair<std::int64_t, std::int64_t>> {
    void clear() { c.clear(); }
  };
  heap over_heap_; // (excess key, -rank), lazy: see run()
  heap room_heap_; // (room, -rank), lazy
};

} // namespace packswap::detail::stage2
