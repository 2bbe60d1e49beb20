#pragma once

#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap::detail::stage2 {

/// A trade of the bring-home (stage 2, phase 5): p (on r) for q (on p's home rank, or a rank of
/// its node) and, where u != v, a compensating trade of u for v between the same two ranks;
/// `delta`, the change in weighted moved bytes.
struct home_trade {
  std::size_t q = 0, u = 0, v = 0; // u == v: no compensating trade
  std::int64_t delta = 0;
};

/// The bring-home's compensating pairs (stage 2, phase 5, see bring_home_phase): where trading a
/// pack home would put a load above the limit, a second trade between the same two ranks, of two
/// packs of one level both away from home, that carries the difference back.
///
/// Moves no pack: it counts its work in the state (and builds the rows on first need) and offers
/// candidates to the caller's `consider`.
///
/// Complexity: per call, with few levels and no rows O(k) (the places of both ranks; the other
/// rank's indexed once per visit, O(k)); from the rows O(L / 32 + L / 16 + c) for the L levels
/// whose spread reaches the range and c pairs weighed (at most `compensation_pairs`, and the
/// visit's pairs).
class compensating_pairs {
 public:
  /// The most levels with which pairs are read from the places rather than the rows (the
  /// bring-home reads the places with at most as many: bring_home_phase::scan_items_up_to).
  static constexpr std::size_t items_up_to = 64;

  /// A pass begins: `settle`, a dense settle's (it takes the first pair that fits); `rows`, the
  /// pairs read from the rows (state::ensure_away_rows). O(1).
  void start(bool settle, bool rows) {
    settling_ = settle;
    rows_ = rows;
  }

  /// A visit begins: at most `pairs` pairs weighed in it, and the visited pack's rank indexed
  /// anew when first needed (its packs may have changed since the last visit). O(1).
  void visit(const state& st, std::int32_t pairs) {
    movable_for_ = st.n;
    pairs_left_ = pairs;
  }

  // The compensating trade for trading p (on r) for q (on t, p's home), which moves d from r to
  // t and lets the loads overflow: a same-level trade u (on t) <-> v (on r) of two packs both
  // away from home (moving them again costs nothing in general) carrying e = cost(u) - cost(v)
  // back, with both loads fitting iff e lies in [e_lo, e_hi]. u and v share a level, so |e| is
  // at most its spread: only levels whose spread can reach the range are tried (with few levels
  // and no rows, every item of t once; with many, and in the settles bring_home_phase::run() names,
  // at most `compensation_pairs` pairs, only those that fit, read from the rows widest level first:
  // `by_rows`).
  template <class Consider>
  void operator()(state& st, std::size_t t, std::size_t r, std::size_t p, std::size_t q,
                  std::int64_t d, std::int64_t delta, Consider&& consider) {
    const std::int64_t e_lo = st.load[t] + d - st.limit;
    const std::int64_t e_hi = st.limit - st.load[r] + d;
    // A level's pair can carry e back iff its spread is at least `need`.
    const std::int64_t need = std::max(e_lo, -e_hi);
    if (st.spread_levels == 0 || st.widest_spread[0] < need) {
      return; // no level's spread reaches the range
    }
    if (rows_) {
      by_rows(st, t, r, p, q, need, e_lo, e_hi, delta, consider);
      return;
    }
    // Few levels (without rows, k <= items_up_to): t's items in sequence, each u of a level
    // whose spread reaches the range paired with r's away-from-home pack of its level (`movable_`,
    // indexed once per p). Read once: `consider` writes through references the compiler cannot tell
    // apart.
    const state::item* t_items = &st.items[t * st.k];
    const state::item* r_items = &st.items[r * st.k];
    const std::size_t t_used = st.used[t];
    const std::int64_t* spread = st.level_spread.data();
    st.work += static_cast<std::int64_t>(t_used / 16 + 1);
    if (movable_for_ != p) {
      index_movable(st, r, p);
      movable_for_ = p;
    }
    const std::int32_t* movable = movable_.data();
    // The items that pair, listed first without a branch (see bring_home_phase::run()), then
    // weighed in order.
    std::size_t m = 0;
    for (std::size_t a = 0; a < t_used; ++a) {
      const auto l = static_cast<std::size_t>(t_items[a].level);
      pairing_[m] = static_cast<std::int32_t>(a);
      m += static_cast<std::size_t>(static_cast<std::size_t>(t_items[a].pack) != q) &
           static_cast<std::size_t>(static_cast<std::size_t>(t_items[a].home) != t) &
           static_cast<std::size_t>(spread[l] >= need) & static_cast<std::size_t>(movable[l] >= 0);
    }
    for (std::size_t j = 0; j < m; ++j) {
      const state::item& u = t_items[pairing_[j]];
      if (pairs_left_ <= 0) {
        return;
      }
      --pairs_left_;
      ++st.work;
      const state::item& v = r_items[movable[static_cast<std::size_t>(u.level)]];
      const std::int64_t e = u.cost - v.cost;
      if (e >= e_lo && e <= e_hi) {
        consider(home_trade{q, static_cast<std::size_t>(u.pack), static_cast<std::size_t>(v.pack),
                            delta + st.swap_delta(u, t, v, r)});
      }
    }
  }

 private:
  // Whether level i's pair of two rows' offsets (T: 32 or 64 bits, `none` where a row holds no
  // pack) differs by an amount in [lo, hi]: no branch, so a block of levels is compared at once.
  template <class T>
  static auto row_fits(const T* t_row, const T* r_row, T none, T lo, T hi) {
    return [=](std::size_t i) {
      const T e = static_cast<T>(t_row[i] - r_row[i]);
      return static_cast<int>(t_row[i] != none) & static_cast<int>(r_row[i] != none) &
             static_cast<int>(e >= lo) & static_cast<int>(e <= hi);
    };
  }

  // operator() with many levels (and in the settles with few that bring_home_phase::run() names):
  // the pairs read from the rows of t and r (state::ensure_away_rows), over the levels whose spread
  // reaches `need` (widest first, as above), 16 levels at a time with no branch; only the pairs
  // whose difference fits are weighed, at most `compensation_pairs` (and the visit's pairs), and in
  // a settle only the first. Where the loads leave a narrow range, as at eps = 0, the widest
  // levels' pairs rarely fit, and weighing pairs one by one spent a visit's few on them; the rows
  // find a fitting pair at any level for about the work of those few. On the stress set at eps = 0,
  // within the same allowance, the fallback of `high-res` 64 x 256 moves 0.39-0.43 of
  // Karmarkar-Karp's bytes instead of 0.68-0.74, and 1,024 x 256 (262,144 packs) 0.44-0.47 instead
  // of 0.68-0.77. A row holds one pack per level, so where several of a rank's packs of a level are
  // away from home, one of them pairs. Work: one unit per 32 levels read (the rows of 32-bit
  // offsets are read in sequence and compared several at a time), one per block of 16 holding a
  // pair that fits, one per pair weighed. Where a level's spread passes 32 bits (costs in
  // nanoseconds or finer, giant packs) the offsets are 64-bit, counted alike: before, such batches
  // weighed the pairs one by one
  // (`high-res` 256 x 64 in nanoseconds: 0.64 of Karmarkar-Karp's bytes, 0.48 in microseconds).
  // Counted so, the settles after a search gives up took 0.98-1.03 times the time of the pairs
  // weighed one by one up to 65,536 packs, and 1.09-1.19 at 262,144 packs (paired runs), where more
  // of their trades succeed (each moves four packs) and the rows (4 bytes per pack) come from
  // further out than the caches; the searches that succeed there took 0.91 (`vlm-pretrain` 1,024 x
  // 256).
  template <class Consider>
  void by_rows(state& st, std::size_t t, std::size_t r, std::size_t p, std::size_t q,
               std::int64_t need, std::int64_t e_lo, std::int64_t e_hi, std::int64_t delta,
               Consider&& consider) {
    st.ensure_away_rows();
    const auto spreads = st.widest_spread.begin();
    const auto wide = static_cast<std::size_t>(
        std::partition_point(spreads, spreads + static_cast<std::ptrdiff_t>(st.spread_levels),
                             [&](std::int64_t spread) { return spread >= need; }) -
        spreads);
    // Counted alike with 32- and 64-bit offsets (the scan is a small part of a visit), so that
    // costs given in a finer unit (exact multiples) take the same pairs with the same work.
    st.work += static_cast<std::int64_t>(wide / 32 + 1);
    if (st.wide_rows()) {
      weigh_rows(st, t, r, p, q, wide, delta,
                 row_fits(&st.away_offset_wide[t * st.k], &st.away_offset_wide[r * st.k],
                          state::no_offset_wide, e_lo, e_hi),
                 consider);
      return;
    }
    // The difference of two packs of a level lies within its spread, below offset_bound: the
    // range clamped to twice that keeps every difference that fits, in 32 bits.
    constexpr std::int64_t clamp = 2 * state::offset_bound;
    const auto lo = static_cast<std::int32_t>(std::clamp(e_lo, -clamp, clamp));
    const auto hi = static_cast<std::int32_t>(std::clamp(e_hi, -clamp, clamp));
    weigh_rows(
        st, t, r, p, q, wide, delta,
        row_fits(&st.away_offset[t * st.k], &st.away_offset[r * st.k], state::no_offset, lo, hi),
        consider);
  }

  // by_rows' weighing, for a `fits(i)` of either width: the levels [0, wide) in
  // blocks of 16, the pairs that fit weighed in order (see there).
  template <class Fits, class Consider>
  void weigh_rows(state& st, std::size_t t, std::size_t r, std::size_t p, std::size_t q,
                  std::size_t wide, std::int64_t delta, const Fits& fits, Consider&& consider) {
    std::int32_t pairs = std::min(settling_ ? 1 : compensation_pairs, pairs_left_);
    for (std::size_t block = 0; block < wide && pairs > 0; block += 16) {
      const std::size_t end = std::min(wide, block + 16);
      int any = 0;
      for (std::size_t i = block; i < end; ++i) {
        any |= fits(i);
      }
      if (any == 0) {
        continue;
      }
      ++st.work;
      std::size_t fitting[16];
      std::size_t m = 0;
      for (std::size_t i = block; i < end; ++i) {
        fitting[m] = i;
        m += static_cast<std::size_t>(fits(i));
      }
      for (std::size_t j = 0; j < m && pairs > 0; ++j) {
        const auto u = static_cast<std::size_t>(st.away_pack[t * st.k + fitting[j]]);
        const auto v = static_cast<std::size_t>(st.away_pack[r * st.k + fitting[j]]);
        if (u == q || v == p) {
          continue;
        }
        --pairs;
        --pairs_left_;
        ++st.work;
        consider(home_trade{q, u, v, delta + st.swap_delta(u, t, v, r)});
      }
    }
  }

  // movable_[l]: the place on rank r (its index among r's) of a pack of level l that is away
  // from home (other than `skip`), or -1; read from the places, no pack record. O(k).
  void index_movable(const state& st, std::size_t r, std::size_t skip) {
    movable_.assign(st.k, -1);
    std::int32_t* movable = movable_.data();
    const state::item* items = &st.items[r * st.k];
    const std::size_t used = st.used[r];
    for (std::size_t i = 0; i < used; ++i) {
      if (static_cast<std::size_t>(items[i].pack) != skip &&
          static_cast<std::size_t>(items[i].home) != r) {
        movable[static_cast<std::size_t>(items[i].level)] = static_cast<std::int32_t>(i);
      }
    }
  }

  static constexpr std::int32_t compensation_pairs = 64;

  std::int32_t pairing_[items_up_to]; // items that may pair, within one call
  std::vector<std::int32_t> movable_; // see index_movable()
  std::size_t movable_for_ = 0;       // the pack movable_ was indexed for
  std::int32_t pairs_left_ = 0;       // compensating pairs the visit may still weigh
  bool settling_ = false;             // the pass is a settle's (dense): see start()
  bool rows_ = false;                 // the pairs are read from the rows: see start()
};

} // namespace packswap::detail::stage2
