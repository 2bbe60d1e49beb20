#pragma once

#include "packswap/balance/karmarkar_karp.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/sort.hpp"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <type_traits>
#include <vector>

namespace packswap {

namespace detail {

// Lowers the largest rank load by swapping packs between the heaviest rank and the lightest
// ranks, any pack with any pack (per_step mode: A is not promised). `units[r * k + j]` lists the
// packs of rank r. At most `max_rounds` swaps; stops early when the heaviest rank has none.
inline void improve_max_load(span<const std::int64_t> cost, std::vector<std::int32_t>& units,
                             std::size_t dp, std::size_t k, std::int32_t max_rounds) {
  std::vector<std::int64_t> load(dp, 0);
  for (std::size_t r = 0; r < dp; ++r) {
    for (std::size_t j = 0; j < k; ++j) {
      load[r] += cost[static_cast<std::size_t>(units[r * k + j])];
    }
  }
  // Lazy heaps: (load, -rank) max-heap and (-load, -rank) max-heap (i.e. lightest first).
  using entry = std::pair<std::int64_t, std::int64_t>;
  std::priority_queue<entry> heavy;
  std::priority_queue<entry> light;
  for (std::size_t r = 0; r < dp; ++r) {
    heavy.emplace(load[r], -static_cast<std::int64_t>(r));
    light.emplace(-load[r], -static_cast<std::int64_t>(r));
  }
  constexpr std::size_t partners = 16;
  std::vector<entry> taken;
  std::vector<std::pair<std::int64_t, std::size_t>> partner; // (cost, unit slot), sorted
  for (std::int32_t round = 0; round < max_rounds; ++round) {
    while (heavy.top().first != load[static_cast<std::size_t>(-heavy.top().second)]) {
      heavy.pop();
    }
    const auto top = static_cast<std::size_t>(-heavy.top().second);
    taken.clear();
    while (!light.empty() && taken.size() < partners) {
      const entry e = light.top();
      light.pop();
      if (-e.first != load[static_cast<std::size_t>(-e.second)]) {
        continue;
      }
      taken.push_back(e);
    }
    std::int64_t best_max = load[top];
    std::size_t best_i = 0;
    std::size_t best_j = 0;
    bool found = false;
    for (const entry& e : taken) {
      const auto s = static_cast<std::size_t>(-e.second);
      if (s == top || load[s] >= load[top]) {
        continue;
      }
      // The best swap moves d = (load[top] - load[s]) / 2 from top to s: for each pack x of top,
      // only the packs y of s with cost nearest cost(x) - d can win, found by binary search.
      partner.clear();
      for (std::size_t j = 0; j < k; ++j) {
        partner.emplace_back(cost[static_cast<std::size_t>(units[s * k + j])], s * k + j);
      }
      std::sort(partner.begin(), partner.end());
      const std::int64_t half = (load[top] - load[s]) / 2;
      for (std::size_t i = 0; i < k; ++i) {
        const auto cx = cost[static_cast<std::size_t>(units[top * k + i])];
        const auto at = std::lower_bound(partner.begin(), partner.end(),
                                         std::make_pair(cx - half, std::size_t{0}));
        for (auto it = at == partner.begin() ? at : at - 1; it != partner.end() && it <= at + 1;
             ++it) {
          const auto cy = it->first;
          if (cy >= cx) {
            continue;
          }
          const std::int64_t new_max = std::max(load[top] - (cx - cy), load[s] + (cx - cy));
          if (new_max < best_max) {
            best_max = new_max;
            best_i = top * k + i;
            best_j = it->second;
            found = true;
          }
        }
      }
    }
    for (const entry& e : taken) {
      light.push(e);
    }
    if (!found) {
      return;
    }
    const auto s = best_j / k;
    const std::int64_t d = cost[static_cast<std::size_t>(units[best_i])] -
                           cost[static_cast<std::size_t>(units[best_j])];
    std::swap(units[best_i], units[best_j]);
    load[top] -= d;
    load[s] += d;
    heavy.emplace(load[top], -static_cast<std::int64_t>(top));
    heavy.emplace(load[s], -static_cast<std::int64_t>(s));
    light.emplace(-load[top], -static_cast<std::int64_t>(top));
    light.emplace(-load[s], -static_cast<std::int64_t>(s));
  }
}

// Working memory of stage 1, kept by callers that balance every step.
struct balance_scratch {
  karmarkar_karp kk;
  std::vector<std::int32_t> set_of, cell_of, cell_chunks, rank_of_cell; // mbs > 1
  std::vector<std::int64_t> cell_load;                                  // mbs > 1
  std::vector<std::int32_t> rank_of, units;                             // per_step
  std::vector<std::size_t> fill;                                        // per_step
};

// Stage 1 given `order`, the pack ids by cost descending (ties by id), into `out`. No validation.
inline void balance_sorted(span<const std::int64_t> costs, span<const std::int32_t> order,
                           const shape& s, sync_mode mode, std::int32_t max_swaps, assignment& out,
                           balance_scratch& ws) {
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto ga = static_cast<std::size_t>(s.ga);
  const auto mbs = static_cast<std::size_t>(s.mbs);
  const std::size_t n = costs.size();
  out.resize(n);
  if (mode == sync_mode::per_micro_step && mbs == 1) {
    // Chunk g of the sorted costs is micro-step g; KK gives each rank one pack per chunk.
    for (std::size_t g = 0; g < ga; ++g) {
      for (std::size_t i = g * dp; i < (g + 1) * dp; ++i) {
        out[static_cast<std::size_t>(order[i])].micro_step = static_cast<std::int32_t>(g);
      }
    }
    ws.kk.run(costs, order, s.dp);
    ws.kk.for_each(
        [&](std::int32_t p, std::int32_t r) { out[static_cast<std::size_t>(p)].rank = r; });
    return;
  }
  if (mode == sync_mode::per_micro_step) {
    // Micro-step g takes the g-th sorted chunk of dp * mbs packs; KK over its mbs sub-chunks
    // forms dp cells; KK over micro-steps (cells sorted by load) deals whole cells to ranks.
    const std::size_t group = dp * mbs;
    auto& set_of = ws.set_of;
    auto& cell_load = ws.cell_load;
    auto& cell_of = ws.cell_of;
    set_of.assign(n, 0);
    cell_load.assign(dp * ga, 0);
    cell_of.assign(n, 0);
    for (std::size_t g = 0; g < ga; ++g) {
      const span<const std::int32_t> chunk(order.data() + g * group, group);
      ws.kk.run(costs, chunk, s.dp);
      ws.kk.assign(set_of);
      for (const auto p : chunk) {
        const auto c = g * dp + static_cast<std::size_t>(set_of[static_cast<std::size_t>(p)]);
        cell_of[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(c);
        cell_load[c] += costs[static_cast<std::size_t>(p)];
        out[static_cast<std::size_t>(p)].micro_step = static_cast<std::int32_t>(g);
      }
    }
    auto& cell_chunks = ws.cell_chunks;
    cell_chunks.resize(dp * ga);
    for (std::size_t g = 0; g < ga; ++g) {
      const auto o = order_desc(span<const std::int64_t>(cell_load.data() + g * dp, dp));
      for (std::size_t i = 0; i < dp; ++i) {
        cell_chunks[g * dp + i] = static_cast<std::int32_t>(g * dp) + o[i];
      }
    }
    auto& rank_of_cell = ws.rank_of_cell;
    rank_of_cell.assign(dp * ga, 0);
    ws.kk.run(cell_load, cell_chunks, s.dp);
    ws.kk.assign(rank_of_cell);
    for (std::size_t p = 0; p < n; ++p) {
      out[p].rank = rank_of_cell[static_cast<std::size_t>(cell_of[p])];
    }
    return;
  }
  // per_step: KK over all packs, then swaps between the heaviest and lightest ranks; each rank's
  // packs sorted descending fill its micro-steps mbs at a time.
  const std::size_t k = ga * mbs;
  auto& rank_of = ws.rank_of;
  auto& units = ws.units;
  auto& fill = ws.fill;
  rank_of.assign(n, 0);
  ws.kk.run(costs, order, s.dp);
  ws.kk.assign(rank_of);
  units.resize(n);
  fill.assign(dp, 0);
  for (const auto p : order) {
    const auto r = static_cast<std::size_t>(rank_of[static_cast<std::size_t>(p)]);
    units[r * k + fill[r]++] = p;
  }
  improve_max_load(costs, units, dp, k, max_swaps);
  for (std::size_t r = 0; r < dp; ++r) {
    const auto first = units.begin() + static_cast<std::ptrdiff_t>(r * k);
    std::sort(first, first + static_cast<std::ptrdiff_t>(k), [&](std::int32_t a, std::int32_t b) {
      const auto ca = costs[static_cast<std::size_t>(a)];
      const auto cb = costs[static_cast<std::size_t>(b)];
      return ca > cb || (ca == cb && a < b);
    });
    for (std::size_t j = 0; j < k; ++j) {
      out[static_cast<std::size_t>(units[r * k + j])] =
          cell{static_cast<std::int32_t>(r), static_cast<std::int32_t>(j / mbs)};
    }
  }
}

// Stage 1 given `order`, allocating its result and working memory.
inline assignment balance_sorted(span<const std::int64_t> costs, span<const std::int32_t> order,
                                 const shape& s, sync_mode mode, std::int32_t max_swaps) {
  assignment out;
  balance_scratch ws;
  balance_sorted(costs, order, s, mode, max_swaps, out, ws);
  return out;
}

} // namespace detail

/// The default stage-1 policy: a pack -> (rank, micro-step) assignment that balances load.
///
/// - `per_micro_step`: costs sorted descending are cut into `ga` chunks; chunk m becomes
///   micro-step m, which makes A equal to LB_A exactly when mbs = 1, and equal-size
///   Karmarkar–Karp (largest differencing) gives every rank one pack of every chunk. For mbs > 1
///   each micro-step's packs are first grouped into `dp` cells by Karmarkar–Karp over its `mbs`
///   sorted sub-chunks, then whole cells are dealt to ranks the same way. Guarantee for mbs > 1:
///   A <= sum over micro-steps m of (ceil(S_m / dp) + max_m - min_m), where S_m, max_m and min_m
///   are the sum, largest and smallest cost of the m-th sorted chunk of dp * mbs packs.
/// - `per_step`: equal-size Karmarkar–Karp over all packs, then up to `max_swaps` swaps between
///   the heaviest rank and the lightest ones lower B; each rank's packs, sorted descending, fill
///   its micro-steps in order (mbs at a time), which minimises A for that partition.
///
/// B is never above what plain equal-size Karmarkar–Karp (one pack of every sorted chunk of dp
/// per rank, as verl does) gives on the same input: in `per_micro_step` mode with mbs = 1 it is
/// exactly that, in `per_step` mode swaps only lower it; for mbs > 1 in `per_micro_step` mode A
/// ranks first and B is best effort. O(N log N); deterministic (ties broken by pack id).
class balancer {
 public:
  /// Upper limit on improving swaps in `per_step` mode; 0 keeps Karmarkar–Karp's answer.
  std::int32_t max_swaps = 256;

  /// Every pack's cell for `costs` (one per pack of `s`), balanced for `mode`. Throws
  /// `errc::invalid_argument` (or `errc::overflow`) on costs that do not fit `s`.
  [[nodiscard]] assignment operator()(span<const std::int64_t> costs, const shape& s,
                                      sync_mode mode) const {
    validate_costs(costs, s);
    const auto order = detail::order_desc(costs);
    return detail::balance_sorted(costs, order, s, mode, max_swaps);
  }
};

/// Whether `P` is a stage-1 policy: callable as `assignment(span<const int64_t> costs,
/// const shape&, sync_mode)`.
template <class P, class = void>
struct is_balancer : std::false_type {};
template <class P>
struct is_balancer<P, std::void_t<decltype(std::declval<const P&>()(
                          std::declval<span<const std::int64_t>>(), std::declval<const shape&>(),
                          std::declval<sync_mode>()))>>
    : std::is_same<assignment, decltype(std::declval<const P&>()(
                                   std::declval<span<const std::int64_t>>(),
                                   std::declval<const shape&>(), std::declval<sync_mode>()))> {};
/// `is_balancer<P>::value`.
template <class P>
inline constexpr bool is_balancer_v = is_balancer<P>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The C++20 spelling of `is_balancer_v`.
template <class P>
concept balancer_like = is_balancer_v<P>;
#endif

/// Stage 1 with policy `P` (default: `balancer`): every pack's cell, balanced for `mode`.
template <class P = balancer>
[[nodiscard]] assignment balance(span<const std::int64_t> costs, const shape& s,
                                 sync_mode mode = sync_mode::per_micro_step,
                                 const P& policy = P{}) {
  static_assert(is_balancer_v<P>, "P must be callable as assignment(span<const int64_t>, "
                                  "const shape&, sync_mode)");
  return policy(costs, s, mode);
}

} // namespace packswap
