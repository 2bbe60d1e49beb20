#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
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

} // namespace packswap::detail::stage2
