#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/step_maxima.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace packswap {

/// The balance of one assignment, in the cost model's unit (DESIGN.md §2).
struct balance_metrics {
  std::int64_t a = 0;    ///< A: sum over micro-steps of the slowest rank's load
  std::int64_t lb_a = 0; ///< a lower bound on A over all assignments (exact optimum for mbs = 1)
  std::int64_t b = 0;    ///< B: the largest total load of one rank
  std::int64_t lb_b = 0; ///< a lower bound on B over all assignments
};

/// Writes the load of every cell, `loads[rank * ga + micro_step]`, into `loads`, reusing its
/// memory. Requires a valid assignment.
inline void cell_loads(span<const std::int64_t> costs, const assignment& a, const shape& s,
                       std::vector<std::int64_t>& loads) {
  loads.assign(static_cast<std::size_t>(s.cells()), 0);
  for (std::size_t p = 0; p < a.size(); ++p) {
    loads[static_cast<std::size_t>(a[p].rank) * static_cast<std::size_t>(s.ga) +
          static_cast<std::size_t>(a[p].micro_step)] += costs[p];
  }
}

/// Load of every cell, `loads[rank * ga + micro_step]`. Requires a valid assignment.
[[nodiscard]] inline std::vector<std::int64_t> cell_loads(span<const std::int64_t> costs,
                                                          const assignment& a, const shape& s) {
  std::vector<std::int64_t> loads;
  cell_loads(costs, a, s, loads);
  return loads;
}

/// A = sum over micro-steps m of max over ranks r of `loads[r * ga + m]`.
[[nodiscard]] inline std::int64_t step_time_a(span<const std::int64_t> loads, const shape& s) {
  std::int64_t total = 0;
  for (std::int32_t m = 0; m < s.ga; ++m) {
    std::int64_t slowest = 0;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      slowest = std::max(slowest, loads[static_cast<std::size_t>(r) * s.ga + m]);
    }
    total += slowest;
  }
  return total;
}

/// B = max over ranks r of the sum over micro-steps of `loads[r * ga + m]`.
[[nodiscard]] inline std::int64_t step_time_b(span<const std::int64_t> loads, const shape& s) {
  std::int64_t worst = 0;
  for (std::int32_t r = 0; r < s.dp; ++r) {
    std::int64_t sum = 0;
    for (std::int32_t m = 0; m < s.ga; ++m) {
      sum += loads[static_cast<std::size_t>(r) * s.ga + m];
    }
    worst = std::max(worst, sum);
  }
  return worst;
}

namespace detail {

/// What A, B and stage 2 read of the cell loads: each micro-step's largest cell load (over
/// ranks) and each rank's total. A = the sum of `step_max`, B = the largest `rank_sum`.
struct load_profile {
  std::vector<std::int64_t> step_max; ///< per micro-step m: max over ranks of loads[r * ga + m]
  std::vector<std::int64_t> rank_sum; ///< per rank r: sum over m of loads[r * ga + m]

  std::int64_t a() const {
    std::int64_t total = 0;
    for (const auto v : step_max) {
      total += v;
    }
    return total;
  }
  std::int64_t b() const {
    std::int64_t worst = 0;
    for (const auto v : rank_sum) {
      worst = std::max(worst, v);
    }
    return worst;
  }
};

/// The load profile of assignment `a` for `costs` into `out`, reusing its memory; `table` is
/// working memory (`step_maxima`, which builds no table of dp * ga cell loads when mbs = 1).
/// Requires a valid assignment; same A and B as `step_time_a` / `step_time_b` of `cell_loads`.
inline void profile_loads(span<const std::int64_t> costs, const assignment& a, const shape& s,
                          load_profile& out, std::vector<std::int64_t>& table) {
  out.step_max.resize(static_cast<std::size_t>(s.ga));
  out.rank_sum.assign(static_cast<std::size_t>(s.dp), 0);
  step_maxima(
      a, s, [&](std::size_t p) { return costs[p]; },
      [&](std::size_t p, std::int64_t v) {
        out.rank_sum[static_cast<std::size_t>(a[p].rank)] += v;
      },
      out.step_max.data(), table);
}

} // namespace detail

namespace detail {

// LB_A from the costs in descending order, `at(i)` the i-th largest, and their total. With G =
// dp * mbs and c_i the i-th largest cost, P(i) the sum of the i largest:
//
//   LB_A = max over t in [0, ga] of  c_0 + c_G + ... + c_(t-1)G  +  ceil((total - P(tG)) / dp).
//
// Valid for any assignment: order the micro-steps by their largest pack; the j-th of them holds
// a pack of at least c_jG (the jG + 1 largest packs cannot fit in j micro-steps), and its
// slowest cell is at least that pack. Every other micro-step's slowest cell is at least its
// cells' mean, its total over dp; the t micro-steps taken by their largest pack hold at most tG
// packs, at most P(tG), so the others hold at least total - P(tG). A is an integer, hence the
// ceiling. t = ga gives the sum of the sorted chunks' maxima, the optimum when mbs = 1; t = 0
// gives ceil(total / dp). O(n).
template <class At>
std::int64_t lower_bound_a(std::size_t n, At at, const shape& s, std::int64_t total) {
  const std::size_t group = static_cast<std::size_t>(s.dp) * static_cast<std::size_t>(s.mbs);
  const auto dp = static_cast<std::int64_t>(s.dp);
  std::int64_t maxima = 0;
  std::int64_t prefix = 0;
  std::int64_t best = (total + dp - 1) / dp;
  for (std::size_t first = 0; first < n; first += group) {
    maxima += at(first);
    for (std::size_t i = first; i < std::min(n, first + group); ++i) {
      prefix += at(i);
    }
    if (s.mbs == 1 && first + group < n) {
      continue; // only t = ga can win: each chunk's largest is at least its mean
    }
    best = std::max(best, maxima + (total - prefix + dp - 1) / dp);
  }
  return best;
}

} // namespace detail

/// LB_A, a lower bound on A over all assignments: with G = dp * mbs and the costs sorted
/// descending (c_0 >= c_1 >= ...), the largest over t in [0, ga] of c_0 + c_G + ... + c_(t-1)G
/// plus ceil((the total of all but the tG largest) / dp). For mbs = 1 that is the sum of the
/// maxima of the sorted chunks of dp, the optimum of A; for mbs > 1 it is at least both the sum
/// of the chunks' maxima and ceil(total / dp). `sorted_desc` must hold all costs in descending
/// order.
[[nodiscard]] inline std::int64_t lower_bound_a_sorted(span<const std::int64_t> sorted_desc,
                                                       const shape& s) {
  std::int64_t total = 0;
  for (const auto c : sorted_desc) {
    total += c;
  }
  return detail::lower_bound_a(
      sorted_desc.size(), [&](std::size_t i) { return sorted_desc[i]; }, s, total);
}

/// LB_B: max(ceil(total / dp), the lightest possible cell holding the largest pack, that is the
/// largest cost plus the `mbs - 1` smallest). `sorted_desc` must hold all costs in descending
/// order.
[[nodiscard]] inline std::int64_t lower_bound_b_sorted(span<const std::int64_t> sorted_desc,
                                                       const shape& s) {
  std::int64_t total = 0;
  for (const auto c : sorted_desc) {
    total += c;
  }
  std::int64_t biggest_cell = sorted_desc.empty() ? 0 : sorted_desc[0];
  for (std::int32_t k = 1; k < s.mbs; ++k) {
    biggest_cell += sorted_desc[sorted_desc.size() - static_cast<std::size_t>(k)];
  }
  return std::max((total + s.dp - 1) / s.dp, biggest_cell);
}

namespace detail {

// LB_A and LB_B from `order` (pack ids by cost descending); no validation.
inline void lower_bounds(span<const std::int64_t> costs, span<const std::int32_t> order,
                         const shape& s, balance_metrics& m) {
  // The total needs no order; for mbs = 1 the maxima are the heads of the sorted chunks.
  std::int64_t total = 0;
  for (const auto c : costs) {
    total += c;
  }
  const std::int64_t avg = (total + s.dp - 1) / s.dp;
  if (s.mbs == 1) {
    std::int64_t sum_of_maxima = 0;
    for (std::size_t i = 0; i < order.size(); i += static_cast<std::size_t>(s.dp)) {
      sum_of_maxima += costs[static_cast<std::size_t>(order[i])];
    }
    m.lb_a = sum_of_maxima;
  } else {
    m.lb_a = lower_bound_a(
        order.size(), [&](std::size_t i) { return costs[static_cast<std::size_t>(order[i])]; }, s,
        total);
  }
  std::int64_t biggest_cell = order.empty() ? 0 : costs[static_cast<std::size_t>(order[0])];
  for (std::int32_t k = 1; k < s.mbs; ++k) {
    biggest_cell +=
        costs[static_cast<std::size_t>(order[order.size() - static_cast<std::size_t>(k)])];
  }
  m.lb_b = std::max(avg, biggest_cell);
}

} // namespace detail

/// A, LB_A, B and LB_B of assignment `a` for `costs`. Validates its inputs.
[[nodiscard]] inline balance_metrics measure_balance(span<const std::int64_t> costs,
                                                     const assignment& a, const shape& s) {
  validate_costs(costs, s);
  validate_assignment(a, s);
  std::vector<std::int64_t> sorted(costs.begin(), costs.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const auto loads = cell_loads(costs, a, s);
  balance_metrics m;
  m.a = step_time_a(loads, s);
  m.b = step_time_b(loads, s);
  m.lb_a = lower_bound_a_sorted(sorted, s);
  m.lb_b = lower_bound_b_sorted(sorted, s);
  return m;
}

} // namespace packswap
