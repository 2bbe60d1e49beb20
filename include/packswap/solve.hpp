#pragma once

#include "packswap/balance/balance.hpp"
#include "packswap/balance/metrics.hpp"
#include "packswap/plan/plan.hpp"
#include "packswap/refine/movement.hpp"
#include "packswap/refine/refine.hpp"

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace packswap {

/// Options of `solve()`.
struct solve_options {
  /// What balanced means: see `sync_mode`.
  sync_mode mode = sync_mode::per_micro_step;
  /// Balance that may be traded for less movement (see `refine_options::eps`). Default 0.
  double eps = 0.0;
  /// Node map and inter-node weight for stage 2.
  packswap::topology topology{};
  /// false: stage 1 only, with its arbitrary rank labels (what a location-blind balancer does).
  bool refine = true;
  /// Whose lists `solution::plan` holds: -1 for every rank (the default), or one rank, which is
  /// all a rank needs at run time and costs one linear scan instead of building every list.
  std::int32_t plan_rank = -1;
  /// Count distinct peers per rank in `solution::movement` (a sort of the moved pairs).
  bool count_peers = true;
};

/// Everything `solve()` decides for one global batch.
struct solution {
  packswap::assignment cells; ///< cell of every pack, micro-steps in execution order
  packswap::plan plan;        ///< keep / send / receive lists derived from `cells`
  balance_metrics balance;    ///< A, LB_A, B, LB_B of `cells`
  movement_metrics movement;  ///< moved packs and bytes of `cells`
  std::int64_t stage1_a = 0;  ///< A after stage 1
  std::int64_t stage1_b = 0;  ///< B after stage 1
};

/// The whole solver: balance (stage 1), minimal movement (stage 2), micro-step order, plan.
///
/// Every rank calls it with the same gathered `packs` and gets the same solution, bit for bit,
/// on any compiler or standard library. Pure: no threads, no I/O, no globals.
///
/// ```
/// std::vector<packswap::pack_meta> packs = gather_metadata(); // one record per pack
/// auto sol = packswap::solve(packs, {/*dp=*/64, /*ga=*/16});
/// for (auto t : sol.plan.sends(my_rank, 0)) send(t.pack, t.peer);
/// ```
template <class Balancer = balancer, class Refiner = refiner>
solution solve(span<const pack_meta> packs, const shape& s, const solve_options& opt = {},
               const Balancer& balance_policy = Balancer{},
               const Refiner& refine_policy = Refiner{}) {
  static_assert(is_balancer_v<Balancer>, "Balancer must model is_balancer");
  static_assert(is_refiner_v<Refiner>, "Refiner must model is_refiner");
  validate_batch(packs, s);
  opt.topology.validate_for(s.dp);
  (void)detail::eps_ppm(opt.eps);
  PACKSWAP_EXPECTS(opt.plan_rank >= -1 && opt.plan_rank < s.dp, errc::invalid_argument,
                   "plan_rank is " << opt.plan_rank << ", must be -1 (all ranks) or in [0, " << s.dp
                                   << ")");
  std::vector<std::int64_t> costs(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  // Sorted once; the default policies share it.
  const auto order = detail::order_desc(costs);
  solution out;
  assignment a;
  if constexpr (std::is_same_v<Balancer, balancer>) {
    a = detail::balance_sorted(costs, order, s, opt.mode, balance_policy.max_swaps);
  } else {
    a = balance_policy(costs, s, opt.mode);
    validate_assignment(a, s);
  }
  const auto stage1_loads = cell_loads(costs, a, s);
  out.stage1_a = step_time_a(stage1_loads, s);
  out.stage1_b = step_time_b(stage1_loads, s);
  if (opt.refine) {
    const refine_options ropt{opt.mode, opt.eps, opt.topology};
    if constexpr (std::is_same_v<Refiner, refiner>) {
      a = detail::refine_sorted(packs, order, s, a, stage1_loads, ropt);
    } else {
      a = refine_policy(packs, s, a, ropt);
      validate_assignment(a, s);
    }
  }
  out.cells = detail::order_steps(packs, s, std::move(a));
  out.plan = opt.plan_rank < 0
                 ? detail::build_plan(packs, s, out.cells, 0, s.dp)
                 : detail::build_plan(packs, s, out.cells, opt.plan_rank, opt.plan_rank + 1);
  {
    const auto loads = cell_loads(costs, out.cells, s);
    out.balance.a = step_time_a(loads, s);
    out.balance.b = step_time_b(loads, s);
    detail::lower_bounds(costs, order, s, out.balance);
  }
  out.movement = detail::movement_of(packs, out.cells, s.dp, opt.topology, opt.count_peers);
  return out;
}

} // namespace packswap
