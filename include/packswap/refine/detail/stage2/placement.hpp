#pragma once

#include "packswap/refine/detail/stage2/batch_facts.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// The placement of stage 2's packs, the second layer of the shared state (state.hpp): every
/// rank's places (its packs, with what the scans read of each beside it), loads and level counts,
/// the level room its prefixes leave (`full_from`), and the pinned packs. Every attempt empties it
/// (`empty_ranks`) and the pin and the fill place every pack again.
///
/// Costs: place and unplace O(1); full_from(r) O(k) when place or unplace changed r's level
/// counts since its last call, else O(1); relevel O(|a - b| + w) on the rank for packs of levels
/// a and b, w the levels below min(a, b) down to the rank's previous full level (where full_from
/// is up to date; else O(1), the rebuild left to full_from); level_excess(r) O(1) for a rank that
/// crowds no level, else O(k); rebuild_places() O(n).
struct placement : batch_facts {
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

  // Weighted bytes of pack p when it is computed on rank r (batch_facts::away), and the same for
  // the pack at place `at`, read from the place.
  using batch_facts::away;
  std::int64_t away(const item& at, std::size_t r) const {
    return weight(static_cast<std::size_t>(at.home), r) * at.bytes;
  }

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
  // counts (the pin and the fill place every pack once); a swap keeps it, with the surplus
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
  void empty_ranks() {
    locked.resize(n);
    items.resize(dp * k);
    used.assign(dp, 0);
    load.assign(dp, 0);
    cnt.assign(dp * k, 0);
    full.resize(dp * k);
    surplus.resize(dp * k);
    crowded_levels.resize(dp);
    full_stale.assign(dp, 1);
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
  // Whether swap_packs() keeps the places (items, and the records' slots) up to date: cleared by
  // a last phase that reads neither (see bring_home_phase::run), set again by empty_ranks().
  bool places_live = true;
};

} // namespace packswap::detail::stage2
