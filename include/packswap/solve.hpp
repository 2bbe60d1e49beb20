#pragma once

#include "packswap/balance/balance.hpp"
#include "packswap/balance/metrics.hpp"
#include "packswap/plan/plan.hpp"
#include "packswap/refine/movement.hpp"
#include "packswap/refine/refine.hpp"

#include <cstdint>
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
  validate_batch(packs, s);
  opt.topology.validate_for(s.dp);
  std::vector<std::int64_t> costs(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  solution out;
  assignment a = balance(costs, s, opt.mode, balance_policy);
  {
    const auto loads = cell_loads(costs, a, s);
    out.stage1_a = step_time_a(loads, s);
    out.stage1_b = step_time_b(loads, s);
  }
  if (opt.refine) {
    a = packswap::refine(packs, s, a, refine_options{opt.mode, opt.eps, opt.topology},
                         refine_policy);
  }
  out.cells = order_micro_steps(packs, s, std::move(a));
  out.plan = make_plan(packs, s, out.cells);
  out.balance = measure_balance(costs, out.cells, s);
  out.movement = measure_movement(packs, out.cells, s, opt.topology);
  return out;
}

} // namespace packswap
