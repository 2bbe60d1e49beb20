#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/detail/rank_weights.hpp"
#include "packswap/refine/detail/stage2/tuning.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace packswap::detail::stage2 {

/// What every phase of stage 2 reads and changes: the batch (fixed by `prepare`) and the current
/// placement of its packs (reset by every attempt).
///
/// Packs are numbered by cost descending (internal id i is `order[i]`), so the passes that walk
/// the packs of a level, or all packs by cost, read their per-pack arrays in sequence; the cost
/// index (ascending cost) is the internal ids backwards.
///
/// Levels: with the caps `caps[j]` non-increasing, level(p) is the last j with caps[j] >=
/// cost(p). A rank may hold at most j + 1 packs of level <= j, for every j: then its packs sorted
/// by cost descending sit at or below the caps, and dealing them to micro-steps in that order
/// keeps every micro-step's maximum within its cap (A <= sum(caps)). Every phase keeps this
/// for every rank, except where the repair's comment says otherwise.
///
/// Costs: prepare() O(n log k) (each rank's own packs sorted by bytes); place and unplace O(1);
/// full_from(r) O(k) when place or unplace changed r's level counts since its last call, else
/// O(1); swap_packs O(1) for packs of one level, else O(|a - b| + w) on each of the two ranks
/// for packs of levels a and b, w the levels below min(a, b) down to the rank's previous full
/// level (where full_from is up to date; else O(1), the rebuild left to full_from);
/// level_excess(r) O(1) for a rank that crowds no level, else O(k); index_levels() O(n + dp k);
/// ensure_away_rows() O(n + dp k); link() O(1); unlink() O(1), plus at a level of fewer than
/// `listed_from` packs a rank on average the home packs of its list passed where the row's pack
/// leaves.
struct state {
  // How far ahead the passes over packs in input order fetch pack records.
  static constexpr std::size_t prefetch_distance = 8;

  // A place on a rank: the pack there and, beside it, what the scans over a rank's packs read
  // (its home rank, level, cost and bytes), so that a scan reads the rank's places in sequence
  // and no pack record, and a swap writes one line on each rank (aligned to 32 bytes, so that
  // no place straddles two lines).
  struct alignas(32) item {
    std::int32_t pack = 0;
    std::int32_t home = 0;
    std::int32_t level = 0;
    std::int32_t unused = 0;
    std::int64_t cost = 0;
    std::int64_t bytes = 0;
  };
  static_assert(sizeof(item) == 32, "two places to a cache line");

  // Takes a new batch, reusing the memory of earlier ones: `order` lists pack ids by cost
  // descending (ties by id), `caps` the micro-step caps (non-increasing), `b_limit` the limit on
  // every rank's load.
  void prepare(span<const pack_meta> packs, const shape& s, const topology& topo,
               span<const std::int64_t> caps, std::int64_t b_limit,
               span<const std::int32_t> order) {
    dp = static_cast<std::size_t>(s.dp);
    k = static_cast<std::size_t>(s.ga);
    n = packs.size();
    limit = b_limit;
    work = 0;
    work_limit = std::numeric_limits<std::int64_t>::max();
    gave_up = false;
    review_at = std::numeric_limits<std::int64_t>::max();
    review = review_hook{};
    abandoned = false;
    ranks.assign(topo, dp);
    // Ranks grouped by node (counting sort), for the bring-home step.
    node_start.assign(static_cast<std::size_t>(ranks.nodes) + 1, 0);
    for (const auto nd : ranks.node) {
      ++node_start[static_cast<std::size_t>(nd) + 1];
    }
    for (std::size_t i = 0; i + 1 < node_start.size(); ++i) {
      node_start[i + 1] += node_start[i];
    }
    node_ranks.resize(dp);
    {
      auto pos = node_start;
      for (std::size_t r = 0; r < dp; ++r) {
        node_ranks[pos[static_cast<std::size_t>(ranks.node[r])]++] = r;
      }
    }
    input_id.assign(order.begin(), order.end());
    internal_id.resize(n);
    for (std::size_t p = 0; p < n; ++p) {
      if (p + prefetch_distance < n) {
        prefetch(&internal_id[static_cast<std::size_t>(input_id[p + prefetch_distance])]);
      }
      internal_id[static_cast<std::size_t>(input_id[p])] = static_cast<std::int32_t>(p);
    }
    // One pass in cost order: records, level counts, own-pack counts, the cost index. Costs fall
    // as ids rise, so levels only rise: one walk down the caps.
    pk.resize(n);
    sorted_cost.resize(n);
    auto& per_level = level_count;
    per_level.assign(k, 0);
    own_first.assign(dp + 1, 0);
    std::size_t level = 0;
    total_cost = 0;
    for (std::size_t p = 0; p < n; ++p) {
      if (p + prefetch_distance < n) {
        prefetch(&packs[static_cast<std::size_t>(input_id[p + prefetch_distance])]);
      }
      const auto& m = packs[static_cast<std::size_t>(input_id[p])];
      // The last j with caps[j] >= cost; caps[0] bounds every cost by construction.
      while (level + 1 < k && caps[level + 1] >= m.cost) {
        ++level;
      }
      pk[p] = {m.cost, m.bytes, m.source_rank, static_cast<std::int32_t>(level), -1, -1};
      sorted_cost[n - 1 - p] = m.cost;
      total_cost += m.cost;
      ++per_level[level];
      ++own_first[static_cast<std::size_t>(m.source_rank) + 1];
    }
    // Slack of level j: how many ranks may end with fewer than j + 1 packs of level <= j. Zero
    // where no costs tie across a chunk boundary, which forces one pack per chunk on every rank.
    // Levels rise with ids, so level j is ids [prefix before j, prefix after j): one stretch of
    // the cost index, read backwards.
    slack.assign(k, 0);
    level_begin.assign(k, 0);
    level_end.assign(k, 0);
    {
      std::int64_t prefix = 0;
      for (std::size_t j = 0; j < k; ++j) {
        const auto first_id = static_cast<std::size_t>(prefix);
        prefix += per_level[j];
        slack[j] = static_cast<std::int64_t>(dp) * static_cast<std::int64_t>(j + 1) - prefix;
        if (per_level[j] > 0) {
          level_begin[j] = n - static_cast<std::size_t>(prefix);
          level_end[j] = n - first_id;
        }
      }
    }
    // Each level's spread (its largest cost less its smallest), and the levels by it, widest
    // first (ties by level); the first spread_levels of them have a spread above 0.
    level_spread = level_quantile(1000);
    const auto cheapest = level_quantile(0);
    for (std::size_t j = 0; j < k; ++j) {
      level_spread[j] -= cheapest[j];
    }
    spread_order.resize(k);
    for (std::size_t j = 0; j < k; ++j) {
      spread_order[j] = j;
    }
    std::sort(spread_order.begin(), spread_order.end(), [&](std::size_t a, std::size_t b) {
      return level_spread[a] > level_spread[b] || (level_spread[a] == level_spread[b] && a < b);
    });
    spread_pos.resize(k);
    widest_spread.resize(k);
    spread_floor.resize(k);
    spread_levels = 0;
    for (std::size_t i = 0; i < k; ++i) {
      spread_pos[spread_order[i]] = i;
      widest_spread[i] = level_spread[spread_order[i]];
      spread_floor[i] = cheapest[spread_order[i]];
      spread_levels += widest_spread[i] > 0 ? 1 : 0;
    }
    rows_live = false;
    // Each rank's own packs by bytes descending, ties by id: bucketed by home rank in id order,
    // then each bucket (ga * mbs packs) sorted on its own.
    for (std::size_t r = 0; r < dp; ++r) {
      own_first[r + 1] += own_first[r];
    }
    {
      // (bytes, id) pairs, so the sorts read no pack records.
      auto& bucket = own_bytes;
      bucket.resize(n);
      auto& pos = rank_pos;
      pos.assign(own_first.begin(), own_first.end() - 1);
      for (std::size_t p = 0; p < n; ++p) {
        if (p + prefetch_distance < n) {
          // Where that pack's entry will go, give or take the entries of its rank before it.
          prefetch(&bucket[pos[src(p + prefetch_distance)]]);
        }
        bucket[pos[src(p)]++] = {pk[p].bytes, static_cast<std::int32_t>(p)};
      }
      for (std::size_t r = 0; r < dp; ++r) {
        const std::size_t size = own_first[r + 1] - own_first[r];
        stable_sort_desc(bucket.data() + own_first[r], size, own_sort,
                         [](const std::pair<std::int64_t, std::int32_t>& e) { return e.first; });
      }
      own.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        own[i] = bucket[i].second;
      }
    }
  }

  // Weight of one byte computed on rank r that comes from rank h.
  std::int64_t weight(std::size_t h, std::size_t r) const { return ranks.weight(h, r); }

  // Weighted bytes of pack p when it is computed on rank r.
  std::int64_t away(std::size_t p, std::size_t r) const { return weight(src(p), r) * pk[p].bytes; }
  // The same for the pack at place `at`, read from the place.
  std::int64_t away(const item& at, std::size_t r) const {
    return weight(static_cast<std::size_t>(at.home), r) * at.bytes;
  }

  std::size_t src(std::size_t p) const { return static_cast<std::size_t>(pk[p].home); }

  // The pack at position i of the cost index (ascending cost): internal ids run by cost
  // descending, so the index is the ids backwards.
  std::int32_t by_cost(std::size_t i) const { return static_cast<std::int32_t>(n - 1 - i); }

  // Can rank r take a pack of level `in` while giving up one of level `out` (none when out < 0)?
  // Only the prefixes [in, out) grow, and each must stay <= j + 1.
  bool level_room(std::size_t r, std::int32_t in, std::int32_t out) {
    if (out >= 0 && out <= in) {
      return true; // no prefix grows
    }
    const auto end = out < 0 ? k : static_cast<std::size_t>(out);
    return static_cast<std::size_t>(full_from(r)[in]) >= end;
  }

  // full_from(r)[j]: the lowest level j' >= j at which rank r's prefix is full (it holds j' + 1
  // packs of level <= j'), or k. Rebuilt on demand after place or unplace changed r's level
  // counts (the pin and the fill place every pack once); swap_packs keeps it, with the surplus
  // and the crowded count, up to date over the levels the swap changes (`shift`).
  const std::int32_t* full_from(std::size_t r) {
    std::int32_t* f = &full[r * k];
    if (full_stale[r] != 0) {
      full_stale[r] = 0;
      std::int32_t* s = &surplus[r * k];
      std::int32_t prefix = 0;
      std::int32_t crowded = 0;
      for (std::size_t j = 0; j < k; ++j) {
        prefix += cnt[r * k + j];
        s[j] = prefix - static_cast<std::int32_t>(j) - 1;
        crowded += s[j] > 0 ? 1 : 0;
      }
      crowded_levels[r] = crowded;
      std::int32_t next = static_cast<std::int32_t>(k);
      for (std::size_t j = k; j-- > 0;) {
        next = s[j] >= 0 ? static_cast<std::int32_t>(j) : next;
        f[j] = next;
      }
    }
    return f;
  }

  // Rank r's prefixes [lo, hi) change by d (one pack moved between levels lo and hi): the
  // surplus there, the crowded count, and full_from on [lo, hi) and below lo down to the previous
  // full level (above hi nothing changes). O(hi - lo + that walk). Only for a rank whose full_from
  // is up to date.
  void shift(std::size_t r, std::size_t lo, std::size_t hi, std::int32_t d) {
    std::int32_t* s = &surplus[r * k];
    std::int32_t* f = &full[r * k];
    std::int32_t crowded = crowded_levels[r];
    std::int32_t next = hi < k ? f[hi] : static_cast<std::int32_t>(k);
    for (std::size_t j = hi; j-- > lo;) {
      crowded -= s[j] > 0 ? 1 : 0;
      s[j] += d;
      crowded += s[j] > 0 ? 1 : 0;
      next = s[j] >= 0 ? static_cast<std::int32_t>(j) : next;
      f[j] = next;
    }
    crowded_levels[r] = crowded;
    for (std::size_t j = lo; j-- > 0 && s[j] < 0;) {
      f[j] = next;
    }
  }

  // Rank r gives up a pack of level `out` and takes one of level `in`: its level counts, and
  // full_from where that is up to date.
  void relevel(std::size_t r, std::int32_t out, std::int32_t in) {
    --cnt[r * k + static_cast<std::size_t>(out)];
    ++cnt[r * k + static_cast<std::size_t>(in)];
    if (full_stale[r] == 0) {
      if (out < in) {
        shift(r, static_cast<std::size_t>(out), static_cast<std::size_t>(in), -1);
      } else {
        shift(r, static_cast<std::size_t>(in), static_cast<std::size_t>(out), 1);
      }
    }
  }

  // Empties every rank. The packs' places and locks are cleared by pin(), rank by rank, as it
  // reads the records anyway; nothing reads a rank's items past its used ones, nor its full,
  // surplus and crowded_levels before full_from() rebuilds them.
  void reset() {
    locked.resize(n);
    items.resize(dp * k);
    used.assign(dp, 0);
    load.assign(dp, 0);
    cnt.assign(dp * k, 0);
    full.resize(dp * k);
    surplus.resize(dp * k);
    crowded_levels.resize(dp);
    full_stale.assign(dp, 1);
    levels_live = false;
    places_live = true;
  }

  // Every rank's places rebuilt from the packs' ranks, where swaps left them behind (the
  // bring-home with many levels: `places_live` false), so that a repair can follow. O(n).
  void rebuild_places() {
    if (places_live) {
      return;
    }
    used.assign(dp, 0);
    for (std::size_t p = 0; p < n; ++p) {
      append_place(p, static_cast<std::size_t>(pk[p].rank));
    }
    places_live = true;
  }

  // Pack p's place record appended to rank r's places, its slot set; nothing else of r changes.
  void append_place(std::size_t p, std::size_t r) {
    pk[p].slot = static_cast<std::int32_t>(used[r]);
    items[r * k + used[r]] = item_of(p);
    ++used[r];
  }

  // Pack p's place record, from its pack record.
  item item_of(std::size_t p) const {
    return item{static_cast<std::int32_t>(p), pk[p].home, pk[p].level, 0, pk[p].cost, pk[p].bytes};
  }

  void place(std::size_t p, std::size_t r) {
    pk[p].rank = static_cast<std::int32_t>(r);
    append_place(p, r);
    load[r] += pk[p].cost;
    ++cnt[r * k + static_cast<std::size_t>(pk[p].level)];
    full_stale[r] = 1;
  }

  void unplace(std::size_t p) {
    const auto r = static_cast<std::size_t>(pk[p].rank);
    const auto s = static_cast<std::size_t>(pk[p].slot);
    items[r * k + s] = items[r * k + used[r] - 1];
    const auto last = static_cast<std::size_t>(items[r * k + s].pack);
    pk[last].slot = static_cast<std::int32_t>(s);
    --used[r];
    load[r] -= pk[p].cost;
    --cnt[r * k + static_cast<std::size_t>(pk[p].level)];
    full_stale[r] = 1;
    pk[p].rank = -1;
    pk[p].slot = -1;
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

  // The packs of every rank by level, as doubly linked lists: at_level[r * k + l] heads rank r's
  // packs of level l, linked by next_at_level (-1 ends the list), and away_at[r * k +
  // spread_pos[l]] counts those of them away from home (so a search skips a list whose packs
  // are all home without reading their records; kept in spread order, so a scan of the levels
  // widest first reads it in sequence). Built here in O(n + dp k);
  // swap_packs() keeps them up to date until `levels_live` is cleared (place/unplace and the
  // re-deal's writes do not).
  void index_levels() {
    rows_live = false; // rebuilt by ensure_away_rows() when next needed
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

  // The level lists, built now unless swap_packs() has kept them since they were.
  void ensure_levels() {
    if (!levels_live) {
      index_levels();
      work += static_cast<std::int64_t>(n + dp);
    }
  }

  void link(std::size_t p, std::size_t r) {
    const auto l = static_cast<std::size_t>(pk[p].level);
    const std::size_t pos = spread_pos[l];
    away_at[r * k + pos] += src(p) != r ? 1 : 0;
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
    away_at[at] -= src(p) != r ? 1 : 0;
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
  // levels took 2.5% longer.) Built here in O(n + dp k); link() and unlink() keep them while the
  // level lists live.
  void ensure_away_rows() {
    ensure_levels();
    if (rows_live) {
      return;
    }
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
    work += static_cast<std::int64_t>(dp * k / 16 + dp);
  }
  // Whether the rows' offsets are 64-bit: some level's spread does not fit 32 bits (see
  // ensure_away_rows). O(1).
  bool wide_rows() const { return k != 0 && widest_spread[0] >= offset_bound; }

  static constexpr std::int32_t no_offset = 1 << 29;
  static constexpr std::int64_t no_offset_wide = -1;
  static constexpr std::int64_t offset_bound = std::int64_t{1} << 28; // spreads below it fit
  static constexpr std::size_t listed_from = 8; // packs a rank at a level: see ensure_away_rows

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
    if (away_at[r * k + spread_pos[l]] != 0) {
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
    if (away_at[r * k + spread_pos[l]] != 0) {
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

  // Per-level quantile of costs (per mille), from the cost index where each level is contiguous.
  std::vector<std::int64_t> level_quantile(std::int32_t permille) const {
    std::vector<std::int64_t> q(k, 0);
    for (std::size_t l = 0; l < k; ++l) {
      if (level_end[l] > level_begin[l]) {
        q[l] = sorted_cost[level_begin[l] + (level_end[l] - level_begin[l] - 1) *
                                                static_cast<std::size_t>(permille) / 1000];
      }
    }
    return q;
  }

  // Levels a rank breaks: the largest amount by which a prefix exceeds j + 1. O(1) for a rank
  // that crowds no level (once full_from(r) is up to date), else O(k).
  std::int32_t level_excess(std::size_t r) {
    full_from(r);
    if (crowded_levels[r] == 0) {
      return 0;
    }
    const std::int32_t* s = &surplus[r * k];
    return std::max(0, *std::max_element(s, s + k));
  }

  std::int64_t excess(std::size_t r) const { return std::max<std::int64_t>(0, load[r] - limit); }

  // Moved-bytes change if x (on a) and y (on b) trade places: x and y pack ids, or their places
  // (then read from the places, no pack record).
  template <class Pack>
  std::int64_t swap_delta(const Pack& x, std::size_t a, const Pack& y, std::size_t b) const {
    return away(x, b) - away(x, a) + away(y, a) - away(y, b);
  }

  // The batch.
  std::size_t dp = 0, k = 0, n = 0; // ranks, micro-steps (= levels), packs
  std::int64_t limit = 0;           // on every rank's load (B)
  std::int64_t total_cost = 0;
  rank_weights ranks;                  // every rank's node, the weight of a byte
  std::vector<std::size_t> node_start; // ranks of node i: node_ranks[node_start[i] ..]
  std::vector<std::size_t> node_ranks;
  std::vector<std::int32_t> input_id;    // input id of every pack; internal ids follow `order`
  std::vector<std::int32_t> internal_id; // the inverse
  // What every pass reads of a pack, in one 32-byte record instead of six arrays: one cache
  // line read per pack, not six.
  struct pack_state {
    std::int64_t cost = 0;
    std::int64_t bytes = 0;
    std::int32_t home = 0;  // source rank
    std::int32_t level = 0; // see the struct comment
    std::int32_t rank = -1; // where it is now (-1: unplaced)
    std::int32_t slot = -1; // its item index there
  };
  std::vector<pack_state> pk;            // by internal id
  std::vector<std::int32_t> own;         // rank r's own packs by bytes descending, ties by id:
  std::vector<std::size_t> own_first;    // own[own_first[r] .. own_first[r + 1] - 1]
  std::vector<std::int64_t> sorted_cost; // cost of by_cost(i)
  std::vector<std::int64_t> slack;       // per level, see prepare()
  std::vector<std::size_t> level_begin, level_end; // level l: by_cost(begin .. end - 1)
  std::vector<std::int64_t> level_spread;          // per level, see prepare()
  std::vector<std::size_t> spread_order;           // the levels by spread, widest first
  std::vector<std::size_t> spread_pos;             // the inverse
  std::vector<std::int64_t> widest_spread;         // level_spread in spread order
  std::vector<std::int64_t> spread_floor;          // each level's cheapest cost, in spread order
  std::size_t spread_levels = 0;                   // levels whose spread is above 0

  // The placement.
  std::vector<item> items; // rank r's packs: items[r * k .. r * k + used[r] - 1]
  std::vector<std::size_t> used;
  std::vector<std::int64_t> load;
  std::vector<std::int32_t> cnt;     // cnt[r * k + j]: rank r's packs of level j
  std::vector<std::int32_t> full;    // see full_from()
  std::vector<std::int32_t> surplus; // surplus[r * k + j]: r's packs of level <= j, less j + 1
  std::vector<std::int32_t> crowded_levels; // per rank: levels j where that surplus is above 0
  std::vector<char> full_stale;             // full, surplus and crowded_levels need a rebuild
  std::vector<char> locked;                 // pinned home packs the re-deal leaves alone
  std::vector<std::int32_t> at_level, next_at_level, prev_at_level; // see index_levels()
  std::vector<std::int32_t> away_at;                                // see index_levels()
  bool levels_live = false;
  // Whether swap_packs() keeps the places (items, and the records' slots) up to date: cleared by
  // a last phase that reads neither (see bring_home_phase::run), set again by reset().
  bool places_live = true;
  std::vector<std::int32_t> away_pack, away_offset; // see ensure_away_rows()
  std::vector<std::int64_t> away_offset_wide;       // the same, where wide_rows()
  // While the rows live, at the levels of `away_listed`: the packs of each rank's level list that
  // are away from home, in the list's order (away_head[r * k + l], linked by away_next /
  // away_prev; see ensure_away_rows()).
  std::vector<std::int32_t> away_head, away_next, away_prev;
  std::vector<char> away_listed;
  bool any_listed = false; // some level is listed
  bool rows_live = false;

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

  // Working memory of prepare(), kept between batches.
  std::vector<std::int64_t> level_count;
  std::vector<std::pair<std::int64_t, std::int32_t>> own_bytes, own_sort;
  std::vector<std::size_t> rank_pos;
};

} // namespace packswap::detail::stage2
