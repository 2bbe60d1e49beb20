#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/products.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/topology.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace packswap::detail {

/// Stage 2 for two ranks (dp = 2, mbs = 1), solved on the exact shape of its answers.
///
/// The shape. Sort the packs by cost (descending) into runs of equal cost; run k ends at sorted
/// position e_k. With two ranks, an assignment keeps A = LB_A (every rank's i-th largest pack at
/// or below the cost at sorted position 2i) exactly where, after every run, rank 0 holds
/// floor(e_k / 2) or ceil(e_k / 2) of the packs so far: one choice, x_k in {0, 1}, at each run
/// that ends at an odd position. Run k then gives rank 0 t_k = floor(e_k / 2) - floor(e_{k-1} /
/// 2) + x_k - x_{k-1} of its packs, and which of them is free (equal costs): each rank keeps its
/// own first, the dearest to move first, and takes the other's cheapest, so a run's moved bytes
/// f_k(t_k) are a prefix sum. Rank 0's load is a constant plus the sum of x_k (c_k - c_{k+1}),
/// the cost gap after the run. (With distinct costs every run is one pack, and the choices are
/// which rank gets the dearer pack of each pair of sorted positions 2i and 2i + 1.)
///
/// The steps, in integers with explicit tie-breaks:
/// 1. the choices that move the fewest weighted bytes, by dynamic programming along the runs
///    (two states a run; ties: 0): the fewest of any answer, whatever the balance;
/// 2. where rank 0's load is outside the window the limit leaves it, [total - limit, limit],
///    choices flipped towards it, fewest extra bytes per unit of load first (ties: the larger
///    gap, then the earlier run), each priced as the batch then stands (a flip changes the price
///    of its neighbours' flips, read again when they come up). A flip that would carry the load
///    past the window is skipped; one that lands it inside is weighed as an answer (with the
///    flips taken before it) but not taken, and the walk goes on with the finer flips after it;
/// 3. from where the walk ends, the one flip or two (a flip back included) that land the load
///    inside with the fewest extra bytes, if that is cheaper than the walk's best answer (at eps
///    = 0 the window may be a few units wide): the flips sorted by the load they carry and, for
///    each, the cheapest partner in the range of loads that fits, from a minimum tree over that
///    order (two neighbouring flips are priced apart there, then together before one is taken);
/// 4. where a flip of step 1's choices carries the load across the whole window (a dear run's,
///    whose cost gap is wider than the window), steps 2 and 3 again from step 1's choices with
///    the cheapest such flip taken first, walking back, and the answer of the two that moves
///    fewer bytes kept: an answer inside such a window can need that coarse flip and fine ones
///    back, which a walk from one side never takes (at eps = 0 on the stress set at 2 x 1,024,
///    `lognormal`, `bimodal` and `bytes_tied` batches: up to 0.05 of Karmarkar-Karp's bytes fewer,
///    the fewest within the limit on three of four).
///
/// The caller (`refine_sorted`) takes this answer without the search where it moves step 1's
/// bytes (step 1 lands inside the window, or step 2's flips cost nothing), the fewest of any;
/// else it keeps it where it moves fewer weighted bytes than the search's.
///
/// Complexity: O(n + L log L) over runs of L packs to build the runs; O(K) for the K runs' dynamic
/// programming; O(m log m) for each of the m choices' two walks (a heap, each choice read at
/// most four times) and their pairs. Counted as work, in those units: at most `work_bound(n)`.
class two_ranks {
 public:
  /// Finds an answer for the packs of two ranks in `order` (cost descending, ties by id) that
  /// keeps both ranks within `limit` and A at LB_A, and moves fewer than `below` weighted bytes:
  /// false where steps 2 and 3 find none. `write` gives it.
  bool run(span<const pack_meta> packs, span<const std::int32_t> order, std::int64_t limit,
           const topology& topo, std::int64_t below) {
    const std::size_t n = order.size();
    work_ = static_cast<std::int64_t>(n);
    if (n % 2 != 0) {
      return false;
    }
    build_runs(packs, order, topo);
    std::int64_t total = 0;
    for (const auto& r : runs_) {
      total += r.cost * (r.end - r.start);
    }
    lo_ = total - limit;
    hi_ = limit;
    if (lo_ > hi_) {
      return false;
    }
    fewest();
    fewest_ = moved_;
    if (!inside()) {
      walk_both_ways();
    }
    return inside() && moved_ < below;
  }

  /// Writes the last successful `run`'s answer into `a` (ranks and micro-steps), for the same
  /// `order`.
  void write(span<const std::int32_t> order, assignment& a) const {
    for (std::size_t k = 0; k < runs_.size(); ++k) {
      const auto& r = runs_[k];
      const std::int32_t t = taken(k);
      // Own packs of rank 0 (dearest to move first), then of rank 1 (likewise): rank 0 keeps its
      // first min(t, h0) own packs and takes rank 1's last t - h0.
      for (std::int32_t i = 0; i < r.h0; ++i) {
        a[static_cast<std::size_t>(members_[static_cast<std::size_t>(r.start + i)])].rank =
            i < t ? 0 : 1;
      }
      const std::int32_t h1 = r.end - r.start - r.h0;
      for (std::int32_t i = 0; i < h1; ++i) {
        a[static_cast<std::size_t>(members_[static_cast<std::size_t>(r.start + r.h0 + i)])].rank =
            i < h1 - std::max<std::int32_t>(t - r.h0, 0) ? 1 : 0;
      }
    }
    std::array<std::int32_t, 2> used{};
    for (const auto p : order) {
      auto& c = a[static_cast<std::size_t>(p)];
      c.micro_step = used[static_cast<std::size_t>(c.rank)]++;
    }
  }

  /// Whether the last successful `run`'s answer moves the fewest bytes of any that keeps A, the
  /// limit aside (step 1's): where step 1 lands inside the window, or step 2 finds flips that
  /// cost nothing.
  [[nodiscard]] bool fewest_of_any() const noexcept { return moved_ == fewest_; }
  /// The weighted bytes the last successful `run` moves.
  [[nodiscard]] std::int64_t weighted_moved() const noexcept { return moved_; }
  /// The work the last `run` did.
  [[nodiscard]] std::int64_t work() const noexcept { return work_; }

  /// The most work a `run` does for n packs: 5 n + 7 n ceil(log2(n + 1)).
  static constexpr std::int64_t work_bound(std::int64_t n) {
    return 5 * n + 7 * n * bit_width_of(static_cast<std::uint64_t>(n));
  }

 private:
  // A run of equal costs: sorted positions [start, end), h0 packs from rank 0. Its members sit at
  // members_[start, end): rank 0's own, dearest to move first, then rank 1's likewise; pre_[at +
  // j] for j <= h0 is the sum of the j cheapest of rank 0's own to move, pre_[at + h0 + 1 + j]
  // likewise of rank 1's.
  struct run_of {
    std::int64_t cost = 0;
    std::int32_t start = 0, end = 0, h0 = 0;
    std::size_t at = 0;
  };

  // A flip of the choice after run `k`: rank 0's load changes by `load`, the bytes by `bytes`.
  struct flip {
    std::int64_t load = 0, bytes = 0;
    std::int32_t k = 0;
  };

  [[nodiscard]] bool inside() const noexcept { return load_ >= lo_ && load_ <= hi_; }

  // Whether run k ends at an odd position (and is not the last): a choice follows it.
  [[nodiscard]] bool chooses(std::size_t k) const noexcept { return runs_[k].end % 2 == 1; }

  // Whether flipping the choice after run k moves rank 0's load down (`down`) or up: 1 -> 0
  // lowers it by the cost gap after the run, 0 -> 1 raises it.
  [[nodiscard]] bool flips_towards(std::size_t k, bool down) const noexcept {
    return chooses(k) && (x_[k] != 0) == down;
  }

  // Rank 0's packs of run k under the choices x_.
  [[nodiscard]] std::int32_t taken(std::size_t k) const noexcept {
    const auto& r = runs_[k];
    return r.end / 2 - r.start / 2 + x_[k] - (k == 0 ? 0 : x_[k - 1]);
  }

  // The weighted bytes run k moves when rank 0 takes t of its packs.
  [[nodiscard]] std::int64_t cost_of(std::size_t k, std::int32_t t) const noexcept {
    const auto& r = runs_[k];
    return t <= r.h0 ? pre_[r.at + static_cast<std::size_t>(r.h0 - t)]
                     : pre_[r.at + static_cast<std::size_t>(r.h0 + 1 + t - r.h0)];
  }

  // The flip of the choice after run k, from the present choices.
  [[nodiscard]] flip flip_of(std::size_t k) const noexcept {
    const std::int32_t d = x_[k] == 0 ? 1 : -1;
    const std::int32_t t = taken(k);
    const std::int32_t u = taken(k + 1);
    return {d * (runs_[k].cost - runs_[k + 1].cost),
            cost_of(k, t + d) - cost_of(k, t) + cost_of(k + 1, u - d) - cost_of(k + 1, u),
            static_cast<std::int32_t>(k)};
  }

  void apply(std::size_t k) noexcept {
    const flip f = flip_of(k);
    x_[k] = static_cast<std::int8_t>(1 - x_[k]);
    load_ += f.load;
    moved_ += f.bytes;
  }

  // Runs, their members and their prefix sums; O(n + L log L) per run of L.
  void build_runs(span<const pack_meta> packs, span<const std::int32_t> order,
                  const topology& topo) {
    const std::size_t n = order.size();
    runs_.clear();
    members_.resize(n);
    pre_.clear();
    const auto away = [&](std::int32_t p) {
      const auto& m = packs[static_cast<std::size_t>(p)];
      return m.bytes * topo.weight(m.source_rank, m.source_rank == 0 ? 1 : 0);
    };
    const auto dearer = [&](std::int32_t x, std::int32_t y) {
      const auto ax = away(x);
      const auto ay = away(y);
      return ax != ay ? ax > ay : x < y;
    };
    for (std::size_t s = 0; s < n;) {
      run_of r;
      r.cost = packs[static_cast<std::size_t>(order[s])].cost;
      std::size_t e = s;
      std::size_t own0 = s;
      // Rank 0's own packs first, then rank 1's, each in id order, then sorted by what moving
      // them costs.
      while (e < n && packs[static_cast<std::size_t>(order[e])].cost == r.cost) {
        ++e;
      }
      for (std::size_t q = s; q < e; ++q) {
        if (packs[static_cast<std::size_t>(order[q])].source_rank == 0) {
          members_[own0++] = order[q];
        }
      }
      std::size_t own1 = own0;
      for (std::size_t q = s; q < e; ++q) {
        if (packs[static_cast<std::size_t>(order[q])].source_rank != 0) {
          members_[own1++] = order[q];
        }
      }
      if (e - s > 1) {
        work_ += static_cast<std::int64_t>(e - s) * bit_width_of(e - s);
        std::sort(members_.begin() + static_cast<std::ptrdiff_t>(s),
                  members_.begin() + static_cast<std::ptrdiff_t>(own0), dearer);
        std::sort(members_.begin() + static_cast<std::ptrdiff_t>(own0),
                  members_.begin() + static_cast<std::ptrdiff_t>(e), dearer);
      }
      r.start = static_cast<std::int32_t>(s);
      r.end = static_cast<std::int32_t>(e);
      r.h0 = static_cast<std::int32_t>(own0 - s);
      r.at = pre_.size();
      // The cheapest to move are last: sums from the back of each part.
      for (const auto& [from, to] : {std::make_pair(s, own0), std::make_pair(own0, e)}) {
        std::int64_t sum = 0;
        pre_.push_back(0);
        for (std::size_t q = to; q > from; --q) {
          sum += away(members_[q - 1]);
          pre_.push_back(sum);
        }
      }
      runs_.push_back(r);
      s = e;
    }
  }

  // Step 1: the choices that move the fewest bytes, by dynamic programming along the runs; sets
  // x_, load_ and moved_.
  void fewest() {
    const std::size_t runs = runs_.size();
    work_ += 2 * static_cast<std::int64_t>(runs);
    x_.assign(runs, 0);
    from_.assign(2 * runs, 0);
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    // best[x]: the fewest bytes of runs 0 .. k with x_k = x.
    std::array<std::int64_t, 2> best{0, none};
    for (std::size_t k = 0; k < runs; ++k) {
      std::array<std::int64_t, 2> next{none, none};
      const std::int32_t states = chooses(k) ? 2 : 1;
      for (std::int32_t x = 0; x < states; ++x) {
        for (std::int32_t before = 0; before < 2; ++before) {
          if (best[static_cast<std::size_t>(before)] == none) {
            continue;
          }
          const auto& r = runs_[k];
          const std::int32_t t = r.end / 2 - r.start / 2 + x - before;
          const std::int64_t c = best[static_cast<std::size_t>(before)] + cost_of(k, t);
          if (c < next[static_cast<std::size_t>(x)]) {
            next[static_cast<std::size_t>(x)] = c;
            from_[2 * k + static_cast<std::size_t>(x)] = static_cast<std::int8_t>(before);
          }
        }
      }
      best = next;
    }
    moved_ = best[0];
    std::int32_t x = 0;
    for (std::size_t k = runs; k-- > 0;) {
      x_[k] = static_cast<std::int8_t>(x);
      x = from_[2 * k + static_cast<std::size_t>(x)];
    }
    load_ = 0;
    for (std::size_t k = 0; k < runs; ++k) {
      load_ += runs_[k].cost * taken(k);
    }
  }

  // Whether x bytes per y load is less than u per v (y, v > 0; bytes of either sign), exactly.
  static bool cheaper(std::int64_t x, std::int64_t y, std::int64_t u, std::int64_t v) noexcept {
    if ((x < 0) != (u < 0)) {
      return x < 0;
    }
    return x < 0 ? compare_products(-u, y, -x, v) < 0 : compare_products(x, v, u, y) < 0;
  }

  // The heap's order: the cheapest per unit of load on top (ties: the larger gap, then the
  // earlier run).
  struct later {
    bool operator()(const flip& a, const flip& b) const noexcept {
      const std::int64_t ga = a.load < 0 ? -a.load : a.load;
      const std::int64_t gb = b.load < 0 ? -b.load : b.load;
      if (cheaper(b.bytes, gb, a.bytes, ga)) {
        return true;
      }
      if (cheaper(a.bytes, ga, b.bytes, gb)) {
        return false;
      }
      return ga != gb ? ga < gb : a.k > b.k;
    }
  };

  // Steps 2 and 3 (see the class comment); the cheapest answer they meet is taken.
  void walk() {
    const bool down = load_ > hi_;
    heap_.clear();
    for (std::size_t k = 0; k < runs_.size(); ++k) {
      if (flips_towards(k, down)) {
        heap_.push_back(flip_of(k));
      }
    }
    const std::size_t m = heap_.size();
    std::make_heap(heap_.begin(), heap_.end(), later{});
    const std::size_t most_reads = 4 * m;
    std::size_t reads = 0;
    taken_.clear();
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    std::int64_t landed = none; // the bytes of the cheapest answer the walk met
    std::size_t landed_after = 0;
    std::int32_t landed_k = -1;
    while (!heap_.empty() && reads < most_reads) {
      std::pop_heap(heap_.begin(), heap_.end(), later{});
      const flip top = heap_.back();
      heap_.pop_back();
      ++reads;
      const flip now = flip_of(static_cast<std::size_t>(top.k));
      if (now.bytes != top.bytes) {
        heap_.push_back(now); // priced again: a neighbour flipped
        std::push_heap(heap_.begin(), heap_.end(), later{});
        continue;
      }
      const std::int64_t to = load_ + now.load;
      if (down ? to < lo_ : to > hi_) {
        continue;
      }
      if (to >= lo_ && to <= hi_) {
        if (moved_ + now.bytes < landed) {
          landed = moved_ + now.bytes;
          landed_after = taken_.size();
          landed_k = now.k;
        }
        continue;
      }
      apply(static_cast<std::size_t>(now.k));
      taken_.push_back(now.k);
    }
    work_ += static_cast<std::int64_t>(reads) * bit_width_of(m);
    // Step 3 from where the walk ends, kept if cheaper than the walk's best answer.
    if (fix_one_or_two(landed)) {
      return;
    }
    if (landed_k < 0) {
      return;
    }
    while (taken_.size() > landed_after) {
      apply(static_cast<std::size_t>(taken_.back()));
      taken_.pop_back();
    }
    apply(static_cast<std::size_t>(landed_k));
  }

  // Steps 2 and 3 from step 1's choices, then again from them with the flip that carries the load
  // past the window (rank 0's load on the window's other side) for the fewest extra bytes taken
  // first, walking back; the answer moving fewer bytes is kept. O(K) more to find that flip,
  // and a second walk.
  void walk_both_ways() {
    const std::int32_t past = cheapest_past();
    if (past < 0) {
      walk();
      return;
    }
    other_.assign(x_.begin(), x_.end()); // step 1's choices
    const std::int64_t load = load_;
    const std::int64_t moved = moved_;
    walk();
    const bool first_in = inside();
    const std::int64_t first_load = load_;
    const std::int64_t first_moved = moved_;
    x_.swap(other_); // other_: the first walk's choices
    load_ = load;
    moved_ = moved;
    apply(static_cast<std::size_t>(past));
    walk();
    if (inside() && (!first_in || moved_ < first_moved)) {
      return;
    }
    x_.swap(other_);
    load_ = first_load;
    moved_ = first_moved;
  }

  // The choice whose flip carries rank 0's load from where it is across the whole window, for
  // the fewest extra bytes (ties: the earlier run); -1 if none does.
  std::int32_t cheapest_past() {
    const bool down = load_ > hi_;
    std::int32_t best = -1;
    std::int64_t best_bytes = 0;
    for (std::size_t k = 0; k < runs_.size(); ++k) {
      if (!flips_towards(k, down)) {
        continue;
      }
      const flip f = flip_of(k);
      const std::int64_t to = load_ + f.load;
      if ((down ? to < lo_ : to > hi_) && (best < 0 || f.bytes < best_bytes)) {
        best = static_cast<std::int32_t>(k);
        best_bytes = f.bytes;
      }
    }
    work_ += static_cast<std::int64_t>(runs_.size());
    return best;
  }

  // Step 3: the one flip or two that land the load inside the window with the fewest extra
  // bytes, taken where that is fewer than `landed`; false (choices unchanged) otherwise.
  bool fix_one_or_two(std::int64_t landed) {
    constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
    all_.clear();
    for (std::size_t k = 0; k < runs_.size(); ++k) {
      if (chooses(k)) {
        all_.push_back(flip_of(k));
      }
    }
    const std::size_t m = all_.size();
    if (m == 0) {
      return false;
    }
    work_ += 2 * static_cast<std::int64_t>(m) * bit_width_of(m);
    std::sort(all_.begin(), all_.end(), [](const flip& x, const flip& y) {
      return x.load != y.load ? x.load < y.load : x.k < y.k;
    });
    std::size_t leaves = 1;
    while (leaves < m) {
      leaves *= 2;
    }
    tree_.assign(2 * leaves, {none, 0});
    for (std::size_t j = 0; j < m; ++j) {
      tree_[leaves + j] = {all_[j].bytes, static_cast<std::int64_t>(j)};
    }
    for (std::size_t v = leaves - 1; v >= 1; --v) {
      tree_[v] = std::min(tree_[2 * v], tree_[2 * v + 1]);
    }
    // The cheapest flip among the sorted positions from `from` on whose load lies in [lo, hi].
    const auto least = [&](std::int64_t lo, std::int64_t hi, std::size_t from) {
      const auto end = all_.begin() + static_cast<std::ptrdiff_t>(m);
      const auto first = std::lower_bound(all_.begin() + static_cast<std::ptrdiff_t>(from), end, lo,
                                          [](const flip& f, std::int64_t v) { return f.load < v; });
      const auto last = std::upper_bound(first, end, hi,
                                         [](std::int64_t v, const flip& f) { return v < f.load; });
      std::pair<std::int64_t, std::int64_t> best{none, 0};
      for (std::size_t a = static_cast<std::size_t>(first - all_.begin()) + leaves,
                       b = static_cast<std::size_t>(last - all_.begin()) + leaves;
           a < b; a /= 2, b /= 2) {
        if (a % 2 == 1) {
          best = std::min(best, tree_[a++]);
        }
        if (b % 2 == 1) {
          best = std::min(best, tree_[--b]);
        }
      }
      return best;
    };
    const std::int64_t need_lo = lo_ - load_;
    const std::int64_t need_hi = hi_ - load_;
    std::int64_t best = none;
    std::int32_t one = -1;
    std::int32_t two = -1;
    const auto single = least(need_lo, need_hi, 0);
    if (single.first != none) {
      best = single.first;
      one = all_[static_cast<std::size_t>(single.second)].k;
    }
    for (std::size_t j = 0; j + 1 < m; ++j) {
      // Partners after j only: each two flips are weighed once.
      const auto b = least(need_lo - all_[j].load, need_hi - all_[j].load, j + 1);
      if (b.first != none && all_[j].bytes + b.first < best) {
        best = all_[j].bytes + b.first;
        one = all_[j].k;
        two = all_[static_cast<std::size_t>(b.second)].k;
      }
    }
    if (one < 0) {
      return false;
    }
    // Priced apart above; neighbouring choices share a run, so priced together here.
    apply(static_cast<std::size_t>(one));
    if (two >= 0) {
      apply(static_cast<std::size_t>(two));
    }
    if (moved_ <= landed) {
      return true;
    }
    if (two >= 0) {
      apply(static_cast<std::size_t>(two));
    }
    apply(static_cast<std::size_t>(one));
    return false;
  }

  std::vector<run_of> runs_;
  std::vector<std::int32_t> members_; // the runs' packs, each run's in the order of run_of
  std::vector<std::int64_t> pre_;     // the runs' prefix sums (see run_of)
  std::vector<std::int8_t> x_;        // per run: the choice after it (0 where none)
  std::vector<std::int8_t> other_;    // the choices of the walk not under way (walk_both_ways)
  std::vector<std::int8_t> from_;     // step 1's choice before run k for x_k = 0, 1
  std::vector<flip> heap_;            // step 2's flips, a heap
  std::vector<std::int32_t> taken_;   // the flips step 2 took, in turn
  std::vector<flip> all_;             // step 3's flips
  std::vector<std::pair<std::int64_t, std::int64_t>> tree_; // step 3's minimum tree
  std::int64_t load_ = 0, lo_ = 0, hi_ = 0, moved_ = 0, fewest_ = 0, work_ = 0;
};

} // namespace packswap::detail
