#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/placement.hpp"

#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// The level lists and the away rows, the third layer of the shared state (state.hpp): indexes
/// of the placement that the bring-home reads (each rank's packs by level; its packs away from
/// home by level, for the compensating pairs) and that a swap keeps up to date through link()
/// and unlink() once they are built. The state builds them on a phase's first need
/// (state::ensure_levels, state::ensure_away_rows), counting the work.
///
/// Costs: index_levels() O(n + dp k); build_away_rows() O(n + dp k); link() O(1); unlink() O(1),
/// plus at a level of fewer than `listed_from` packs a rank on average the home packs of its list
/// passed where the row's pack leaves.
struct level_lists : placement {
  // The packs of every rank by level, as doubly linked lists: at_level[r * k + l] heads rank r's
  // packs of level l, linked by next_at_level (-1 ends the list), and away_at[r * k + l] counts
  // those of them away from home (so a search skips a list whose packs are all home without
  // reading their records; by level, as the bring-home reads a rank's levels in a row). Built here
  // in O(n + dp k); a swap keeps them up to date (link, unlink) until `levels_live` is cleared
  // (place/unplace and the re-deal's writes do not).
  void index_levels() {
    rows_live = false; // rebuilt by state::ensure_away_rows() when next needed
    at_level.assign(dp * k, -1);
    away_at.assign(dp * k, 0);
    next_at_level.resize(n);
    prev_at_level.resize(n);
    // The packs lie at random places: each one's record and list links are fetched
    // prefetch_distance packs before it is linked, in the same order (`ahead_r`, `ahead_i`).
    std::size_t ahead_r = 0;
    std::size_t ahead_i = dp > 0 ? used[0] : 0;
    const auto fetch_next = [&] {
      while (ahead_r < dp && ahead_i == 0) {
        ahead_i = ++ahead_r < dp ? used[ahead_r] : 0;
      }
      if (ahead_r < dp) {
        const auto p = static_cast<std::size_t>(items[ahead_r * k + --ahead_i].pack);
        prefetch(&pk[p]);
        prefetch(&next_at_level[p]);
        prefetch(&prev_at_level[p]);
      }
    };
    for (std::size_t i = 0; i < prefetch_distance; ++i) {
      fetch_next();
    }
    for (std::size_t r = 0; r < dp; ++r) {
      for (std::size_t i = used[r]; i-- > 0;) {
        fetch_next();
        link(static_cast<std::size_t>(items[r * k + i].pack), r);
      }
    }
    levels_live = true;
  }

  void link(std::size_t p, std::size_t r) {
    const auto l = static_cast<std::size_t>(pk[p].level);
    const std::size_t pos = spread_pos[l];
    away_at[r * k + l] += src(p) != r ? 1 : 0;
    if (rows_live && src(p) != r) {
      // At the head of the level list: the rank's first pack away from home at its level.
      if (any_listed && away_listed[l] != 0) {
        push_front(away_head[r * k + l], away_next, away_prev, p);
      }
      set_away_row(r, pos, p);
    }
    push_front(at_level[r * k + l], next_at_level, prev_at_level, p);
  }

  void unlink(std::size_t p, std::size_t r) {
    const auto l = static_cast<std::size_t>(pk[p].level);
    const std::size_t at = r * k + spread_pos[l];
    away_at[r * k + l] -= src(p) != r ? 1 : 0;
    erase(at_level[r * k + l], next_at_level, prev_at_level, p);
    if (!rows_live) {
      return;
    }
    if (any_listed && away_listed[l] != 0) {
      // Where p was the row's pack, the next one away from home in the list takes its place.
      if (src(p) != r && erase(away_head[r * k + l], away_next, away_prev, p)) {
        set_row(r, l, away_head[r * k + l]);
      }
    } else if (away_pack[at] == static_cast<std::int32_t>(p)) {
      find_away_row(r, l);
    }
  }

  // p at the front of a doubly linked list (its head, and the links of every pack), and out of it
  // again: whether p was at its front. O(1).
  static void push_front(std::int32_t& head, std::vector<std::int32_t>& next,
                         std::vector<std::int32_t>& prev, std::size_t p) {
    prev[p] = -1;
    next[p] = head;
    if (head >= 0) {
      prev[static_cast<std::size_t>(head)] = static_cast<std::int32_t>(p);
    }
    head = static_cast<std::int32_t>(p);
  }
  static bool erase(std::int32_t& head, std::vector<std::int32_t>& next,
                    std::vector<std::int32_t>& prev, std::size_t p) {
    const std::int32_t before = prev[p];
    const std::int32_t after = next[p];
    if (before >= 0) {
      next[static_cast<std::size_t>(before)] = after;
    } else {
      head = after;
    }
    if (after >= 0) {
      prev[static_cast<std::size_t>(after)] = before;
    }
    return before < 0;
  }

  // Rows of the packs away from home, by level, for the bring-home's compensating pairs
  // (compensating_pairs::by_rows, compensate.hpp): away_pack[r * k + spread_pos[l]] is a pack of
  // level l on rank r away from home (-1 if none) and away_offset beside it its cost less the
  // level's cheapest (`no_offset` if none), so that two ranks' rows read in sequence give the cost
  // difference of a pair of their packs at every level, in 32 bits; where some level's spread is
  // offset_bound or more (costs in a fine unit, or a few giant packs: `wide_rows()`), in 64 bits,
  // in away_offset_wide (`no_offset_wide` if none). The row's pack is the first away from home
  // in the rank's level list. When it leaves, the next one takes its place: found by a walk past
  // the list's home packs, except at levels of `listed_from` packs a rank or more (ties across
  // many levels share their packs), whose away packs are linked in the list's order too
  // (away_head), so that it takes O(1) there. (Walked, a tied level holding most of a rank's
  // packs took hundreds of steps a trade once most of them were home: `text_heavy` 16 x 1,024
  // at eps = 0 spent 57% of its solve there. Linked at every level, the batches without such
  // levels took 2.5% longer.) Built here from the level lists, which must be live, in O(n + dp
  // k); link() and unlink() keep them while the level lists live.
  void build_away_rows() {
    away_pack.assign(dp * k, -1);
    if (wide_rows()) {
      away_offset_wide.assign(dp * k, no_offset_wide);
    } else {
      away_offset.assign(dp * k, no_offset);
    }
    away_listed.assign(k, 0);
    any_listed = false;
    for (std::size_t l = 0; l < k; ++l) {
      away_listed[l] = level_end[l] - level_begin[l] >= listed_from * dp ? 1 : 0;
      any_listed |= away_listed[l] != 0;
    }
    if (any_listed) {
      away_head.assign(dp * k, -1);
      away_next.resize(n);
      away_prev.resize(n);
    }
    rows_live = true;
    for (std::size_t r = 0; r < dp; ++r) {
      for (std::size_t l = 0; l < k; ++l) {
        if (away_listed[l] != 0) {
          list_away_row(r, l);
        } else {
          find_away_row(r, l);
        }
      }
    }
  }
  // Whether the rows' offsets are 64-bit: some level's spread does not fit 32 bits (see
  // build_away_rows). O(1).
  bool wide_rows() const { return k != 0 && widest_spread[0] >= offset_bound; }

  static constexpr std::int32_t no_offset = 1 << 29;
  static constexpr std::int64_t no_offset_wide = -1;
  static constexpr std::int64_t offset_bound = std::int64_t{1} << 28; // spreads below it fit
  static constexpr std::size_t listed_from = 8; // packs a rank at a level: see build_away_rows

  void set_away_row(std::size_t r, std::size_t pos, std::size_t p) {
    away_pack[r * k + pos] = static_cast<std::int32_t>(p);
    const std::int64_t offset = pk[p].cost - spread_floor[pos];
    if (wide_rows()) {
      away_offset_wide[r * k + pos] = offset;
    } else {
      away_offset[r * k + pos] = static_cast<std::int32_t>(offset);
    }
  }
  // Rank r's row at level l from its level list: the first pack there away from home.
  void find_away_row(std::size_t r, std::size_t l) {
    std::int32_t first = -1;
    if (away_at[r * k + l] != 0) {
      for (std::int32_t x = at_level[r * k + l]; x >= 0;
           x = next_at_level[static_cast<std::size_t>(x)]) {
        if (src(static_cast<std::size_t>(x)) != r) {
          first = x;
          break;
        }
      }
    }
    set_row(r, l, first);
  }
  // Rank r's packs of level l away from home, linked in their level list's order, and its row
  // there (the first of them).
  void list_away_row(std::size_t r, std::size_t l) {
    std::int32_t last = -1;
    if (away_at[r * k + l] != 0) {
      for (std::int32_t x = at_level[r * k + l]; x >= 0;
           x = next_at_level[static_cast<std::size_t>(x)]) {
        const auto p = static_cast<std::size_t>(x);
        if (src(p) == r) {
          continue;
        }
        away_prev[p] = last;
        away_next[p] = -1;
        if (last >= 0) {
          away_next[static_cast<std::size_t>(last)] = x;
        } else {
          away_head[r * k + l] = x;
        }
        last = x;
      }
    }
    set_row(r, l, away_head[r * k + l]);
  }
  // Rank r's row at level l: pack p, away from home there, or none where p < 0.
  void set_row(std::size_t r, std::size_t l, std::int32_t p) {
    const std::size_t pos = spread_pos[l];
    if (p >= 0) {
      set_away_row(r, pos, static_cast<std::size_t>(p));
      return;
    }
    away_pack[r * k + pos] = -1;
    if (wide_rows()) {
      away_offset_wide[r * k + pos] = no_offset_wide;
    } else {
      away_offset[r * k + pos] = no_offset;
    }
  }

  std::vector<std::int32_t> at_level, next_at_level, prev_at_level; // see index_levels()
  std::vector<std::int32_t> away_at;                                // see index_levels()
  bool levels_live = false;
  std::vector<std::int32_t> away_pack, away_offset; // see build_away_rows()
  std::vector<std::int64_t> away_offset_wide;       // the same, where wide_rows()
  // While the rows live, at the levels of `away_listed`: the packs of each rank's level list that
  // are away from home, in the list's order (away_head[r * k + l], linked by away_next /
  // away_prev; see build_away_rows()).
  std::vector<std::int32_t> away_head, away_next, away_prev;
  std::vector<char> away_listed;
  bool any_listed = false; // some level is listed
  bool rows_live = false;
};

} // namespace packswap::detail::stage2
