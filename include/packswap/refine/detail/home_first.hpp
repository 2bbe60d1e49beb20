#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/prefetch.hpp"
#include "packswap/detail/select.hpp"
#include "packswap/detail/sort.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <tuple>
#include <vector>

namespace packswap::detail {

/// Stage 2 for mbs = 1: builds an assignment around the packs that stay home.
///
/// Constraints (integers only, so every rank derives the same answer):
/// - caps: `caps[j]`, non-increasing, bound micro-step j. With level(p) = the last j such that
///   caps[j] >= cost(p), a rank may hold at most j + 1 packs of level <= j, for every j. Then its
///   packs sorted by cost descending sit at or below the caps, dealing them to micro-steps in that
///   order keeps every micro-step's maximum within its cap, and A <= sum(caps).
/// - limit: every rank's total load <= `limit` (B).
///
/// Steps: (1) pin each rank's own packs, largest weighted bytes first, while the capacity left for
/// its free slots stays inside a band of typical pack costs; (2) deal the rest, most constrained
/// and heaviest first, to the rank with the most capacity per free slot; (3) repair loads above the
/// limit with swaps found through a cost-sorted index, each lowering the total excess, cheapest in
/// moved bytes first (in the attempts made after the others failed, where no single swap helps a
/// rank, two swaps in a chain); (4) bring packs home by swapping them with packs their home rank
/// holds for others.
class home_first {
 public:
  /// Knobs of one attempt; the refiner tries a few and keeps the best feasible result.
  struct tuning {
    /// The pinning band, as per-mille quantiles of all costs: a rank with f free slots keeps
    /// capacity between f * q(low) and f * q(high).
    std::int32_t band_low_permille = 50;
    std::int32_t band_high_permille = 950;
    /// Cost-index entries scanned per pack when searching a repair swap.
    std::int32_t scan_limit = 16;
    /// Repair swaps allowed, per pack of the batch, before the attempt gives up.
    std::int32_t repair_swaps_per_pack = 2;
    /// Passes of the bring-home step.
    std::int32_t home_passes = 1;
    /// Ranks with the most room tried as partners of every repair swap.
    std::int32_t roomy_partners = 8;
    /// Sweeps of the re-deal step over all levels.
    std::int32_t redeal_sweeps = 2;
    /// Rounds in which ranks stuck far below the limit unlock one home pack each.
    std::int32_t unlock_rounds = 4;
    /// Times a rank the repair cannot fix gives up all its pins before the attempt fails.
    std::int32_t stuck_rounds = 4;
    /// Where no single swap helps a rank, try two swaps in a chain (`chain_step`): a wider
    /// search, for the attempt made after the others failed.
    bool chains = false;
    /// Chains allowed per repair: each search weighs up to (2 scan_limit ga)^2 pairs of swaps,
    /// so this bounds the time a repair can spend on them.
    std::int32_t chain_steps = 256;
  };

  /// `order` lists pack ids by cost descending (ties by id). Inside, packs are numbered in that
  /// order (pack i is `order[i]`), so the passes that walk the packs of a level, or all packs by
  /// cost, read their per-pack arrays in sequence.
  home_first(span<const pack_meta> packs, const shape& s, const topology& topo,
             span<const std::int64_t> caps, std::int64_t limit, span<const std::int32_t> order) {
    prepare(packs, s, topo, caps, limit, order);
  }

  /// An engine with no batch, for `prepare()`.
  home_first() = default;

  /// Takes a new batch (same arguments as the constructor), reusing the memory of earlier ones:
  /// a trainer that solves every step allocates nothing once its batches stop growing.
  void prepare(span<const pack_meta> packs, const shape& s, const topology& topo,
               span<const std::int64_t> caps, std::int64_t limit, span<const std::int32_t> order) {
    dp_ = static_cast<std::size_t>(s.dp);
    k_ = static_cast<std::size_t>(s.ga);
    n_ = packs.size();
    limit_ = limit;
    node_.resize(dp_);
    for (std::size_t r = 0; r < dp_; ++r) {
      node_[r] = topo.node(static_cast<std::int32_t>(r));
    }
    inter_weight_ = topo.inter_node_weight();
    // Ranks grouped by node (counting sort), for the bring-home step.
    std::int32_t nodes = 0;
    for (const auto nd : node_) {
      nodes = std::max(nodes, nd + 1);
    }
    multi_node_ = nodes > 1;
    node_start_.assign(static_cast<std::size_t>(nodes) + 1, 0);
    for (const auto nd : node_) {
      ++node_start_[static_cast<std::size_t>(nd) + 1];
    }
    for (std::size_t i = 0; i + 1 < node_start_.size(); ++i) {
      node_start_[i + 1] += node_start_[i];
    }
    node_ranks_.resize(dp_);
    {
      auto pos = node_start_;
      for (std::size_t r = 0; r < dp_; ++r) {
        node_ranks_[pos[static_cast<std::size_t>(node_[r])]++] = r;
      }
    }
    input_id_.assign(order.begin(), order.end());
    internal_id_.resize(n_);
    for (std::size_t p = 0; p < n_; ++p) {
      if (p + prefetch_distance < n_) {
        prefetch(&internal_id_[static_cast<std::size_t>(input_id_[p + prefetch_distance])]);
      }
      internal_id_[static_cast<std::size_t>(input_id_[p])] = static_cast<std::int32_t>(p);
    }
    // One pass in cost order: records, level counts, own-pack counts, the cost index. Costs fall
    // as ids rise, so levels only rise: one walk down the caps.
    pk_.resize(n_);
    sorted_cost_.resize(n_);
    auto& at_level = level_count_;
    at_level.assign(k_, 0);
    own_first_.assign(dp_ + 1, 0);
    std::size_t level = 0;
    total_cost_ = 0;
    for (std::size_t p = 0; p < n_; ++p) {
      if (p + prefetch_distance < n_) {
        prefetch(&packs[static_cast<std::size_t>(input_id_[p + prefetch_distance])]);
      }
      const auto& m = packs[static_cast<std::size_t>(input_id_[p])];
      // The last j with caps[j] >= cost; caps[0] bounds every cost by construction.
      while (level + 1 < k_ && caps[level + 1] >= m.cost) {
        ++level;
      }
      pk_[p] = {m.cost, m.bytes, m.source_rank, static_cast<std::int32_t>(level), -1, -1};
      sorted_cost_[n_ - 1 - p] = m.cost;
      total_cost_ += m.cost;
      ++at_level[level];
      ++own_first_[static_cast<std::size_t>(m.source_rank) + 1];
    }
    // Slack of level j: how many ranks may end with fewer than j + 1 packs of level <= j. Zero
    // where no costs tie across a chunk boundary, which forces one pack per chunk on every rank.
    // Levels rise with ids, so level j is ids [prefix before j, prefix after j): one stretch of
    // the cost index, read backwards.
    slack_.assign(k_, 0);
    level_begin_.assign(k_, 0);
    level_end_.assign(k_, 0);
    {
      std::int64_t prefix = 0;
      for (std::size_t j = 0; j < k_; ++j) {
        const auto first_id = static_cast<std::size_t>(prefix);
        prefix += at_level[j];
        slack_[j] = static_cast<std::int64_t>(dp_) * static_cast<std::int64_t>(j + 1) - prefix;
        if (at_level[j] > 0) {
          level_begin_[j] = n_ - static_cast<std::size_t>(prefix);
          level_end_[j] = n_ - first_id;
        }
      }
    }
    // Each rank's own packs by bytes descending, ties by id: bucketed by home rank in id order,
    // then each bucket (ga * mbs packs) sorted on its own.
    for (std::size_t r = 0; r < dp_; ++r) {
      own_first_[r + 1] += own_first_[r];
    }
    {
      // (bytes, id) pairs, so the sorts read no pack records.
      auto& bucket = own_bytes_;
      bucket.resize(n_);
      auto& pos = rank_pos_;
      pos.assign(own_first_.begin(), own_first_.end() - 1);
      for (std::size_t p = 0; p < n_; ++p) {
        if (p + prefetch_distance < n_) {
          // Where that pack's entry will go, give or take the entries of its rank before it.
          prefetch(&bucket[pos[src(p + prefetch_distance)]]);
        }
        bucket[pos[src(p)]++] = {pk_[p].bytes, static_cast<std::int32_t>(p)};
      }
      for (std::size_t r = 0; r < dp_; ++r) {
        const std::size_t size = own_first_[r + 1] - own_first_[r];
        insertion_sort_desc(bucket.data() + own_first_[r], size, size * size,
                            [](const std::pair<std::int64_t, std::int32_t>& e) { return e.first; });
      }
      own_.resize(n_);
      for (std::size_t i = 0; i < n_; ++i) {
        own_[i] = bucket[i].second;
      }
    }
  }

  /// One attempt; false when some rank stays above the limit.
  bool run(const tuning& t) {
    tuning_ = t;
    reset();
    pin(); // also clears every pack's place and locks the pins
    fill();
    // When the repair gets stuck on a rank (typically the one holding a giant pack, which needs
    // the lightest pack of every level), that rank's pins go and the pool is balanced again: the
    // re-deal hands the heaviest rank the lightest packs.
    bool repaired = false;
    for (std::int32_t round = 0; round <= tuning_.stuck_rounds && !repaired; ++round) {
      balance_pool();
      std::size_t stuck = dp_;
      repaired = repair(stuck);
      if (!repaired) {
        if (stuck == dp_) {
          return false; // out of swaps: give up
        }
        for (std::size_t i = 0; i < used_[stuck]; ++i) {
          locked_[static_cast<std::size_t>(items_[stuck * k_ + i])] = 0;
        }
      }
    }
    if (!repaired) {
      return false;
    }
    bring_home();
    return true;
  }

  /// Writes every pack's cell (indexed by input id) after a successful `run` into `out`: its
  /// rank, and as micro-step its place among the rank's packs by cost descending (ties by id),
  /// which keeps every micro-step within its cap. `used` is working memory.
  void cells(assignment& out, std::vector<std::size_t>& used) const {
    used.assign(dp_, 0);
    out.resize(n_);
    // Internal ids run by cost descending, ties by input id: one pass deals each rank's packs
    // in that order.
    for (std::size_t p = 0; p < n_; ++p) {
      if (p + prefetch_distance < n_) {
        prefetch(&out[static_cast<std::size_t>(input_id_[p + prefetch_distance])]);
      }
      const std::int32_t r = pk_[p].rank;
      out[static_cast<std::size_t>(input_id_[p])] =
          cell{r, static_cast<std::int32_t>(used[static_cast<std::size_t>(r)]++)};
    }
  }

  /// Weighted bytes the current state moves.
  std::int64_t weighted_moved() const {
    std::int64_t sum = 0;
    for (std::size_t p = 0; p < n_; ++p) {
      sum += away(p, static_cast<std::size_t>(pk_[p].rank));
    }
    return sum;
  }

 private:
  // Weight of one byte computed on rank r that comes from rank h.
  std::int64_t weight(std::size_t h, std::size_t r) const {
    if (h == r) {
      return 0;
    }
    return multi_node_ && node_[h] != node_[r] ? inter_weight_ : 1;
  }

  // Weighted bytes of pack p when it is computed on rank r.
  std::int64_t away(std::size_t p, std::size_t r) const { return weight(src(p), r) * pk_[p].bytes; }

  std::size_t src(std::size_t p) const { return static_cast<std::size_t>(pk_[p].home); }

  // The pack at position i of the cost index (ascending cost): internal ids run by cost
  // descending, so the index is the ids backwards.
  std::int32_t by_cost(std::size_t i) const { return static_cast<std::int32_t>(n_ - 1 - i); }

  // Can rank r take a pack of level `in` while giving up one of level `out` (none when out < 0)?
  // Only the prefixes [in, out) grow, and each must stay <= j + 1.
  bool level_room(std::size_t r, std::int32_t in, std::int32_t out) {
    if (out >= 0 && out <= in) {
      return true; // no prefix grows
    }
    const auto end = out < 0 ? k_ : static_cast<std::size_t>(out);
    return static_cast<std::size_t>(full_from(r)[in]) >= end;
  }

  // full_from(r)[j]: the lowest level j' >= j at which rank r's prefix is full (it holds j' + 1
  // packs of level <= j'), or k. Rebuilt on demand after r's level counts change; the searches
  // ask far more often than packs move.
  const std::int32_t* full_from(std::size_t r) {
    std::int32_t* f = &full_[r * k_];
    if (full_stale_[r] != 0) {
      full_stale_[r] = 0;
      std::int32_t prefix = 0;
      for (std::size_t j = 0; j < k_; ++j) {
        prefix += cnt_[r * k_ + j];
        f[j] = prefix >= static_cast<std::int32_t>(j) + 1 ? static_cast<std::int32_t>(j) : -1;
      }
      std::int32_t next = static_cast<std::int32_t>(k_);
      for (std::size_t j = k_; j-- > 0;) {
        next = f[j] >= 0 ? f[j] : next;
        f[j] = next;
      }
    }
    return f;
  }

  // Empties every rank. The packs' places and locks are cleared by pin(), rank by rank, as it
  // reads the records anyway; nothing reads a rank's items past its used ones, nor full_ before
  // rebuilding it.
  void reset() {
    locked_.resize(n_);
    items_.resize(dp_ * k_);
    item_home_.resize(dp_ * k_);
    item_level_.resize(dp_ * k_);
    used_.assign(dp_, 0);
    load_.assign(dp_, 0);
    cnt_.assign(dp_ * k_, 0);
    full_.resize(dp_ * k_);
    full_stale_.assign(dp_, 1);
  }

  void place(std::size_t p, std::size_t r) {
    pk_[p].rank = static_cast<std::int32_t>(r);
    pk_[p].slot = static_cast<std::int32_t>(used_[r]);
    items_[r * k_ + used_[r]] = static_cast<std::int32_t>(p);
    item_home_[r * k_ + used_[r]] = pk_[p].home;
    item_level_[r * k_ + used_[r]] = pk_[p].level;
    ++used_[r];
    load_[r] += pk_[p].cost;
    ++cnt_[r * k_ + static_cast<std::size_t>(pk_[p].level)];
    full_stale_[r] = 1;
  }

  void unplace(std::size_t p) {
    const auto r = static_cast<std::size_t>(pk_[p].rank);
    const auto s = static_cast<std::size_t>(pk_[p].slot);
    const auto last = static_cast<std::size_t>(items_[r * k_ + used_[r] - 1]);
    items_[r * k_ + s] = static_cast<std::int32_t>(last);
    item_home_[r * k_ + s] = item_home_[r * k_ + used_[r] - 1];
    item_level_[r * k_ + s] = item_level_[r * k_ + used_[r] - 1];
    pk_[last].slot = static_cast<std::int32_t>(s);
    --used_[r];
    load_[r] -= pk_[p].cost;
    --cnt_[r * k_ + static_cast<std::size_t>(pk_[p].level)];
    full_stale_[r] = 1;
    pk_[p].rank = -1;
    pk_[p].slot = -1;
  }

  // Exchanges pack x (on rank a) with pack y (on rank b).
  void swap_packs(std::size_t x, std::size_t y) {
    const auto a = static_cast<std::size_t>(pk_[x].rank);
    const auto b = static_cast<std::size_t>(pk_[y].rank);
    std::swap(items_[a * k_ + static_cast<std::size_t>(pk_[x].slot)],
              items_[b * k_ + static_cast<std::size_t>(pk_[y].slot)]);
    std::swap(item_home_[a * k_ + static_cast<std::size_t>(pk_[x].slot)],
              item_home_[b * k_ + static_cast<std::size_t>(pk_[y].slot)]);
    std::swap(item_level_[a * k_ + static_cast<std::size_t>(pk_[x].slot)],
              item_level_[b * k_ + static_cast<std::size_t>(pk_[y].slot)]);
    std::swap(pk_[x].slot, pk_[y].slot);
    pk_[x].rank = static_cast<std::int32_t>(b);
    pk_[y].rank = static_cast<std::int32_t>(a);
    const std::int64_t d = pk_[x].cost - pk_[y].cost;
    load_[a] -= d;
    load_[b] += d;
    --cnt_[a * k_ + static_cast<std::size_t>(pk_[x].level)];
    ++cnt_[a * k_ + static_cast<std::size_t>(pk_[y].level)];
    --cnt_[b * k_ + static_cast<std::size_t>(pk_[y].level)];
    ++cnt_[b * k_ + static_cast<std::size_t>(pk_[x].level)];
    full_stale_[a] = 1;
    full_stale_[b] = 1;
  }

  // Can rank r, holding what it holds now, still be completed? Free slots take packs of any
  // level, so it can iff some non-decreasing count of received packs R(j) (packs of level <= j it
  // will receive) fits j + 1 - held(<= j) - slack(j) <= R(j) <= j + 1 - held(<= j) and ends at the
  // number of free slots. Takes the largest such R, which uses the least slack: writes the slack
  // it uses per level into `deficit_` (checking it against what other ranks left). When `lo` and
  // `hi` are given, also returns in `fill_lo` / `fill_hi` what the free slots add if every
  // received pack costs the per-level quantile `lo` / `hi`. No allocation: this runs for every
  // pack of the batch.
  template <bool Band = false>
  bool completable(std::size_t r, const std::int64_t* lo = nullptr,
                   const std::int64_t* hi = nullptr, std::int64_t* fill_lo = nullptr,
                   std::int64_t* fill_hi = nullptr) {
    std::int32_t* upper = deficit_.data();
    const std::int32_t* c = &cnt_[r * k_];
    std::int32_t held = 0;
    bool ok = true;
    for (std::size_t j = 0; j < k_; ++j) {
      held += c[j];
      upper[j] = static_cast<std::int32_t>(j) + 1 - held;
      ok &= upper[j] >= 0;
    }
    if (!ok) {
      return false;
    }
    // Level k - 1 first (nothing above it is received), then downward.
    std::int32_t next = upper[k_ - 1];
    upper[k_ - 1] = 0;
    std::int64_t sum_lo = 0;
    std::int64_t sum_hi = 0;
    for (std::size_t j = k_ - 1; j-- > 0;) {
      // R(j) = min(upper[j], next), written so that g++ 12 emits a conditional move (std::min
      // became a branch here, mispredicted: which side wins follows the data).
      const std::int32_t received = upper[j] < next ? upper[j] : next;
      upper[j] -= received; // now the slack used at j
      ok &= upper[j] <= slack_left_[j];
      if constexpr (Band) {
        // R(j + 1) - R(j) packs of level j + 1 are received.
        sum_lo += (next - received) * lo[j + 1];
        sum_hi += (next - received) * hi[j + 1];
      }
      next = received;
    }
    if constexpr (Band) {
      *fill_lo = sum_lo + next * lo[0];
      *fill_hi = sum_hi + next * hi[0];
    }
    return ok;
  }

  void commit_deficits() {
    for (std::size_t j = 0; j < k_; ++j) {
      slack_left_[j] -= deficit_[j];
    }
  }

  // Per-level quantile of costs (per mille), from the cost index where each level is contiguous.
  std::vector<std::int64_t> level_quantile(std::int32_t permille) const {
    std::vector<std::int64_t> q(k_, 0);
    for (std::size_t l = 0; l < k_; ++l) {
      if (level_end_[l] > level_begin_[l]) {
        q[l] = sorted_cost_[level_begin_[l] + (level_end_[l] - level_begin_[l] - 1) *
                                                  static_cast<std::size_t>(permille) / 1000];
      }
    }
    return q;
  }

  // (1) Keep own packs, largest weighted bytes first, while the rank can still be completed and
  // completing it with cheap packs of the levels it lacks (the low band quantile of each) stays
  // within the limit; then, while even expensive packs (the high quantile) would leave it short of
  // the average load, give up the kept packs that weigh least and cost less than that quantile:
  // such a rank must take a share of the heavy packs others give up.
  void pin() {
    const std::int64_t target =
        std::min(limit_, (total_cost_ + static_cast<std::int64_t>(dp_) - 1) /
                             static_cast<std::int64_t>(dp_));
    const auto lo = level_quantile(tuning_.band_low_permille);
    const auto hi = level_quantile(tuning_.band_high_permille);
    slack_left_ = slack_;
    deficit_.assign(k_, 0);
    const auto& own = own_;
    const auto& first = own_first_;
    // While a rank holds at most one pack per level it uses no slack, is completable, and its
    // free slots receive one pack of each level it lacks: an O(1) check with band sums kept up
    // to date. Only ranks holding two packs of a level need the general check.
    std::int64_t all_lo = 0;
    std::int64_t all_hi = 0;
    for (std::size_t j = 0; j < k_; ++j) {
      all_lo += lo[j];
      all_hi += hi[j];
    }
    std::int64_t fill_lo = 0;
    std::int64_t fill_hi = 0;
    for (std::size_t r = 0; r < dp_; ++r) {
      if (r + 1 < dp_) {
        for (std::size_t i = first[r + 1]; i < first[r + 2]; ++i) {
          prefetch(&pk_[static_cast<std::size_t>(own[i])]); // the next rank's packs
        }
      }
      const auto begin = own.begin() + static_cast<std::ptrdiff_t>(first[r]);
      const auto end = own.begin() + static_cast<std::ptrdiff_t>(first[r + 1]);
      for (auto it = begin; it != end; ++it) {
        pk_[static_cast<std::size_t>(*it)].rank = -1; // unplaced, from an earlier run
      }
      std::int64_t missing_lo = all_lo;
      std::int64_t missing_hi = all_hi;
      std::int32_t doubled = 0; // levels where r holds two or more packs
      const auto add = [&](std::size_t p) {
        const auto l = static_cast<std::size_t>(pk_[p].level);
        if (cnt_[r * k_ + l] == 0) {
          missing_lo -= lo[l];
          missing_hi -= hi[l];
        } else if (cnt_[r * k_ + l] == 1) {
          ++doubled;
        }
        place(p, r);
      };
      const auto remove = [&](std::size_t p) {
        unplace(p);
        const auto l = static_cast<std::size_t>(pk_[p].level);
        if (cnt_[r * k_ + l] == 0) {
          missing_lo += lo[l];
          missing_hi += hi[l];
        } else if (cnt_[r * k_ + l] == 1) {
          --doubled;
        }
      };
      const auto evaluate = [&]() {
        if (doubled != 0) {
          return completable<true>(r, lo.data(), hi.data(), &fill_lo, &fill_hi);
        }
        fill_lo = missing_lo;
        fill_hi = missing_hi;
        return true;
      };
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        if (load_[r] + pk_[p].cost > limit_) {
          continue;
        }
        add(p);
        if (!evaluate() || load_[r] + fill_lo > limit_) {
          remove(p);
        }
      }
      // Too light to reach the average load even with expensive packs in its free slots: give up
      // cheap packs, lightest bytes first. (The average, not the limit: with eps > 0 the limit
      // sits above the average, and aiming every light rank at it would unpin for nothing.)
      bool fits = evaluate();
      for (auto it = end; it != begin && fits && load_[r] + fill_hi < target;) {
        --it;
        const auto p = static_cast<std::size_t>(*it);
        if (pk_[p].rank == static_cast<std::int32_t>(r) &&
            pk_[p].cost < hi[static_cast<std::size_t>(pk_[p].level)]) {
          remove(p);
          if (doubled != 0 && !completable(r)) {
            add(p);
          }
          fits = evaluate();
        }
      }
      if (doubled != 0) {
        const bool ok = completable(r); // recomputes deficit_ for the final pinned set
        (void)ok;
        commit_deficits();
      }
      for (auto it = begin; it != end; ++it) {
        const auto p = static_cast<std::size_t>(*it);
        locked_[p] = pk_[p].rank >= 0 ? 1 : 0; // the pins
      }
    }
  }

  // (2) Deals unpinned packs level by level, most constrained (lowest) first: a differencing
  // step against expectations. Every rank's projected load is what it holds plus, for each level
  // it still lacks, the mean unpinned pack of that level; within a level the heaviest pack goes
  // to the eligible rank whose projection is furthest below the limit, the next heaviest to the
  // next, and so on; ranks still eligible take another round.
  void fill() {
    // Unpinned packs by level, then cost descending, then id: the cost index walked from the
    // top (levels fall as costs rise).
    // In the same pass, the sums behind the mean unpinned cost per level (levels with no
    // unpinned pack borrow the overall mean). No branch on whether a pack is pinned: that follows
    // no pattern along the cost index.
    auto& pool = pool_;
    pool.resize(n_);
    std::size_t pooled = 0;
    std::vector<std::int64_t> sum(k_, 0);
    std::vector<std::int64_t> count(k_, 0);
    std::int64_t all = 0;
    for (std::size_t i = n_; i-- > 0;) {
      const auto& k = pk_[static_cast<std::size_t>(by_cost(i))];
      const bool free = k.rank < 0;
      pool[pooled] = by_cost(i); // kept only if free
      pooled += free ? 1 : 0;
      sum[static_cast<std::size_t>(k.level)] += keep_if(free, k.cost);
      count[static_cast<std::size_t>(k.level)] += keep_if(free, 1);
      all += keep_if(free, k.cost);
    }
    pool.resize(pooled);
    const std::int64_t overall = pool.empty() ? 0 : all / static_cast<std::int64_t>(pool.size());
    std::vector<std::int64_t> mean(k_, overall);
    for (std::size_t l = 0; l < k_; ++l) {
      if (count[l] > 0) {
        mean[l] = sum[l] / count[l];
      }
    }
    // expected[r]: what rank r's free slots will add, one mean per missing level, scaled to its
    // free slot count where ties let ranks hold a level twice.
    //
    // Rank r can take a pack of level l iff room(j) = j + 1 - (packs of level <= j) >= 1 for
    // every j >= l. Levels are dealt in rising order, so every pack dealt so far lowers room(j)
    // at every j >= l by one: the test is min_room[l][r] (from the pins) - dealt[r] >= 1. Stored
    // level by level, so that each level's scan over the ranks reads one contiguous row.
    //
    // Both from one pass over the level counts.
    auto& expected = expected_;
    expected.resize(dp_);
    auto& min_room = min_room_;
    min_room.resize(dp_ * k_);
    auto& dealt = dealt_;
    dealt.assign(dp_, 0);
    {
      std::vector<std::int32_t>& room = scratch_room_;
      room.resize(k_);
      for (std::size_t r = 0; r < dp_; ++r) {
        const std::int32_t* c = &cnt_[r * k_];
        std::int64_t missing = 0;
        std::int64_t e = 0;
        std::int32_t prefix = 0;
        for (std::size_t j = 0; j < k_; ++j) {
          const bool lacks = c[j] == 0; // summed without a branch to mispredict
          missing += keep_if(lacks, 1);
          e += keep_if(lacks, mean[j]);
          prefix += c[j];
          room[j] = static_cast<std::int32_t>(j) + 1 - prefix;
        }
        const auto free_slots = static_cast<std::int64_t>(k_ - used_[r]);
        expected[r] = missing == 0 ? free_slots * overall : e / missing * free_slots;
        std::int32_t low = room[k_ - 1];
        for (std::size_t j = k_; j-- > 0;) {
          low = std::min(low, room[j]);
          min_room[j * dp_ + r] = low;
        }
      }
    }
    // Eligible ranks (in rank order) with their projected loads; the deal order is lightest
    // projection first, ties by rank.
    auto& eligible_rank = eligible_rank_;
    auto& eligible_load = eligible_load_;
    eligible_rank.resize(dp_);
    eligible_load.resize(dp_);
    auto& left = left_;
    auto& stranded = stranded_;
    stranded.clear();
    for (std::size_t begin = 0; begin < pool.size();) {
      const std::int32_t level = pk_[static_cast<std::size_t>(pool[begin])].level;
      std::size_t end = begin;
      while (end < pool.size() && pk_[static_cast<std::size_t>(pool[end])].level == level) {
        ++end;
      }
      left.assign(pool.begin() + static_cast<std::ptrdiff_t>(begin),
                  pool.begin() + static_cast<std::ptrdiff_t>(end));
      const std::int64_t level_mean = mean[static_cast<std::size_t>(level)];
      const std::int32_t* room = &min_room[static_cast<std::size_t>(level) * dp_];
      while (!left.empty()) {
        std::size_t eligible = 0;
        for (std::size_t r = 0; r < dp_; ++r) {
          // Written always, kept only if eligible: no branch to mispredict.
          eligible_rank[eligible] = static_cast<std::int32_t>(r);
          eligible_load[eligible] = load_[r] + expected[r];
          eligible += used_[r] < k_ && room[r] - dealt[r] >= 1 ? 1 : 0;
        }
        if (eligible == 0) {
          stranded.insert(stranded.end(), left.begin(), left.end());
          break;
        }
        // The m lightest projections, in order.
        const std::size_t m = std::min(eligible, left.size());
        order_asc(span<const std::int64_t>(eligible_load.data(), eligible), deal_order_,
                  fill_sort_);
        for (std::size_t i = 0; i < m; ++i) {
          if (i + prefetch_distance < m) {
            const auto ahead = static_cast<std::size_t>(
                eligible_rank[static_cast<std::size_t>(deal_order_[i + prefetch_distance])]);
            prefetch(&cnt_[ahead * k_]);
            prefetch(&items_[ahead * k_]);
            prefetch(&item_home_[ahead * k_]);
            prefetch(&item_level_[ahead * k_]);
          }
          const auto r =
              static_cast<std::size_t>(eligible_rank[static_cast<std::size_t>(deal_order_[i])]);
          place(static_cast<std::size_t>(left[i]), r);
          ++dealt[r];
          expected[r] = std::max<std::int64_t>(0, expected[r] - level_mean);
        }
        left.erase(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(m));
      }
      begin = end;
    }
    // A pack no rank had level room for: take the first rank with a free slot and let the repair
    // step fix the crowded level (rare: only when pins crowd a level despite the slack check).
    for (const auto p32 : stranded) {
      for (std::size_t r = 0; r < dp_; ++r) {
        if (used_[r] < k_) {
          place(static_cast<std::size_t>(p32), r);
          break;
        }
      }
    }
  }

  // (2a) Re-deal sweeps; then ranks still far from the limit unlock one pinned home pack each and
  // the sweeps run again, spreading the correction over every rank. A rank far below the limit
  // (its unlocked packs are already the heaviest of their levels) unlocks the pack that could
  // rise most per byte, up to the heaviest unlocked pack of its level; a rank far above it the
  // pack that could fall most per byte, down to the lightest.
  //
  // The sweeps move unlocked packs only, in their own arrays (see collect_unlocked()), which the
  // packs unlocked by each round join; the places go back into the pack records and items once,
  // at the end. Until then the unlock search reads only what does not move: load_, and the
  // locked packs among a rank's items (an unlocked place may hold a stale entry, but always one
  // of an unlocked pack, which the search skips).
  void balance_pool() {
    collect_unlocked();
    redeal_rounds();
    store_unlocked();
  }

  void redeal_rounds() {
    std::vector<std::int64_t> heaviest(k_);
    std::vector<std::int64_t> lightest(k_);
    auto& fresh = fresh_unlocked_;
    for (std::int32_t round = 0; round <= tuning_.unlock_rounds; ++round) {
      for (std::int32_t sweep = 0; sweep < tuning_.redeal_sweeps; ++sweep) {
        if (!redeal()) {
          break;
        }
      }
      if (round == tuning_.unlock_rounds) {
        break;
      }
      // The mean room of a rank, floor(sum / dp) as quotient and remainder: with costs near the
      // int64 limit the sum itself would overflow.
      const auto dp = static_cast<std::int64_t>(dp_);
      std::int64_t room_mean = 0;
      std::int64_t room_rest = 0;
      bool any_excess = false;
      for (std::size_t r = 0; r < dp_; ++r) {
        const std::int64_t room = std::max<std::int64_t>(0, limit_ - load_[r]);
        room_mean += room / dp;
        room_rest += room % dp;
        if (room_rest >= dp) {
          ++room_mean;
          room_rest -= dp;
        }
        any_excess |= excess(r) > 0;
      }
      if (!any_excess) {
        return;
      }
      // Each level's unlocked packs run by cost descending.
      for (std::size_t l = 0; l < k_; ++l) {
        const bool any = unlocked_start_[l + 1] > unlocked_start_[l];
        heaviest[l] = any ? unlocked_cost_[unlocked_start_[l]] : -1;
        lightest[l] = any ? unlocked_cost_[unlocked_start_[l + 1] - 1] : -1;
      }
      // Far: a rank holding 16 times its share of all room, or above the limit by more than the
      // typical room of a rank.
      // floor(16 * sum / dp), saturated.
      const std::int64_t far_below =
          room_mean > std::numeric_limits<std::int64_t>::max() / 32
              ? std::numeric_limits<std::int64_t>::max()
              : std::max<std::int64_t>(1, 16 * room_mean + 16 * room_rest / dp);
      const std::int64_t far_above = std::max<std::int64_t>(1, room_mean);
      // The far ranks first, so that each one's item records can be fetched while the one
      // before it is searched: they are few and scattered.
      auto& far = far_ranks_;
      far.clear();
      for (std::size_t r = 0; r < dp_; ++r) {
        if (limit_ - load_[r] >= far_below || load_[r] - limit_ >= far_above) {
          far.push_back(static_cast<std::int32_t>(r));
        }
      }
      fresh.clear();
      for (std::size_t f = 0; f < far.size(); ++f) {
        if (f + 2 < far.size()) {
          prefetch(&items_[static_cast<std::size_t>(far[f + 2]) * k_]);
        }
        if (f + 1 < far.size()) {
          const auto ahead = static_cast<std::size_t>(far[f + 1]);
          for (std::size_t i = 0; i < used_[ahead]; ++i) {
            prefetch(&pk_[static_cast<std::size_t>(items_[ahead * k_ + i])]);
          }
        }
        const auto r = static_cast<std::size_t>(far[f]);
        const bool low = limit_ - load_[r] >= far_below;
        std::size_t pick = n_;
        long double pick_leverage = 0;
        for (std::size_t i = 0; i < used_[r]; ++i) {
          const auto p = static_cast<std::size_t>(items_[r * k_ + i]);
          const auto l = static_cast<std::size_t>(pk_[p].level);
          if (locked_[p] == 0 || heaviest[l] < 0) {
            continue;
          }
          const std::int64_t swing = low ? heaviest[l] - pk_[p].cost : pk_[p].cost - lightest[l];
          if (swing <= 0) {
            continue;
          }
          const long double leverage =
              static_cast<long double>(swing) / static_cast<long double>(pk_[p].bytes + 1);
          if (pick == n_ || leverage > pick_leverage) {
            pick = p;
            pick_leverage = leverage;
          }
        }
        if (pick < n_) {
          locked_[pick] = 0;
          fresh.push_back(static_cast<std::int32_t>(pick));
        }
      }
      if (fresh.empty()) {
        return;
      }
      add_unlocked(fresh);
    }
  }

  // The unlocked packs of every level, by cost descending, ties by id (the level's stretch of the
  // cost index walked from the top): level l is unlocked_[unlocked_start_[l] ..
  // unlocked_start_[l + 1] - 1]. Levels rise with ids, so the whole list runs by id. Beside each,
  // its cost and the place it holds ((rank << 32) | item): all that the re-deal sweeps read and
  // write, until `store_unlocked()`.
  void collect_unlocked() {
    unlocked_.resize(n_);
    unlocked_start_.assign(k_ + 1, 0);
    std::size_t m = 0;
    for (std::size_t l = 0; l < k_; ++l) {
      unlocked_start_[l] = m;
      for (std::size_t i = level_end_[l]; i-- > level_begin_[l];) {
        unlocked_[m] = by_cost(i); // kept only if unlocked: no branch to mispredict
        m += locked_[static_cast<std::size_t>(by_cost(i))] == 0 ? 1 : 0;
      }
    }
    unlocked_start_[k_] = m;
    unlocked_.resize(m);
    unlocked_cost_.resize(m);
    unlocked_place_.resize(m);
    for (std::size_t u = 0; u < m; ++u) {
      const auto& k = pk_[static_cast<std::size_t>(unlocked_[u])];
      unlocked_cost_[u] = k.cost;
      unlocked_place_[u] = place_word(k.rank, k.slot);
    }
  }

  // Merges the packs in `fresh` (just unlocked: their records are current) into the list, which
  // stays in id order.
  void add_unlocked(std::vector<std::int32_t>& fresh) {
    std::sort(fresh.begin(), fresh.end());
    for (const auto p : fresh) {
      // Level l's stretch starts later by the fresh packs of lower levels.
      for (std::size_t l = static_cast<std::size_t>(pk_[static_cast<std::size_t>(p)].level) + 1;
           l <= k_; ++l) {
        ++unlocked_start_[l];
      }
    }
    std::size_t a = unlocked_.size();
    std::size_t b = fresh.size();
    std::size_t out = a + b;
    unlocked_.resize(out);
    unlocked_cost_.resize(out);
    unlocked_place_.resize(out);
    while (b > 0) {
      --out;
      if (a > 0 && unlocked_[a - 1] > fresh[b - 1]) {
        --a;
        unlocked_[out] = unlocked_[a];
        unlocked_cost_[out] = unlocked_cost_[a];
        unlocked_place_[out] = unlocked_place_[a];
      } else {
        --b;
        const auto& k = pk_[static_cast<std::size_t>(fresh[b])];
        unlocked_[out] = fresh[b];
        unlocked_cost_[out] = k.cost;
        unlocked_place_[out] = place_word(k.rank, k.slot);
      }
    }
  }

  static std::uint64_t place_word(std::int32_t rank, std::int32_t item) {
    return (static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(item);
  }

  // The places of the unlocked packs into their records and the items.
  void store_unlocked() {
    for (std::size_t u = 0; u < unlocked_.size(); ++u) {
      const auto p = static_cast<std::size_t>(unlocked_[u]);
      const auto rank = static_cast<std::int32_t>(unlocked_place_[u] >> 32);
      const auto item = static_cast<std::int32_t>(unlocked_place_[u] & 0xffffffffu);
      pk_[p].rank = rank;
      pk_[p].slot = item;
      const std::size_t at = static_cast<std::size_t>(rank) * k_ + static_cast<std::size_t>(item);
      items_[at] = static_cast<std::int32_t>(p);
      item_home_[at] = pk_[p].home; // item_level_[at] stays: the place held a pack of level l
    }
  }

  // (2b) Re-deals the unlocked packs of one level at a time: they leave their ranks and come
  // back heaviest to the rank that is lightest without them. Pairing sorted against reverse-sorted
  // minimises the largest sum (and maximises the smallest), so no sweep raises B; every rank
  // gets back as many packs of that level as it gave, so levels stay valid. Each pack takes over
  // the place of the pack whose place it gets, so the pass is one sort and one linear walk per
  // level, over the level's stretch of the unlocked arrays. Returns whether any pack changed
  // rank.
  bool redeal() {
    bool changed = false;
    auto& from = redeal_from_;
    auto& moved = redeal_moved_;
    for (std::size_t l = 0; l < k_; ++l) {
      const std::size_t base = unlocked_start_[l];
      const std::size_t m = unlocked_start_[l + 1] - base;
      if (m < 2) {
        continue;
      }
      const std::int64_t* cost = unlocked_cost_.data() + base;
      std::uint64_t* place = unlocked_place_.data() + base;
      // Place i (held by pack i) is keyed by its rank's load without pack i, ties by i; the
      // places sorted, the j-th goes to the j-th heaviest pack, pack j: from[j] is that place.
      sort_places(cost, place, m);
      moved.resize(m);
      for (std::size_t j = 0; j < m; ++j) {
        const auto f = static_cast<std::size_t>(from[j]);
        const auto rank = static_cast<std::size_t>(place[f] >> 32);
        changed |= place[j] >> 32 != rank;
        load_[rank] += cost[j] - cost[f];
        moved[j] = place[f];
      }
      std::copy(moved.begin(), moved.begin() + static_cast<std::ptrdiff_t>(m), place);
    }
    return changed;
  }

  // Writes into redeal_from_[0..m) the places 0..m-1 by (load of the place's rank without its
  // pack, place) ascending.
  void sort_places(const std::int64_t* cost, const std::uint64_t* place, std::size_t m) {
    auto& keys = redeal_keys_;
    keys.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      keys[i] = load_[static_cast<std::size_t>(place[i] >> 32)] - cost[i]; // >= 0
    }
    order_asc(keys, redeal_from_, redeal_sort_);
  }

  // Levels a rank breaks: the largest amount by which a prefix exceeds j + 1.
  std::int32_t level_excess(std::size_t r) const {
    std::int32_t prefix = 0;
    std::int32_t worst = 0;
    for (std::size_t j = 0; j < k_; ++j) {
      prefix += cnt_[r * k_ + j];
      worst = std::max(worst, prefix - static_cast<std::int32_t>(j) - 1);
    }
    return worst;
  }

  std::int64_t excess(std::size_t r) const { return std::max<std::int64_t>(0, load_[r] - limit_); }

  // Moved-bytes change if x (on a) and y (on b) trade places.
  std::int64_t swap_delta(std::size_t x, std::size_t a, std::size_t y, std::size_t b) const {
    return away(x, b) - away(x, a) + away(y, a) - away(y, b);
  }

  // (3) Lowers every rank to the limit and fixes crowded levels. The worst rank goes first; its
  // partner is sought among the ranks with the most room (every pair of their packs), then, if
  // none fits, through the cost index across all ranks.
  // Returns false when out of swaps (`stuck` stays dp) or when no swap helps rank `stuck`. With
  // `tuning::chains`, a rank no single swap helps tries two swaps in a chain (`chain_step`)
  // first, up to `tuning::chain_steps` times.
  bool repair(std::size_t& stuck) {
    const std::int64_t budget = static_cast<std::int64_t>(n_) * tuning_.repair_swaps_per_pack + 16;
    std::int64_t swaps = 0;
    std::int32_t chains_left = tuning_.chains ? tuning_.chain_steps : 0;
    // Lazy max-heaps: entries whose key no longer matches the rank's state are skipped.
    auto& over = over_heap_;
    over.clear();
    room_heap_.clear();
    for (std::size_t r = 0; r < dp_; ++r) {
      const std::int64_t key = over_key(r);
      if (key > 0) {
        over.emplace(key, -static_cast<std::int64_t>(r));
      }
      if (load_[r] < limit_) {
        room_heap_.emplace(limit_ - load_[r], -static_cast<std::int64_t>(r));
      }
    }
    while (!over.empty()) {
      const auto [key, neg] = over.top();
      over.pop();
      const auto r = static_cast<std::size_t>(-neg);
      if (key != over_key(r)) {
        continue; // stale; a fresh entry was pushed when the rank changed
      }
      if (++swaps > budget) {
        return false;
      }
      std::size_t other = dp_;
      std::size_t third = dp_; // a chain's last rank
      if (!repair_step(r, other)) {
        if (chains_left == 0 || !chain_step(r, other, third)) {
          stuck = r;
          return false;
        }
        --chains_left;
      }
      for (const std::size_t changed : {r, other, third}) {
        if (changed == dp_) {
          continue;
        }
        const std::int64_t k2 = over_key(changed);
        if (k2 > 0) {
          over.emplace(k2, -static_cast<std::int64_t>(changed));
        }
        if (load_[changed] < limit_) {
          room_heap_.emplace(limit_ - load_[changed], -static_cast<std::int64_t>(changed));
        }
      }
    }
    return true;
  }

  // Order of repair: crowded levels first (they block everything), then load excess.
  std::int64_t over_key(std::size_t r) const {
    const std::int64_t crowd = level_excess(r);
    return crowd > 0 ? (std::int64_t{1} << 62) + crowd : excess(r);
  }

  // Up to `m` ranks other than `skip` with the most room, most first (ties: lower rank).
  void roomiest(std::size_t m, std::size_t skip, std::vector<std::size_t>& out) {
    out.clear();
    std::vector<std::pair<std::int64_t, std::int64_t>>& kept = scratch_entries_;
    kept.clear();
    while (!room_heap_.empty() && out.size() < m) {
      const auto e = room_heap_.top();
      room_heap_.pop();
      const auto r = static_cast<std::size_t>(-e.second);
      if (e.first != limit_ - load_[r] || e.first <= 0) {
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
  bool repair_step(std::size_t r, std::size_t& other) {
    const std::int64_t exc = excess(r);
    const bool crowded = level_excess(r) > 0;
    // The lowest crowded level: a pack at or below it must leave for one above it.
    std::int32_t crowded_level = -1;
    if (crowded) {
      std::int32_t prefix = 0;
      for (std::size_t j = 0; j < k_; ++j) {
        prefix += cnt_[r * k_ + j];
        if (prefix > static_cast<std::int32_t>(j) + 1) {
          crowded_level = static_cast<std::int32_t>(j);
          break;
        }
      }
    }
    bool found = false;
    candidate best;
    const auto consider = [&](std::size_t x, std::size_t y) {
      const auto s2 = static_cast<std::size_t>(pk_[y].rank);
      if (s2 == r) {
        return;
      }
      if (crowded ? (pk_[x].level > crowded_level || pk_[y].level <= crowded_level)
                  : pk_[y].cost >= pk_[x].cost) {
        return;
      }
      const std::int64_t d = pk_[x].cost - pk_[y].cost;
      const std::int64_t before = exc + excess(s2);
      const std::int64_t after = std::max<std::int64_t>(0, load_[r] - d - limit_) +
                                 std::max<std::int64_t>(0, load_[s2] + d - limit_);
      if (!crowded && after >= before) {
        return;
      }
      candidate c;
      c.full = (load_[r] - d <= limit_ && load_[s2] + d <= limit_) ? 1 : 0;
      c.gain = before - after;
      c.delta = swap_delta(x, r, y, s2);
      c.x = x;
      c.y = y;
      // The level check is the costly part: only for a candidate that would win.
      if ((found && !better(c, best)) || !level_room(s2, pk_[x].level, pk_[y].level)) {
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
    roomiest(static_cast<std::size_t>(tuning_.roomy_partners), r, scratch_ranks_);
    const auto pairs = [&](bool full_only) {
      for (const std::size_t s2 : scratch_ranks_) {
        if (settled()) {
          break;
        }
        const std::int64_t room = limit_ - load_[s2];
        // The partner's packs, read once: (cost, level) beside the id.
        const std::size_t s2_used = used_[s2];
        partner_.resize(s2_used);
        for (std::size_t j = 0; j < s2_used; ++j) {
          const auto y = static_cast<std::size_t>(items_[s2 * k_ + j]);
          partner_[j] = {pk_[y].cost, pk_[y].level, static_cast<std::int32_t>(y)};
        }
        // Outside level repairs only a cheaper y can help (a full fix: cost within
        // [cost(x) - room, cost(x) - excess]); sorted by cost, those form one range per x.
        // The order of candidates does not matter: the best under `better` wins.
        if (!crowded) {
          std::sort(partner_.begin(), partner_.end(), [](const auto& a, const auto& b) {
            return a.cost < b.cost || (a.cost == b.cost && a.id < b.id);
          });
        }
        for (std::size_t i = 0; i < used_[r]; ++i) {
          const auto x = static_cast<std::size_t>(items_[r * k_ + i]);
          const std::int32_t x_level = pk_[x].level;
          const std::int64_t x_cost = pk_[x].cost;
          // Without slack at x's level only a pack of the same level can take its place.
          const bool same_level_only = !crowded && slack_[static_cast<std::size_t>(x_level)] == 0;
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
        index_search(r, exc, crowded, consider);
      }
    } else {
      pairs(true);
      if (!found) {
        // The partial fixes among the roomiest only when the cost index holds no full fix
        // either: a full fix beats every partial one, and the index finds one in most steps.
        index_search(r, exc, crowded, consider);
        if (!found || best.full == 0) {
          pairs(false);
        }
      }
    }
    if (!found) {
      return false;
    }
    other = static_cast<std::size_t>(pk_[best.y].rank);
    swap_packs(best.x, best.y);
    return true;
  }

  // Calls f(y) for the packs y of x's level that cost less than x, among the `width` nearest
  // each side of cost `want` in the cost index (each level is one stretch of it).
  template <class F>
  void same_level_below(std::size_t x, std::int64_t want, std::size_t width, F&& f) const {
    const auto level = static_cast<std::size_t>(pk_[x].level);
    const auto first = sorted_cost_.begin() + static_cast<std::ptrdiff_t>(level_begin_[level]);
    const auto last = sorted_cost_.begin() + static_cast<std::ptrdiff_t>(level_end_[level]);
    const auto split =
        static_cast<std::size_t>(std::upper_bound(first, last, want) - sorted_cost_.begin());
    const std::size_t from = std::max(level_begin_[level], split > width ? split - width : 0);
    const std::size_t to = std::min(level_end_[level], split + width);
    for (std::size_t i = from; i < to; ++i) {
      const auto y = static_cast<std::size_t>(by_cost(i));
      if (pk_[y].cost < pk_[x].cost) {
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
  bool chain_step(std::size_t r, std::size_t& s1_out, std::size_t& s2_out) {
    const std::int64_t exc = excess(r);
    if (exc == 0 || level_excess(r) > 0) {
      return false;
    }
    const auto width = static_cast<std::size_t>(tuning_.scan_limit);
    struct chain {
      std::int64_t after = 0, delta = 0;
      std::size_t x = 0, y = 0, x2 = 0, y2 = 0;
    } best;
    bool found = false;
    for (std::size_t i = 0; i < used_[r]; ++i) {
      const auto x = static_cast<std::size_t>(items_[r * k_ + i]); // restored after each try
      same_level_below(x, pk_[x].cost - exc, width, [&](std::size_t y) {
        const auto s1 = static_cast<std::size_t>(pk_[y].rank);
        if (s1 == r) {
          return;
        }
        const std::int64_t before_1 = exc + excess(s1);
        const std::int64_t delta_1 = swap_delta(x, r, y, s1);
        swap_packs(x, y);
        const std::int64_t pushed = excess(s1);
        for (std::size_t j = 0; pushed > 0 && j < used_[s1]; ++j) {
          const auto x2 = static_cast<std::size_t>(items_[s1 * k_ + j]);
          same_level_below(x2, pk_[x2].cost - pushed, width, [&](std::size_t y2) {
            const auto s2 = static_cast<std::size_t>(pk_[y2].rank);
            if (s2 == r || s2 == s1) {
              return;
            }
            const std::int64_t d = pk_[x2].cost - pk_[y2].cost;
            const std::int64_t after = excess(r) +
                                       std::max<std::int64_t>(0, load_[s1] - d - limit_) +
                                       std::max<std::int64_t>(0, load_[s2] + d - limit_);
            if (after >= before_1 + excess(s2)) {
              return;
            }
            const chain c{after, delta_1 + swap_delta(x2, s1, y2, s2), x, y, x2, y2};
            if (!found || std::tie(c.after, c.delta, c.x, c.y, c.x2, c.y2) <
                              std::tie(best.after, best.delta, best.x, best.y, best.x2, best.y2)) {
              best = c;
              found = true;
            }
          });
        }
        swap_packs(x, y); // undone: both packs back in their slots
      });
    }
    if (!found) {
      return false;
    }
    s1_out = static_cast<std::size_t>(pk_[best.y].rank);
    swap_packs(best.x, best.y);
    s2_out = static_cast<std::size_t>(pk_[best.y2].rank);
    swap_packs(best.x2, best.y2);
    return true;
  }

  // Partners for r's packs through the cost index: a full fix needs cost(y) <= cost(x) - exc;
  // scan downward from there (growing difference), then upward toward cost(x) (partial fixes).
  template <class Consider>
  void index_search(std::size_t r, std::int64_t exc, bool crowded, Consider&& consider) {
    std::int64_t max_room = 0;
    if (!crowded) {
      roomiest(1, dp_, roomiest_one_); // scratch_ranks_ still lists the partners
      max_room = roomiest_one_.empty() ? 0 : limit_ - load_[roomiest_one_[0]];
    }
    const auto limit = static_cast<std::size_t>(tuning_.scan_limit);
    for (std::size_t i = 0; i < used_[r]; ++i) {
      const auto x = static_cast<std::size_t>(items_[r * k_ + i]);
      const std::int64_t want = pk_[x].cost - std::max<std::int64_t>(exc, 1);
      const auto split = static_cast<std::size_t>(
          std::upper_bound(sorted_cost_.begin(), sorted_cost_.end(), want) - sorted_cost_.begin());
      // Where no rank holds fewer than l + 1 packs of level <= l (no slack), only packs of x's
      // own level can trade places with it; the cost index holds each level contiguously. No
      // rank can absorb more than the largest room, so larger differences are never useful
      // (outside level repairs, which may overload a partner).
      const bool same_level_only = !crowded && slack_[static_cast<std::size_t>(pk_[x].level)] == 0;
      const std::int64_t reach = crowded ? pk_[x].cost : max_room;
      for (std::size_t step = 0; step < limit && step < split; ++step) {
        const auto y = static_cast<std::size_t>(by_cost(split - 1 - step));
        if ((same_level_only && pk_[y].level != pk_[x].level) ||
            pk_[x].cost - pk_[y].cost > reach) {
          break;
        }
        consider(x, y);
      }
      const auto first_partial = std::max(
          split, static_cast<std::size_t>(std::lower_bound(sorted_cost_.begin(), sorted_cost_.end(),
                                                           pk_[x].cost - reach) -
                                          sorted_cost_.begin()));
      for (std::size_t i2 = first_partial, step = 0; i2 < n_ && step < limit / 2; ++i2, ++step) {
        if (sorted_cost_[i2] >= pk_[x].cost) {
          break;
        }
        consider(x, static_cast<std::size_t>(by_cost(i2)));
      }
    }
  }

  // (4) For every pack p away from home, trade it for a pack q its home rank h holds for somebody
  // else, when fewer weighted bytes move, levels stay valid and both loads stay within the limit.
  // When the loads would not, a second, compensating trade between the same two ranks may carry
  // the difference back: two packs u (on h) and v (on p's rank) of one level, both away from
  // home, so moving them again costs nothing. With several nodes, ranks on p's home node are
  // tried as partners too: a pack one hop from home inside its node is cheaper than one across.
  void bring_home() {
    // Every rank's full_ up to date in one sequential pass, rather than rebuilt on first use
    // from a cnt_ line fetched at random.
    for (std::size_t r = 0; r < dp_; ++r) {
      full_from(r);
    }
    // Largest cost difference within each level: its top quantile less its bottom one.
    std::vector<std::int64_t> level_spread = level_quantile(1000);
    {
      const auto cheapest = level_quantile(0);
      for (std::size_t l = 0; l < k_; ++l) {
        level_spread[l] -= cheapest[l];
      }
    }
    for (std::int32_t pass = 0; pass < tuning_.home_passes; ++pass) {
      bool changed = false;
      // In input order: batches list each rank's packs together, so consecutive packs share a
      // home rank and its items stay in cache. Only packs away from home now need a visit: no
      // trade below sends a pack away from home (each moves packs that are away already, or
      // brings one home), so those visited are those the full walk would not skip, and the
      // records of the packs already home are never fetched.
      list_away();
      const std::size_t visits = away_.size();
      // Records of packs a few steps ahead are fetched early: input order is random in the
      // internal numbering.
      for (std::size_t next = 0; next < visits; ++next) {
        if (next + prefetch_distance < visits) {
          prefetch(&pk_[static_cast<std::size_t>(away_[next + prefetch_distance])]);
        }
        if (next + prefetch_distance / 2 < visits) {
          // Fetched half the distance ago: its rank's state can be fetched now.
          const auto ahead = static_cast<std::size_t>(
              pk_[static_cast<std::size_t>(away_[next + prefetch_distance / 2])].rank);
          prefetch(&load_[ahead]);
          prefetch(&full_[ahead * k_]);
        }
        const auto p = static_cast<std::size_t>(away_[next]);
        const auto r = static_cast<std::size_t>(pk_[p].rank);
        const std::size_t h = src(p);
        if (r == h) {
          continue;
        }
        struct move {
          std::size_t q = 0, u = 0, v = 0; // u == v: no compensating trade
          std::int64_t delta = 0;
        } best;
        bool found = false;
        const auto consider = [&](const move& m) {
          if (m.delta < 0 && (!found || m.delta < best.delta)) {
            best = m;
            found = true;
          }
        };
        bool indexed = false;
        const std::int32_t p_level = pk_[p].level;
        // Levels first: trading p for q keeps r's levels valid iff q's level is p's or r can
        // take it in p's place (full_from(r)[q level] >= p's level, which holds for the levels
        // from `lowest` up to p's, as full_from is non-decreasing), and keeps t's levels valid
        // iff q's level is at most full_from(t)[p's level] (see level_room). So each candidate
        // needs one range test, from the item's level beside it: most packs of another level
        // fail here (no slack), before q's record is read.
        std::int32_t lowest = p_level;
        {
          const std::int32_t* r_full = full_from(r);
          while (lowest > 0 && r_full[lowest - 1] >= p_level) {
            --lowest;
          }
        }
        const auto try_rank = [&](std::size_t t) {
          if (t == r) {
            return;
          }
          const std::int64_t p_delta = away(p, t) - away(p, r); // p's part of every trade here
          const std::int64_t p_cost = pk_[p].cost;
          const std::int32_t* t_items = &items_[t * k_];
          const std::int32_t* t_homes = &item_home_[t * k_];
          const std::int32_t* t_levels = &item_level_[t * k_];
          const std::int32_t highest = full_from(t)[p_level]; // may be k: then any level fits
          const std::size_t t_used = used_[t];                // no trade below changes it
          for (std::size_t i = 0; i < t_used; ++i) {
            const auto hq = static_cast<std::size_t>(t_homes[i]);
            const std::int32_t q_level = t_levels[i];
            if (hq == t || q_level < lowest || q_level > highest) {
              continue; // home (trading it away gains nothing in general), or no level room
            }
            // q's part of the byte change is its bytes times a weight its home rank decides;
            // where that weight is zero, the change is known before q's record is read.
            const std::int64_t q_weight = weight(hq, r) - weight(hq, t);
            if (q_weight == 0 && (p_delta >= 0 || (found && p_delta >= best.delta))) {
              continue;
            }
            const auto q = static_cast<std::size_t>(t_items[i]);
            const std::int64_t delta = p_delta + q_weight * pk_[q].bytes;
            if (delta >= 0 || (found && delta >= best.delta)) {
              continue;
            }
            const std::int64_t d = p_cost - pk_[q].cost; // load moving from r to t
            const bool loads_fit = load_[t] + d <= limit_ && load_[r] - d <= limit_;
            // Compensation only for the trade that brings p home.
            if (!loads_fit && t != h) {
              continue;
            }
            if (loads_fit) {
              consider({q, 0, 0, delta});
              continue;
            }
            // A same-level trade u (on t) <-> v (on r) moving e back from t to r; v is r's
            // away-from-home pack of u's level, looked up in `movable_`. Both loads fit iff e
            // lies in [e_lo, e_hi]; u and v share a level, so |e| is at most that level's
            // spread: u of a level whose spread cannot reach the range is passed over before
            // any record is read, and r's packs are indexed only if some u remains.
            const std::int64_t e_lo = load_[t] + d - limit_;
            const std::int64_t e_hi = limit_ - load_[r] + d;
            const auto can_compensate = [&](std::size_t a) {
              const std::int64_t spread = level_spread[static_cast<std::size_t>(t_levels[a])];
              return static_cast<std::size_t>(t_items[a]) != q &&
                     static_cast<std::size_t>(t_homes[a]) != t && e_lo <= spread && e_hi >= -spread;
            };
            bool any = false;
            for (std::size_t a = 0; a < t_used && !any; ++a) {
              any = can_compensate(a);
            }
            if (!any) {
              continue;
            }
            if (!indexed) {
              index_movable(r, p);
              indexed = true;
            }
            for (std::size_t a = 0; a < t_used; ++a) {
              if (!can_compensate(a)) {
                continue;
              }
              const auto u = static_cast<std::size_t>(t_items[a]);
              const std::int64_t vv = movable_[static_cast<std::size_t>(t_levels[a])];
              if (vv < 0) {
                continue;
              }
              const auto v = static_cast<std::size_t>(vv);
              const std::int64_t e = pk_[u].cost - pk_[v].cost;
              if (e < e_lo || e > e_hi) {
                continue;
              }
              consider({q, u, v, delta + swap_delta(u, t, v, r)});
            }
          }
        };
        try_rank(h);
        if (multi_node_ && node_[r] != node_[h]) {
          const auto node = static_cast<std::size_t>(node_[h]);
          for (std::size_t i = node_start_[node]; i < node_start_[node + 1]; ++i) {
            if (node_ranks_[i] != h) {
              try_rank(node_ranks_[i]);
            }
          }
        }
        if (found) {
          swap_packs(p, best.q);
          if (best.u != best.v) {
            swap_packs(best.u, best.v);
          }
          changed = true;
        }
      }
      if (!changed) {
        break;
      }
    }
  }

  // away_: the packs away from home (internal ids) in input order. One pass over the records in
  // their own order marks them by input id; one pass over the marks lists them.
  void list_away() {
    auto& mark = away_mark_;
    mark.resize(n_);
    for (std::size_t p = 0; p < n_; ++p) {
      mark[static_cast<std::size_t>(input_id_[p])] = pk_[p].rank != pk_[p].home ? 1 : 0;
    }
    away_.resize(n_);
    std::size_t m = 0;
    for (std::size_t next = 0; next < n_; ++next) {
      away_[m] = internal_id_[next]; // kept only if marked: no branch to mispredict
      m += static_cast<std::size_t>(mark[next]);
    }
    away_.resize(m);
  }

  // movable_[l]: a pack of level l on rank r that is away from home (other than `skip`), or -1.
  void index_movable(std::size_t r, std::size_t skip) {
    movable_.assign(k_, -1);
    // Levels from item_level_: no pack record is read.
    for (std::size_t i = 0; i < used_[r]; ++i) {
      const auto v = static_cast<std::size_t>(items_[r * k_ + i]);
      if (v != skip && static_cast<std::size_t>(item_home_[r * k_ + i]) != r) {
        movable_[static_cast<std::size_t>(item_level_[r * k_ + i])] = static_cast<std::int64_t>(v);
      }
    }
  }

  // How far ahead the passes over packs in input order fetch pack records.
  static constexpr std::size_t prefetch_distance = 8;

  std::size_t dp_ = 0, k_ = 0, n_ = 0;
  std::int64_t limit_ = 0;
  std::int64_t total_cost_ = 0;
  tuning tuning_{};
  std::vector<std::int32_t> node_; // node of every rank
  std::int64_t inter_weight_ = 1;
  bool multi_node_ = false;
  std::vector<std::size_t> node_start_; // ranks of node i: node_ranks_[node_start_[i] ..]
  std::vector<std::size_t> node_ranks_;
  std::vector<std::int32_t> input_id_;    // input id of every pack; internal ids follow `order`
  std::vector<std::int32_t> internal_id_; // the inverse
  // What every pass reads of a pack, in one 32-byte record instead of six arrays: one cache
  // line read per pack, not six.
  struct pack_state {
    std::int64_t cost = 0;
    std::int64_t bytes = 0;
    std::int32_t home = 0;  // source rank
    std::int32_t level = 0; // see the class comment
    std::int32_t rank = -1; // where it is now (-1: unplaced)
    std::int32_t slot = -1; // its item index there
  };
  std::vector<pack_state> pk_;            // by internal id
  std::vector<std::int32_t> own_;         // rank r's own packs by bytes descending, ties by id:
  std::vector<std::size_t> own_first_;    // own_[own_first_[r] .. own_first_[r + 1] - 1]
  std::vector<std::int64_t> sorted_cost_; // cost of by_cost(i)
  std::vector<std::int32_t> items_;       // rank r's packs: items_[r * k .. r * k + used_[r] - 1]
  std::vector<std::int32_t> item_home_;   // their source ranks, so scans skip home packs unread
  std::vector<std::int32_t> item_level_;  // and their levels, so scans test levels unread
  std::vector<std::size_t> used_;
  std::vector<std::int64_t> load_;
  std::vector<std::int32_t> cnt_;
  std::vector<std::int32_t> full_; // see full_from()
  std::vector<char> full_stale_;
  std::vector<std::int64_t> slack_;                  // per level, see the constructor
  std::vector<std::int64_t> slack_left_;             // per level, after the ranks pinned so far
  std::vector<std::int32_t> deficit_;                // scratch for completable()
  std::vector<std::size_t> level_begin_, level_end_; // level l: by_cost(begin .. end - 1)
  std::vector<std::int32_t> unlocked_;               // see collect_unlocked()
  std::vector<std::size_t> unlocked_start_;
  std::vector<std::int64_t> unlocked_cost_;   // beside unlocked_: their costs
  std::vector<std::uint64_t> unlocked_place_; // and places, see collect_unlocked()
  std::vector<std::int64_t> redeal_keys_;     // see sort_places()
  std::vector<std::int32_t> redeal_from_;
  order_scratch redeal_sort_;
  std::vector<std::uint64_t> redeal_moved_;
  std::vector<std::int32_t> fresh_unlocked_; // see redeal_rounds()
  std::vector<std::int32_t> far_ranks_;      // see redeal_rounds()
  std::vector<char> locked_;                 // pinned home packs the re-deal leaves alone
  std::vector<std::size_t> scratch_ranks_;
  std::vector<std::size_t> roomiest_one_; // see index_search
  struct partner_pack {
    std::int64_t cost;
    std::int32_t level, id;
  };
  std::vector<partner_pack> partner_; // a repair partner's packs, see repair_step
  std::vector<std::int64_t> movable_; // see index_movable
  std::vector<std::int32_t> away_;    // see list_away
  std::vector<char> away_mark_;
  std::vector<std::pair<std::int64_t, std::int64_t>> scratch_entries_;
  // A max-heap of (key, -rank) that keeps its memory when cleared.
  struct heap : std::priority_queue<std::pair<std::int64_t, std::int64_t>> {
    void clear() { c.clear(); }
  };
  heap over_heap_; // (excess key, -rank), lazy: see repair()
  heap room_heap_; // (room, -rank), lazy
  // Working memory of the constructor and fill(), kept between batches.
  std::vector<std::int64_t> level_count_;
  std::vector<std::pair<std::int64_t, std::int32_t>> own_bytes_;
  std::vector<std::size_t> rank_pos_;
  std::vector<std::int32_t> pool_, min_room_, dealt_, left_, stranded_;
  std::vector<std::int64_t> expected_;
  std::vector<std::int32_t> eligible_rank_, deal_order_, scratch_room_;
  std::vector<std::int64_t> eligible_load_;
  order_scratch fill_sort_;
};

} // namespace packswap::detail
