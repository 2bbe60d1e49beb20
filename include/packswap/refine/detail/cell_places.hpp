#pragma once

#include "packswap/batch.hpp"
#include "packswap/refine/detail/rank_weights.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace packswap::detail {

/// What a bring-home trade asks of the pack it takes: a cost within [lo, hi], and a reach (its
/// cost plus the room its cell has left under the micro-step's cap) of at least `need`.
struct place_fit {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  std::int64_t need = 0;
};

/// The places of every rank of an assignment of cells of several packs, for stage 2's
/// bring-home (`bring_home_cells`): beside every place (`r * k + i`, k packs per rank), the pack
/// there and what a trade reads of it, in contiguous arrays; the load of every rank and cell;
/// and every rank's places ordered by (cost, place), cut into blocks of `width` entries, each
/// with a bound on the reach of its places that hold a pack from another rank, the bounds in a
/// tree of maxima per rank.
///
/// Invariant: a block's bound is at least the greatest such reach among its entries. A trade
/// raises the bounds its changes may break (the blocks its two entries move into or through, the
/// blocks of the places of its two cells, whose loads changed); a query that reads a block whole
/// lowers its bound to the truth, so a bound too high costs one read of the block in vain.
///
/// A query (`each_fit`) finds the first entry of the cost window by binary search, then, down
/// the tree, each next block of the window whose bound reaches the need: O(log k) and `width`
/// entries per block read. Every block read lies in the window and holds a place that qualifies,
/// but for the window's two end blocks and those whose bound was too high; O(k) at worst.
/// A trade costs O(mbs log k + the distance its two entries move in cost order).
class cell_places {
 public:
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

  /// Indexes the assignment `a` (valid: every cell holds mbs packs) of `packs`, in the memory
  /// of earlier calls where it is large enough. O(N log N).
  void prepare(span<const pack_meta> packs, const shape& s, const topology& topo,
               span<const std::int64_t> caps, const assignment& a) {
    caps_ = caps;
    k_ = static_cast<std::size_t>(s.packs_per_rank());
    ga_ = static_cast<std::size_t>(s.ga);
    mbs_ = static_cast<std::size_t>(s.mbs);
    const auto dp = static_cast<std::size_t>(s.dp);
    const std::size_t n = packs.size();
    ranks_.assign(topo, dp);
    blocks_per_rank_ = (k_ + width - 1) / width;
    leaves_ = 1;
    while (leaves_ < blocks_per_rank_) {
      leaves_ *= 2;
    }
    item.resize(n);
    slot.resize(n);
    cost.resize(n);
    bytes.resize(n);
    src.resize(n);
    step.resize(n);
    cell_load.assign(dp * ga_, 0);
    rank_load.assign(dp, 0);
    cell_place_.resize(n);
    auto& used = used_;
    auto& cell_used = cell_used_;
    used.assign(dp, 0);
    cell_used.assign(dp * ga_, 0);
    for (std::size_t p = 0; p < n; ++p) {
      const auto r = static_cast<std::size_t>(a[p].rank);
      const std::size_t c = r * ga_ + static_cast<std::size_t>(a[p].micro_step);
      const std::size_t at = r * k_ + used[r]++;
      cell_load[c] += packs[p].cost;
      rank_load[r] += packs[p].cost;
      slot[p] = static_cast<std::int32_t>(at - r * k_);
      item[at] = static_cast<std::int32_t>(p);
      cell_place_[c * mbs_ + cell_used[c]++] = static_cast<std::int32_t>(at);
      cost[at] = packs[p].cost;
      bytes[at] = packs[p].bytes;
      src[at] = packs[p].source_rank;
      step[at] = a[p].micro_step;
    }
    order_.resize(n);
    pos_.resize(n);
    for (std::size_t r = 0; r < dp; ++r) {
      const auto first = order_.begin() + static_cast<std::ptrdiff_t>(r * k_);
      for (std::size_t i = 0; i < k_; ++i) {
        first[static_cast<std::ptrdiff_t>(i)] = make_entry(r * k_ + i);
      }
      std::sort(first, first + static_cast<std::ptrdiff_t>(k_));
      for (std::size_t i = 0; i < k_; ++i) {
        pos_[order_[r * k_ + i].at] = static_cast<std::int32_t>(i);
      }
    }
    tree_.assign(dp * 2 * leaves_, unreachable);
    for (std::size_t r = 0; r < dp; ++r) {
      std::int64_t* const t = tree_.data() + r * 2 * leaves_;
      for (std::size_t i = 0; i < k_; ++i) {
        std::int64_t& leaf = t[leaves_ + i / width];
        leaf = std::max(leaf, reach(r, order_[r * k_ + i]));
      }
      for (std::size_t x = leaves_; x-- > 1;) {
        t[x] = std::max(t[2 * x], t[2 * x + 1]);
      }
    }
  }

  /// Places per block.
  static constexpr std::size_t width = 16;

  /// Calls `visit(at)` for every place of rank h whose pack comes from another rank and meets
  /// `f`, in the order of their (cost, place). A block read whole keeps its true greatest reach.
  template <class Visit>
  void each_fit(std::size_t h, const place_fit& f, Visit&& visit) {
    if (f.lo > f.hi) {
      return;
    }
    const entry* const base = order_.data() + h * k_;
    const auto from =
        static_cast<std::size_t>(std::lower_bound(base, base + k_, entry{f.lo, 0, 0, 0}) - base);
    for (std::size_t j = from / width; (j = next_block(h, j, f.need)) != none; ++j) {
      const std::size_t begin = std::max(from, j * width);
      const std::size_t end = std::min((j + 1) * width, k_);
      std::int64_t most = unreachable;
      for (std::size_t i = begin; i < end; ++i) {
        if (base[i].cost > f.hi) {
          return;
        }
        const std::int64_t reach_i = reach(h, base[i]);
        most = std::max(most, reach_i);
        if (reach_i >= f.need) {
          visit(base[i].at);
        }
      }
      if (begin == j * width) {
        set_block(h, j, most);
      }
    }
  }

  /// Exchanges the packs of place `at_p` (rank r) and `at_q` (rank h), with the loads, the
  /// orders and the blocks.
  void trade(std::size_t at_p, std::size_t at_q) {
    const std::size_t r = at_p / k_;
    const std::size_t h = at_q / k_;
    const auto p = static_cast<std::size_t>(item[at_p]);
    const auto q = static_cast<std::size_t>(item[at_q]);
    const std::size_t cp = r * ga_ + static_cast<std::size_t>(step[at_p]);
    const std::size_t cq = h * ga_ + static_cast<std::size_t>(step[at_q]);
    const std::int64_t d = cost[at_p] - cost[at_q];
    rank_load[h] += d;
    rank_load[r] -= d;
    cell_load[cq] += d;
    cell_load[cp] -= d;
    std::swap(item[at_p], item[at_q]);
    std::swap(cost[at_p], cost[at_q]);
    std::swap(bytes[at_p], bytes[at_q]);
    std::swap(src[at_p], src[at_q]);
    std::swap(slot[p], slot[q]);
    reorder(at_p);
    reorder(at_q);
    raise_cell(cp);
    raise_cell(cq);
  }

  /// Weight of one byte computed on rank r that comes from rank h (`topology::weight`).
  [[nodiscard]] std::int64_t weight(std::size_t h, std::size_t r) const {
    return ranks_.weight(h, r);
  }

  /// The place of pack p, which rank r holds.
  [[nodiscard]] std::size_t place_of(std::size_t p, std::size_t r) const {
    return r * k_ + static_cast<std::size_t>(slot[p]);
  }

  // Beside every place: the pack there, its cost, bytes, home rank and micro-step (the place's);
  // beside every pack, its slot within its rank.
  std::vector<std::int32_t> item;
  std::vector<std::int32_t> slot;
  std::vector<std::int64_t> cost;
  std::vector<std::int64_t> bytes;
  std::vector<std::int32_t> src;
  std::vector<std::int32_t> step;
  std::vector<std::int64_t> cell_load; // r * ga + m
  std::vector<std::int64_t> rank_load;

 private:
  // A place in its rank's order, with what the reach reads of it.
  struct entry {
    std::int64_t cost;
    std::size_t at;
    std::int32_t src;
    std::int32_t step;
    bool operator<(const entry& o) const { return cost < o.cost || (cost == o.cost && at < o.at); }
  };

  static constexpr std::int64_t unreachable = std::numeric_limits<std::int64_t>::min();

  [[nodiscard]] entry make_entry(std::size_t at) const { return {cost[at], at, src[at], step[at]}; }

  // The reach of entry e of rank h, or `unreachable` when its pack is at home there.
  [[nodiscard]] std::int64_t reach(std::size_t h, const entry& e) const {
    if (static_cast<std::size_t>(e.src) == h) {
      return unreachable;
    }
    const auto m = static_cast<std::size_t>(e.step);
    return e.cost + caps_[m] - cell_load[h * ga_ + m];
  }

  // The first block j' >= j of rank h whose bound reaches `need`, or `none`: up the rank's
  // tree of bounds to the first subtree on the right that reaches it, then down to its leaf.
  [[nodiscard]] std::size_t next_block(std::size_t h, std::size_t j, std::int64_t need) const {
    if (j >= blocks_per_rank_) {
      return none;
    }
    const std::int64_t* const t = tree_.data() + h * 2 * leaves_;
    std::size_t x = leaves_ + j;
    while (t[x] < need) {
      while ((x & 1) != 0) {
        x >>= 1;
        if (x == 0) {
          return none;
        }
      }
      ++x;
    }
    while (x < leaves_) {
      x = t[2 * x] >= need ? 2 * x : 2 * x + 1;
    }
    return x - leaves_;
  }

  // Block j of rank h's bound becomes `v` (its greatest reach, as a whole read found); the
  // maxima above it are summed again up to the first that stays.
  void set_block(std::size_t h, std::size_t j, std::int64_t v) {
    std::int64_t* const t = tree_.data() + h * 2 * leaves_;
    std::size_t x = leaves_ + j;
    if (t[x] == v) {
      return;
    }
    t[x] = v;
    for (x >>= 1; x > 0; x >>= 1) {
      const std::int64_t most = std::max(t[2 * x], t[2 * x + 1]);
      if (t[x] == most) {
        return;
      }
      t[x] = most;
    }
  }

  // Raises the bound of the block that holds entry i of rank h to the entry's reach.
  void raise(std::size_t h, std::size_t i) {
    const std::int64_t v = reach(h, order_[h * k_ + i]);
    std::int64_t* const t = tree_.data() + h * 2 * leaves_;
    for (std::size_t x = leaves_ + i / width; x > 0 && t[x] < v; x >>= 1) {
      t[x] = v;
    }
  }

  // Moves place `at`'s entry to where its (new) cost sorts; every entry it pushes into another
  // block raises that block's bound. Its own block's bound is raised by the caller (`trade`
  // raises the blocks of every place of both cells).
  void reorder(std::size_t at) {
    const std::size_t h = at / k_;
    entry* const base = order_.data() + h * k_;
    auto i = static_cast<std::size_t>(pos_[at]);
    const entry e = make_entry(at);
    while (i + 1 < k_ && base[i + 1] < e) {
      base[i] = base[i + 1];
      pos_[base[i].at] = static_cast<std::int32_t>(i);
      if ((i + 1) % width == 0) {
        raise(h, i);
      }
      ++i;
    }
    while (i > 0 && e < base[i - 1]) {
      base[i] = base[i - 1];
      pos_[base[i].at] = static_cast<std::int32_t>(i);
      if (i % width == 0) {
        raise(h, i);
      }
      --i;
    }
    base[i] = e;
    pos_[at] = static_cast<std::int32_t>(i);
  }

  // A cell's load changed: its places' blocks' bounds rise to their reach (a bound that is
  // now too high stays until a query reads the block whole).
  void raise_cell(std::size_t c) {
    for (std::size_t j = 0; j < mbs_; ++j) {
      const auto at = static_cast<std::size_t>(cell_place_[c * mbs_ + j]);
      raise(at / k_, static_cast<std::size_t>(pos_[at]));
    }
  }

  span<const std::int64_t> caps_;
  rank_weights ranks_;
  std::size_t k_ = 0;
  std::size_t ga_ = 0;
  std::size_t mbs_ = 0;
  std::size_t blocks_per_rank_ = 1;
  std::size_t leaves_ = 1;               // blocks_per_rank_ rounded up to a power of two
  std::vector<std::int32_t> cell_place_; // (r * ga + m) * mbs + j: the places of a cell
  std::vector<entry> order_;             // r * k + i: rank r's places by (cost, place)
  std::vector<std::int32_t> pos_;        // where a place's entry is in its rank's order
  // r * 2 * leaves_ + x: rank r's tree of block bounds, node x's children 2x and 2x + 1, block
  // j's bound at leaves_ + j (past the rank's last block: unreachable), an inner node the
  // greatest of its children's.
  std::vector<std::int64_t> tree_;
  std::vector<std::size_t> used_;      // prepare's count of places per rank
  std::vector<std::size_t> cell_used_; // and per cell
};

} // namespace packswap::detail
