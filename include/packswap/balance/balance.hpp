#pragma once

#include "packswap/balance/batch.hpp"
#include "packswap/balance/karmarkar_karp.hpp"
#include "packswap/detail/sort.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace packswap {

namespace detail {

// Lowers the largest rank load by swapping units (packs, or whole cells) between the heaviest
// rank and the lightest ones, only between units of the same class (micro-step, when A must not
// change). Units live in `units[r * per_rank + j]`. Stops when the heaviest rank has no improving
// swap, or after `max_rounds` swaps.
inline void improve_max_load(span<const std::int64_t> value, span<const std::int32_t> cls,
                             std::vector<std::int32_t>& units, std::int32_t ranks,
                             std::int32_t per_rank, std::int32_t max_rounds) {
  const auto dp = static_cast<std::size_t>(ranks);
  const auto k = static_cast<std::size_t>(per_rank);
  std::vector<std::int64_t> load(dp, 0);
  for (std::size_t r = 0; r < dp; ++r) {
    for (std::size_t j = 0; j < k; ++j) {
      load[r] += value[static_cast<std::size_t>(units[r * k + j])];
    }
  }
  constexpr std::size_t light_candidates = 32;
  std::vector<std::int32_t> order(dp);
  for (std::int32_t round = 0; round < max_rounds; ++round) {
    std::size_t heavy = 0;
    for (std::size_t r = 1; r < dp; ++r) {
      if (load[r] > load[heavy]) {
        heavy = r;
      }
    }
    for (std::size_t r = 0; r < dp; ++r) {
      order[r] = static_cast<std::int32_t>(r);
    }
    const std::size_t m = std::min(light_candidates, dp);
    const auto lighter = [&](std::int32_t a, std::int32_t b) {
      return load[static_cast<std::size_t>(a)] < load[static_cast<std::size_t>(b)] ||
             (load[static_cast<std::size_t>(a)] == load[static_cast<std::size_t>(b)] && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(m), order.end(),
                      lighter);
    std::int64_t best_max = load[heavy];
    std::size_t best_i = 0;
    std::size_t best_j = 0;
    bool found = false;
    for (std::size_t i = 0; i < k; ++i) {
      const auto x = static_cast<std::size_t>(units[heavy * k + i]);
      for (std::size_t c = 0; c < m; ++c) {
        const auto light = static_cast<std::size_t>(order[c]);
        if (light == heavy || load[light] >= load[heavy]) {
          continue;
        }
        for (std::size_t j = 0; j < k; ++j) {
          const auto y = static_cast<std::size_t>(units[light * k + j]);
          if (cls[x] != cls[y] || value[y] >= value[x]) {
            continue;
          }
          const std::int64_t d = value[x] - value[y];
          const std::int64_t new_max = std::max(load[heavy] - d, load[light] + d);
          if (new_max < best_max) {
            best_max = new_max;
            best_i = i;
            best_j = light * k + j;
            found = true;
          }
        }
      }
    }
    if (!found) {
      return;
    }
    const auto x = static_cast<std::size_t>(units[heavy * k + best_i]);
    const auto y = static_cast<std::size_t>(units[best_j]);
    const std::int64_t d = value[x] - value[y];
    load[heavy] -= d;
    load[best_j / k] += d;
    std::swap(units[heavy * k + best_i], units[best_j]);
  }
}

} // namespace detail

/// The default stage-1 policy: a pack -> (rank, micro-step) assignment that balances load.
///
/// - `per_micro_step`: costs sorted descending are cut into `ga` chunks; chunk m becomes
///   micro-step m, which makes A equal to LB_A exactly when mbs = 1. Equal-size Karmarkar–Karp
///   then gives every rank one pack of every chunk, and swaps inside a micro-step lower B further.
///   For mbs > 1 each micro-step's packs are first grouped into `dp` cells by Karmarkar–Karp over
///   its `mbs` sorted sub-chunks, then whole cells are dealt to ranks the same way. Guarantee:
///   A <= sum over micro-steps m of (ceil(S_m / dp) + max_m - min_m), where S_m, max_m and min_m
///   are the sum, largest and smallest cost of the m-th sorted chunk of dp * mbs packs.
/// - `per_step`: equal-size Karmarkar–Karp over all packs, then swaps between any packs of the
///   heaviest and the lightest ranks lower B; each rank's packs, sorted descending, fill its
///   micro-steps in order (mbs at a time), which minimises A for that partition.
///
/// B is never above what plain equal-size Karmarkar–Karp (one pack of every sorted chunk of dp per
/// rank, as verl does) gives on the same input, in `per_step` mode for every mbs and in
/// `per_micro_step` mode for mbs = 1 (for mbs > 1 that mode ranks A first and B is best effort).
/// O(N log N); deterministic (every tie is broken by pack id).
class balancer {
 public:
  /// Upper limit on improving swaps after Karmarkar–Karp; 0 keeps its answer as it is.
  std::int32_t max_swaps = 256;

  assignment operator()(span<const std::int64_t> costs, const shape& s, sync_mode mode) const {
    validate_costs(costs, s);
    const auto order = detail::order_desc(costs);
    return mode == sync_mode::per_step ? per_step(costs, s, order)
                                       : per_micro_step(costs, s, order);
  }

 private:
  assignment per_micro_step(span<const std::int64_t> costs, const shape& s,
                            const std::vector<std::int32_t>& order) const {
    const auto dp = static_cast<std::size_t>(s.dp);
    const auto ga = static_cast<std::size_t>(s.ga);
    const auto mbs = static_cast<std::size_t>(s.mbs);
    const std::size_t group = dp * mbs;
    assignment out(costs.size());
    // Cells: cell g * dp + c holds micro-step g's packs that KK put in set c.
    std::vector<std::int32_t> set_of(costs.size(), 0);
    std::vector<std::int64_t> cell_load(dp * ga, 0);
    std::vector<std::int32_t> cell_of(costs.size(), 0);
    for (std::size_t g = 0; g < ga; ++g) {
      const span<const std::int32_t> chunk(order.data() + g * group, group);
      if (mbs == 1) {
        for (std::size_t i = 0; i < dp; ++i) {
          set_of[static_cast<std::size_t>(chunk[i])] = static_cast<std::int32_t>(i);
        }
      } else {
        detail::karmarkar_karp(costs, chunk, s.dp).assign(set_of);
      }
      for (const auto p : chunk) {
        const auto c = g * dp + static_cast<std::size_t>(set_of[static_cast<std::size_t>(p)]);
        cell_of[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(c);
        cell_load[c] += costs[static_cast<std::size_t>(p)];
        out[static_cast<std::size_t>(p)].micro_step = static_cast<std::int32_t>(g);
      }
    }
    // Deal whole cells to ranks: KK over micro-steps, each a chunk of dp cells sorted by load.
    std::vector<std::int32_t> cell_chunks(dp * ga);
    for (std::size_t g = 0; g < ga; ++g) {
      const span<const std::int64_t> loads(cell_load.data() + g * dp, dp);
      const auto o = detail::order_desc(loads);
      for (std::size_t i = 0; i < dp; ++i) {
        cell_chunks[g * dp + i] = static_cast<std::int32_t>(g * dp) + o[i];
      }
    }
    std::vector<std::int32_t> rank_of_cell(dp * ga, 0);
    detail::karmarkar_karp(cell_load, cell_chunks, s.dp).assign(rank_of_cell);
    // units[r * ga + g] = the cell rank r computes at micro-step g; improve B cell-wise.
    std::vector<std::int32_t> units(dp * ga);
    std::vector<std::int32_t> cls(dp * ga);
    for (std::size_t c = 0; c < dp * ga; ++c) {
      const auto g = c / dp;
      units[static_cast<std::size_t>(rank_of_cell[c]) * ga + g] = static_cast<std::int32_t>(c);
      cls[c] = static_cast<std::int32_t>(g);
    }
    detail::improve_max_load(cell_load, cls, units, s.dp, s.ga, max_swaps);
    for (std::size_t r = 0; r < dp; ++r) {
      for (std::size_t g = 0; g < ga; ++g) {
        rank_of_cell[static_cast<std::size_t>(units[r * ga + g])] = static_cast<std::int32_t>(r);
      }
    }
    for (std::size_t p = 0; p < costs.size(); ++p) {
      out[p].rank = rank_of_cell[static_cast<std::size_t>(cell_of[p])];
    }
    return out;
  }

  assignment per_step(span<const std::int64_t> costs, const shape& s,
                      const std::vector<std::int32_t>& order) const {
    const auto dp = static_cast<std::size_t>(s.dp);
    const auto k = static_cast<std::size_t>(s.packs_per_rank());
    const auto mbs = static_cast<std::size_t>(s.mbs);
    std::vector<std::int32_t> rank_of(costs.size(), 0);
    detail::karmarkar_karp(costs, order, s.dp).assign(rank_of);
    std::vector<std::int32_t> units(costs.size());
    std::vector<std::size_t> fill(dp, 0);
    for (const auto p : order) { // rank lists come out sorted by cost descending
      const auto r = static_cast<std::size_t>(rank_of[static_cast<std::size_t>(p)]);
      units[r * k + fill[r]++] = p;
    }
    const std::vector<std::int32_t> one_class(costs.size(), 0);
    detail::improve_max_load(costs, one_class, units, s.dp, static_cast<std::int32_t>(k),
                             max_swaps);
    assignment out(costs.size());
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
    return out;
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
template <class P>
inline constexpr bool is_balancer_v = is_balancer<P>::value;

/// Stage 1 with policy `P` (default: `balancer`): every pack's cell, balanced for `mode`.
template <class P = balancer>
assignment balance(span<const std::int64_t> costs, const shape& s,
                   sync_mode mode = sync_mode::per_micro_step, const P& policy = P{}) {
  static_assert(is_balancer_v<P>, "P must be callable as assignment(span<const int64_t>, "
                                  "const shape&, sync_mode)");
  return policy(costs, s, mode);
}

} // namespace packswap
