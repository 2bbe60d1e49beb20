#pragma once

#include "packswap/detail/prefetch.hpp"
#include "packswap/refine/detail/stage2/state.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace packswap::detail::stage2 {

// Range add and range minimum over values 0..n-1 of type V (int32 or int64), with the last index
// before b whose value is below a threshold: a segment tree walked bottom-up, without recursion,
// whose nodes keep their own pending add: a node's minimum includes its own add, not its
// ancestors', which a query adds on its way up (the nodes that tile a range on either side lie
// under one chain of ancestors).
// Suffixes [a, n), which the pin asks for most, and the prefixes of last_below take one walk up
// from a leaf. Whether a walk takes a node depends on the bits of its index, which follow no
// pattern from one call to the next: the walks select (a node, or an add of 0) rather than
// branch, which mispredicts about every other level. O(log n) per call; up to `flat_up_to`
// values, a plain array scanned in O(n), which is faster there. `assign` is O(n). Every value,
// and `none` plus or less the adds it takes, must fit V.
template <class V>
class min_add_tree {
 public:
  static constexpr std::size_t flat_up_to = 64;

  void assign(const V* v, std::size_t n) {
    n_ = n;
    if (n <= flat_up_to) {
      min_.assign(v, v + n);
      return;
    }
    size_ = 1;
    while (size_ < n) {
      size_ *= 2;
    }
    min_.assign(2 * size_, none);
    add_.assign(size_ + 1, 0); // internal nodes; add_[0] and add_[size_] stay 0 (see min)
    for (std::size_t i = 0; i < n; ++i) {
      min_[size_ + i] = v[i];
    }
    for (std::size_t i = size_; i-- > 1;) {
      min_[i] = std::min(min_[2 * i], min_[2 * i + 1]);
    }
  }

  // Adds d to the values [a, b).
  void add(std::size_t a, std::size_t b, V d) {
    if (n_ <= flat_up_to) {
      for (std::size_t i = a; i < b; ++i) {
        min_[i] += d;
      }
      return;
    }
    if (a >= b) {
      return;
    }
    if (b == n_) {
      add_suffix(a, d);
      return;
    }
    // The nodes that tile [a, b) (each side adds 0 where it takes none), then the minima of
    // their ancestors.
    for (std::size_t l = a + size_, r = b + size_; l < r; l /= 2, r /= 2) {
      const std::size_t take_l = l % 2;
      apply(l, select(take_l, d, 0));
      l += take_l;
      const std::size_t take_r = r % 2;
      r -= take_r;
      apply(r, select(take_r, d, 0));
    }
    pull(a + size_, b - 1 + size_);
  }

  // The smallest value in [a, b) (`none` when empty).
  V min(std::size_t a, std::size_t b) const {
    if (n_ <= flat_up_to) {
      // Four running minima: one alone would make every step wait on the step before it.
      V m[4] = {none, none, none, none};
      std::size_t i = a;
      for (; i + 4 <= b; i += 4) {
        for (std::size_t j = 0; j < 4; ++j) {
          m[j] = std::min(m[j], min_[i + j]);
        }
      }
      for (; i < b; ++i) {
        m[0] = std::min(m[0], min_[i]);
      }
      return std::min(std::min(m[0], m[1]), std::min(m[2], m[3]));
    }
    if (a >= b) {
      return none;
    }
    if (b == n_) {
      return min_suffix(a);
    }
    // The nodes taken on the left so far lie under node l - 1 once l moves up, those on the
    // right under node r: each side owes the adds of its chain. (Before a side takes a node, what
    // it adds to `none` is noise far below none's size.)
    V left = none;
    V right = none;
    std::size_t l = a + size_;
    std::size_t r = b + size_;
    while (l < r) {
      const std::size_t take_l = l % 2;
      const V at_l = min_[l];
      left = std::min(left, select(take_l, at_l, none));
      l += take_l;
      const std::size_t take_r = r % 2;
      const V at_r = min_[r - 1];
      right = std::min(right, select(take_r, at_r, none));
      r -= take_r;
      l /= 2;
      r /= 2;
      left += add_[l - 1];
      right += add_[r];
    }
    return std::min(left + adds_above(l - 1), right + adds_above(r));
  }

  // The largest i < b whose value is below t, or -1.
  std::ptrdiff_t last_below(std::size_t b, V t) const {
    if (n_ <= flat_up_to) {
      for (std::size_t i = b; i-- > 0;) {
        if (min_[i] < t) {
          return static_cast<std::ptrdiff_t>(i);
        }
      }
      return -1;
    }
    if (b == 0) {
      return -1;
    }
    if (b == size_) { // every leaf: the root alone
      return min_[1] < t ? descend(1, t, 0) : -1;
    }
    // The nodes that tile [0, b) are the left siblings of the right children on the way up
    // from leaf b, nearest first. Each lies under the chain's nodes above it, whose adds are
    // all the chain's less those up to its sibling there: sums recorded on the way up (an entry
    // is written at every level and kept where the chain's node is a right child).
    std::size_t taken[64];
    V below[64]; // the chain's adds up to the taken node's sibling
    std::size_t m = 0;
    V sum = 0;
    for (std::size_t x = b + size_; x > 1;) {
      taken[m] = x - 1;
      below[m] = sum;
      m += x % 2;
      x /= 2;
      sum += add_[x];
    }
    for (std::size_t i = 0; i < m; ++i) {
      const V above = sum - below[i];
      if (min_[taken[i]] + above < t) {
        return descend(taken[i], t, above);
      }
    }
    return -1;
  }

  static constexpr V none = std::numeric_limits<V>::max() / 4;

 private:
  // `bit` (0 or 1) ? a : b through masks: the bits of a walk's nodes follow no pattern, and a
  // compiler may turn a conditional expression into a branch (g++ 12 did in min_suffix).
  static V select(std::size_t bit, V a, V b) {
    using U = std::make_unsigned_t<V>;
    const U mask = U{0} - static_cast<U>(bit); // all ones when bit is 1
    return static_cast<V>((static_cast<U>(a) & mask) | (static_cast<U>(b) & ~mask));
  }

  void apply(std::size_t node, V d) {
    min_[node] += d;
    if (node < size_) {
      add_[node] += d;
    }
  }

  // add() and min() over [a, n): one walk up from leaf a, which takes the right sibling of
  // every left child on the way (and adds 0 to the left sibling of a right child). The leaves
  // past n (`none`) take the adds too, which leaves them far above any value.
  void add_suffix(std::size_t a, V d) {
    std::size_t x = a + size_;
    apply(x, d);
    // The new minimum of the chain's node stays in a register on the way up (a node's fix
    // reloading its child's just-stored minimum would make every level wait on the store).
    V below = min_[x];
    while (x > 1) {
      const std::size_t sibling = x ^ 1;
      apply(sibling, select(x % 2, 0, d));
      x /= 2;
      below = std::min(below, min_[sibling]) + add_[x];
      min_[x] = below;
    }
  }

  V min_suffix(std::size_t a) const {
    std::size_t x = a + size_;
    V m = min_[x];
    while (x > 1) {
      const V sibling = min_[x ^ 1];
      m = std::min(m, select(x % 2, none, sibling));
      x /= 2;
      m += add_[x];
    }
    return m;
  }

  // The minima of the ancestors of leaves a <= b, from below, each once; above the first they
  // share (which may be a node the add took whole), where every change lies below, only while a
  // minimum changes.
  void pull(std::size_t a, std::size_t b) {
    for (a /= 2, b /= 2; a != b; a /= 2, b /= 2) {
      fix(a);
      fix(b);
    }
    fix(a);
    for (a /= 2; a >= 1; a /= 2) {
      const V before = min_[a];
      fix(a);
      if (min_[a] == before) {
        break;
      }
    }
  }

  void fix(std::size_t node) {
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]) + add_[node];
  }

  // The adds of the node's strict ancestors.
  V adds_above(std::size_t node) const {
    V sum = 0;
    for (node /= 2; node >= 1; node /= 2) {
      sum += add_[node];
    }
    return sum;
  }

  // The last leaf below t under `node`, whose true minimum (with `above`, its ancestors' adds)
  // is.
  std::ptrdiff_t descend(std::size_t node, V t, V above) const {
    while (node < size_) {
      above += add_[node];
      node = 2 * node + (min_[2 * node + 1] + above < t ? 1 : 0);
    }
    return static_cast<std::ptrdiff_t>(node - size_);
  }

  std::size_t n_ = 0, size_ = 1;
  std::vector<V> min_, add_; // the values themselves when flat
};

// Whether one rank can still be completed (see pin_phase::completable), kept up to date as its
// own packs come and go: O(log k) per pack instead of O(k) (for k <= 64 the same steps on flat
// arrays). With u(j) = j + 1 - (packs of level
// <= j held), the largest receive counts are R(j) = min over j' >= j of u(j'), the slack used at
// j is u(j) - R(j), and the rank is completable iff every u(j) >= 0 and every used slack is at
// most what the level has left. Adding a pack of level l lowers u on [l, k), hence R on [j0, k)
// for the j0 below l where the minimum of u over [j0, l) first reaches R(l): the used slack grows
// on [j0, l) alone, and the free slots receive one pack of level j0 fewer. Removing mirrors it.
// The trees hold values of type V: in a completable state 0 <= u(j) <= k and the slack used is
// at most k, so the slack left, which is only compared with what is used, is kept within
// [-(k + 2), k + 1], the same answers in values within 2k + 2 of zero (int32 for the pin's
// levels up to `narrow_levels`: the trees then take half the memory, and the caches hold more).
template <class V>
class completion {
 public:
  // Rank state: `cnt` its level counts (a completable state), `slack_left` what each level has
  // left, `lo` / `hi` the band quantiles; fill_lo / fill_hi what its free slots add at them.
  void build(const std::int32_t* cnt, std::size_t k, const std::int64_t* slack_left,
             const std::int64_t* lo, const std::int64_t* hi) {
    k_ = k;
    lo_ = lo;
    hi_ = hi;
    scratch_.resize(k);
    std::int64_t held = 0;
    for (std::size_t j = 0; j < k; ++j) {
      held += cnt[j];
      scratch_[j] = static_cast<V>(static_cast<std::int64_t>(j) + 1 - held);
    }
    upper_.assign(scratch_.data(), k);
    // Received counts R, downward; then the spare slack, in place.
    const auto kept = [&](std::int64_t slack) {
      const auto most = static_cast<std::int64_t>(k) + 1;
      return std::clamp<std::int64_t>(slack, -most - 1, most);
    };
    fill_lo = 0;
    fill_hi = 0;
    std::int64_t next = scratch_[k - 1];
    scratch_[k - 1] = static_cast<V>(kept(slack_left[k - 1]));
    for (std::size_t j = k - 1; j-- > 0;) {
      const std::int64_t received = std::min<std::int64_t>(scratch_[j], next);
      fill_lo += (next - received) * lo[j + 1];
      fill_hi += (next - received) * hi[j + 1];
      scratch_[j] = static_cast<V>(kept(slack_left[j]) - (scratch_[j] - received));
      next = received;
    }
    fill_lo += next * lo[0];
    fill_hi += next * hi[0];
    spare_.assign(scratch_.data(), k);
  }

  // Whether one more pack of level l keeps the rank completable; if so, `j0` for add().
  bool can_add(std::size_t l, std::size_t& j0) const {
    const V r_l = upper_.min(l, k_);
    if (r_l < 1) {
      return false;
    }
    j0 = static_cast<std::size_t>(upper_.last_below(l, r_l) + 1);
    return spare_.min(j0, l) >= 1;
  }

  // What fill_lo would be after add(l, j0).
  std::int64_t fill_lo_after_add(std::size_t j0) const { return fill_lo - lo_[j0]; }

  void add(std::size_t l, std::size_t j0) {
    upper_.add(l, k_, -1);
    spare_.add(j0, l, -1);
    fill_lo -= lo_[j0];
    fill_hi -= hi_[j0];
  }

  void remove(std::size_t l) {
    const V r_l = upper_.min(l, k_);
    const auto j1 = static_cast<std::size_t>(upper_.last_below(l, r_l + 1) + 1);
    upper_.add(l, k_, 1);
    spare_.add(j1, l, 1);
    fill_lo += lo_[j1];
    fill_hi += hi_[j1];
  }

  std::int64_t fill_lo = 0, fill_hi = 0;

 private:
  std::size_t k_ = 0;
  const std::int64_t* lo_ = nullptr;
  const std::int64_t* hi_ = nullptr;
  min_add_tree<V> upper_; // u(j)
  min_add_tree<V> spare_; // slack left at j (kept within range) less the slack used there
  std::vector<V> scratch_;
};

/// Stage 2, phase 1: pin. Every rank keeps its own packs, largest bytes first, while it can
/// still be completed within the limit.
///
/// Starts from an empty placement (clearing every pack's place and lock, rank by rank); ends with
/// each rank holding only own packs, all locked (the pins), such that every rank can still be
/// completed to k packs within its level constraints, taking the slack of each level from a
/// budget shared by all ranks (`slack_left_`).
///
/// Complexity: O(k) per rank for the band sums, then per own pack O(1) while the rank holds at
/// most one pack per level, else O(log k) through the rank's `completion` tree (built once, in
/// O(k), when the rank may first take a second pack of a level, which needs slack at the level
/// below: never where costs are distinct): O(n log k) at worst, O(n) for distinct costs.
class pin_phase {
 public:
  // (1) Keep own packs, largest weighted bytes first, while the rank can still be completed and
  // completing it with cheap packs of the levels it lacks (the low band quantile of each) stays
  // within the limit; then, while even expensive packs (the high quantile) would leave it short of
  // the average load, give up the kept packs that weigh least and cost less than that quantile:
  // such a rank must take a share of the heavy packs others give up.
  void run(state& st, const tuning& t) {
    if (st.k <= narrow_levels) {
      pin_ranks(st, t, narrow_);
    } else {
      pin_ranks(st, t, wide_);
    }
  }

  // Levels up to which the completion trees hold int32 values (see completion).
  static constexpr std::size_t narrow_levels = std::size_t{1} << 24;

 private:
  template <class Tree>
  void pin_ranks(state& st, const tuning& t, Tree& tree) {
    const std::int64_t target =
        std::min(st.limit, (st.total_cost + static_cast<std::int64_t>(st.dp) - 1) /
                               static_cast<std::int64_t>(st.dp));
    const auto lo = st.level_quantile(t.band_low_permille);
    const auto hi = st.level_quantile(t.band_high_permille);
    slack_left_ = st.slack;
    deficit_.assign(st.k, 0);
    const auto& own = st.own;
    const auto& first = st.own_first;
    // While a rank holds at most one pack per level it uses no slack, is completable, and its
    // free slots receive one pack of each level it lacks: an O(1) check with band sums kept up
    // to date. From its first pack of a level it already holds, the rank's `completion` tree
    // answers instead, in O(log k).
    std::int64_t all_lo = 0;
    std::int64_t all_hi = 0;
    for (std::size_t j = 0; j < st.k; ++j) {
      all_lo += lo[j];
      all_hi += hi[j];
    }
    for (std::size_t r = 0; r < st.dp; ++r) {
      if (r + 1 < st.dp) {
        for (std::size_t i = first[r + 1]; i < first[r + 2]; ++i) {
          prefetch(&st.pk[static_cast<std::size_t>(own[i])]); // the next rank's packs
        }
      }
      const auto begin = own.begin() + static_cast<std::ptrdiff_t>(first[r]);
      const auto end = own.begin() + static_cast<std::ptrdiff_t>(first[r + 1]);
      for (auto it = begin; it != end; ++it) {
        st.pk[static_cast<std::size_t>(*it)].rank = -1; // unplaced, from an earlier run
      }
      const std::int32_t* cnt = &st.cnt[r * st.k];
      std::int64_t missing_lo = all_lo;
      std::int64_t missing_hi = all_hi;
      bool tracked = false;     // tree holds the rank
      std::int32_t doubled = 0; // levels where r holds two or more packs
      const auto level_of = [&](std::size_t p) { return static_cast<std::size_t>(st.pk[p].level); };
      const auto add = [&](std::size_t p) {
        const auto l = level_of(p);
        if (cnt[l] == 0) {
          missing_lo -= lo[l];
          missing_hi -= hi[l];
        } else if (cnt[l] == 1) {
          ++doubled;
        }
        st.place(p, r);
      };
      const auto remove = [&](std::size_t p) {
        st.unplace(p);
        const auto l = level_of(p);
        if (cnt[l] == 0) {
          missing_lo += lo[l];
          missing_hi += hi[l];
        } else if (cnt[l] == 1) {
          --doubled;
        }
        if (tracked) {
          tree.remove(l);
        }
      };
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        const std::int64_t load = st.load[r] + st.pk[p].cost;
        if (load > st.limit) {
          continue;
        }
        const auto l = level_of(p);
        if (!tracked && cnt[l] != 0) {
          // Holding one pack of each level it holds, u rises with j and R(l) = u(l) = u(l - 1):
          // a second pack of level l needs R(l) >= 1 (so l > 0) and, as j0 <= l - 1, slack left
          // at level l - 1. Where there is none (every level, when no costs tie across a chunk
          // boundary) the tree would refuse it: refused without building the tree.
          if (l == 0 || slack_left_[l - 1] <= 0) {
            continue;
          }
          tree.build(cnt, st.k, slack_left_.data(), lo.data(), hi.data());
          tracked = true;
        }
        if (!tracked) {
          // One pack per level stays completable; its free slots lose level l's quantile.
          if (load + missing_lo - lo[l] <= st.limit) {
            add(p);
          }
          continue;
        }
        std::size_t j0 = 0;
        if (tree.can_add(l, j0) && load + tree.fill_lo_after_add(j0) <= st.limit) {
          add(p);
          tree.add(l, j0);
        }
      }
      // Too light to reach the average load even with expensive packs in its free slots: give up
      // cheap packs, lightest bytes first. (The average, not the limit: with eps > 0 the limit
      // sits above the average, and aiming every light rank at it would unpin for nothing.)
      // Giving up a pack never makes a rank incompletable.
      const auto fill_hi = [&] { return tracked ? tree.fill_hi : missing_hi; };
      for (auto it = end; it != begin && st.load[r] + fill_hi() < target;) {
        --it;
        const auto p = static_cast<std::size_t>(*it);
        if (st.pk[p].rank == static_cast<std::int32_t>(r) && st.pk[p].cost < hi[level_of(p)]) {
          remove(p);
        }
      }
      if (doubled != 0) {
        const bool ok = completable(st, r); // deficit_ for the final pinned set
        (void)ok;
        commit_deficits(st);
      }
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        st.locked[p] = st.pk[p].rank >= 0 ? 1 : 0; // the pins
      }
    }
  }

  // Can rank r, holding what it holds now, still be completed? Free slots take packs of any
  // level, so it can iff some non-decreasing count of received packs R(j) (packs of level <= j it
  // will receive) fits j + 1 - held(<= j) - slack(j) <= R(j) <= j + 1 - held(<= j) and ends at the
  // number of free slots. Takes the largest such R, which uses the least slack: writes the slack
  // it uses per level into `deficit_` (checking it against what other ranks left). O(k).
  bool completable(const state& st, std::size_t r) {
    std::int32_t* upper = deficit_.data();
    const std::int32_t* c = &st.cnt[r * st.k];
    std::int32_t held = 0;
    bool ok = true;
    for (std::size_t j = 0; j < st.k; ++j) {
      held += c[j];
      upper[j] = static_cast<std::int32_t>(j) + 1 - held;
      ok &= upper[j] >= 0;
    }
    if (!ok) {
      return false;
    }
    // Level k - 1 first (nothing above it is received), then downward.
    std::int32_t next = upper[st.k - 1];
    upper[st.k - 1] = 0;
    for (std::size_t j = st.k - 1; j-- > 0;) {
      const std::int32_t received = std::min(upper[j], next); // R(j)
      upper[j] -= received;                                   // now the slack used at j
      ok &= upper[j] <= slack_left_[j];
      next = received;
    }
    return ok;
  }

  void commit_deficits(const state& st) {
    for (std::size_t j = 0; j < st.k; ++j) {
      slack_left_[j] -= deficit_[j];
    }
  }

  std::vector<std::int64_t> slack_left_; // per level, after the ranks pinned so far
  std::vector<std::int32_t> deficit_;    // scratch for completable()
  // The rank being pinned, once it may double a level: int32 trees up to narrow_levels levels.
  completion<std::int32_t> narrow_;
  completion<std::int64_t> wide_;
};

} // namespace packswap::detail::stage2
