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
  /// Scales stage 2's work bound (see `refine_options::work_scale`): below 1 a faster worst case
  /// for more moved bytes where the search needs its work. In [0.001, 64]. Default 1.
  double work_scale = 1.0;
};

/// Everything `solve()` decides for one global batch.
struct solution {
  packswap::assignment cells; ///< cell of every pack, micro-steps in execution order
  packswap::plan plan;        ///< keep / send / receive lists derived from `cells`
  balance_metrics balance;    ///< A, LB_A, B, LB_B of `cells`
  movement_metrics movement;  ///< moved packs and bytes of `cells`
  std::int64_t stage1_a = 0;  ///< A after stage 1
  std::int64_t stage1_b = 0;  ///< B after stage 1
  /// Work of stage 2's searches: swap candidates weighed and pack records read (0 with a custom
  /// refiner or mbs > 1). A count, never a clock, so every rank gets the same plan.
  std::int64_t stage2_work = 0;
  /// Whether stage 2's search stopped at its deterministic work bound (32 per pack plus 2^19 with
  /// the fallback's allowance after it, up to 16,384 packs; above, the fallback's 8 per pack plus
  /// 2^16 on top; each times `work_scale`), or gave up before it because its repair, at the pace it
  /// had gone, could not have ended within it (also a count, never a clock). Then stage 2 answers
  /// with stage 1's ranks renamed and packs brought home within stage 1's balance: A and B as stage
  /// 1's, so A == LB_A (mbs = 1) and B <= (1 + eps) B_KK still hold. False for a search its review
  /// ended (past 8 N + 2^17 units times `work_scale`, where stage 1 renamed moves within 1/32 of
  /// the fewest bytes any answer could; the answer is then stage 1 renamed, see
  /// docs/algorithms.md).
  bool stage2_bounded = false;
};

namespace detail {

// Working memory of one solve: what `solver` keeps between calls.
struct solve_workspace {
  std::vector<std::int64_t> costs;
  std::vector<std::int32_t> order;
  std::vector<std::int64_t> table, recv; // cells (mbs > 1), per-step receives
  load_profile loads;
  order_scratch sort;
  balance_scratch balance;
  refine_scratch refine;
  plan_scratch plan;
  movement_scratch movement;
};

// solve() into `out`, with working memory from `ws`; validates its inputs. `transient`: `ws`
// dies with the call, so each stage's memory is freed as soon as the stage is done and the
// next stages reuse it (fewer fresh pages to fault in than holding everything to the end).
template <class Balancer, class Refiner>
void solve_into(span<const pack_meta> packs, const shape& s, const solve_options& opt,
                const Balancer& balance_policy, const Refiner& refine_policy, solve_workspace& ws,
                solution& out, bool transient) {
  static_assert(is_balancer_v<Balancer>,
                "Balancer must model balancer_like: callable as "
                "assignment(span<const int64_t>, const shape&, sync_mode)");
  static_assert(is_refiner_v<Refiner>,
                "Refiner must model refiner_like: callable as assignment(span<const pack_meta>, "
                "const shape&, const assignment&, const refine_options&)");
  validate_batch(packs, s);
  validate_stage2_options(opt, s.dp);
  PACKSWAP_EXPECTS(opt.plan_rank >= -1 && opt.plan_rank < s.dp, errc::invalid_argument,
                   "plan_rank is " << opt.plan_rank << ", must be -1 (all ranks) or in [0, " << s.dp
                                   << ")");
  auto& costs = ws.costs;
  costs.resize(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  // Sorted once; the default policies share it.
  order_desc(costs, ws.order, ws.sort);
  if (transient) {
    ws.sort = {};
  }
  const span<const std::int32_t> order(ws.order);
  // One assignment, worked on in place from stage 1 to the final micro-step order.
  assignment& a = out.cells;
  if constexpr (std::is_same_v<Balancer, balancer>) {
    balance_sorted(costs, order, s, opt.mode, balance_policy.max_swaps, a, ws.balance);
    if (transient) {
      ws.balance = {};
    }
  } else {
    a = balance_policy(costs, s, opt.mode);
    validate_assignment(a, s);
  }
  profile_loads(costs, a, s, ws.loads, ws.table);
  out.stage1_a = ws.loads.a();
  out.stage1_b = ws.loads.b();
  out.stage2_work = 0;
  out.stage2_bounded = false;
  if (opt.refine) {
    const refine_options ropt{opt.mode, opt.eps, opt.topology, opt.work_scale};
    if constexpr (std::is_same_v<Refiner, refiner>) {
      refine_sorted(packs, order, s, a, ws.loads, ropt, ws.refine);
      out.stage2_work = ws.refine.work;
      out.stage2_bounded = ws.refine.bounded;
      if (transient) {
        ws.refine = {};
      }
    } else {
      a = refine_policy(packs, s, a, ropt);
      validate_assignment(a, s);
    }
  }
  order_steps(packs, s, a, ws.recv, ws.table);
  const std::int32_t first_rank = opt.plan_rank < 0 ? 0 : opt.plan_rank;
  const std::int32_t last_rank = opt.plan_rank < 0 ? s.dp : opt.plan_rank + 1;
  build_plan_into(packs, s, a, first_rank, last_rank, ws.plan, out.plan);
  profile_loads(costs, a, s, ws.loads, ws.table);
  out.balance.a = ws.loads.a();
  out.balance.b = ws.loads.b();
  lower_bounds(costs, order, s, out.balance);
  out.movement = movement_of(packs, a, s.dp, opt.topology, opt.count_peers, ws.movement);
}

} // namespace detail

/// The whole solver: balance (stage 1), minimal movement (stage 2), micro-step order, plan.
///
/// Every rank calls it with the same gathered `packs` and gets the same solution, bit for bit,
/// on any compiler or standard library. Pure: no threads, no I/O, no globals. A trainer that
/// solves every step should keep a `solver`, which returns the same solutions without
/// allocating its working memory anew each time.
///
/// ```
/// std::vector<packswap::pack_meta> packs = gather_metadata(); // one record per pack
/// auto sol = packswap::solve(packs, {/*dp=*/64, /*ga=*/16});
/// for (auto t : sol.plan.sends(my_rank, 0)) send(t.pack, t.peer);
/// ```
template <class Balancer = balancer, class Refiner = refiner>
[[nodiscard]] solution
solve(span<const pack_meta> packs, const shape& s, const solve_options& opt = {},
      const Balancer& balance_policy = Balancer{}, const Refiner& refine_policy = Refiner{}) {
  detail::solve_workspace ws;
  solution out;
  detail::solve_into(packs, s, opt, balance_policy, refine_policy, ws, out, true);
  return out;
}

/// `solve()` with the default policies, keeping its working memory between calls.
///
/// A solver and its solution hold about 210 bytes per pack with one rank's plan (53 MiB at 262,144
/// packs) and 275 with every rank's (`kept_bytes` in bench/balance/solve.cpp, on a workload whose
/// search succeeds; the fallback's renaming of stage 1's ranks keeps 16 more, and stage 1 up to 16
/// more with cells of several packs or one sync per step); allocating that afresh each step costs
/// the page faults of touching new memory (compare `solve_once` with `solve` in
/// docs/performance.md). A `solver` keeps what its largest batch needed and reuses it, on every
/// path of both stages, asking the allocator for nothing the size of the batch once its batches
/// stop growing (`release()` gives it back); `solve(..., out)` reuses the memory of a previous
/// `solution` too. Same answers as `solve()`, bit for bit; bad input throws before `out` is
/// touched. Not thread-safe: one solver per thread.
///
/// ```
/// packswap::solver solver;
/// packswap::solution sol;
/// for (;;) { // every step
///   solver.solve(gather_metadata(), shape, {}, sol);
///   exchange(sol.plan);
/// }
/// ```
class solver {
 public:
  /// The solution for one global batch (see `packswap::solve`).
  [[nodiscard]] solution solve(span<const pack_meta> packs, const shape& s,
                               const solve_options& opt = {}) {
    solution out;
    solve(packs, s, opt, out);
    return out;
  }

  /// The same, written into `out`, whose memory is reused.
  void solve(span<const pack_meta> packs, const shape& s, const solve_options& opt, solution& out) {
    detail::solve_into(packs, s, opt, balancer{}, refiner{}, ws_, out, false);
  }

  /// Frees the working memory kept from earlier calls.
  void release() { ws_ = detail::solve_workspace{}; }

 private:
  detail::solve_workspace ws_;
};

} // namespace packswap
