#pragma once

#include "packswap/balance/metrics.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"
#include "packswap/simulate/method.hpp"
#include "packswap/simulate/network.hpp"
#include "packswap/simulate/pack_stream.hpp"
#include "packswap/simulate/placement.hpp"
#include "packswap/simulate/step_time.hpp"
#include "packswap/solve.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace packswap {

/// How the simulated cluster runs a step.
struct simulation_options {
  /// Where ranks meet, which is also what the solver balances for.
  sync_mode sync = sync_mode::per_micro_step;
  /// Micro-step 0's exchange in `rebalance-overlap`: exposed (default) or prefetched.
  first_exchange first = first_exchange::exposed;
  /// Links and node size for the exchange.
  network_model network{};
  /// The solver's `eps`: B (and, per step, A) it may give up for less movement. Ranks meeting
  /// every micro-step, stage 2 keeps A exact whatever eps is, so eps there trades only B, which
  /// is not the step time: a little (0.01) moves less and solves much faster at scale.
  double eps = 0.0;
  /// Keep the loader's placement for a global batch whose rebalanced step, exchange included,
  /// would be no faster (every rank can tell from the gathered metadata and the same model), so
  /// rebalancing never makes a step slower. Off: always take the solver's assignment.
  bool guard = true;
  /// Solve with the network's node map (`network_model::topology`), so stage 2 keeps bytes inside
  /// nodes; off: one flat node, all moved bytes alike.
  bool topology_aware = true;
};

/// What one method did with one global batch.
struct method_step {
  std::int64_t step_us = 0;       ///< the step, exposed exchange included
  std::int64_t compute_us = 0;    ///< the step's compute alone (A or B)
  std::int64_t total_work_us = 0; ///< compute over all cells (dp x the ideal step)
  /// The best step any placement of these packs could have, compute only: LB_A or LB_B (exact
  /// for A with mbs = 1). Above the ideal because packs are atomic: with one pack per cell, a
  /// micro-step can be no shorter than its heaviest pack.
  std::int64_t best_us = 0;
  std::int64_t tokens = 0;      ///< real tokens trained on
  std::int64_t packs = 0;       ///< packs computed
  std::int64_t moved_bytes = 0; ///< bytes sent between ranks
  bool fell_back = false;       ///< the guard kept the loader's placement
};

/// One `method_step` per method, indexed by `static_cast<std::size_t>(method)`.
using batch_result = std::array<method_step, all_methods.size()>;

namespace detail {

inline method_step timed(span<const std::int64_t> loads, span<const std::int64_t> exchange,
                         const shape& s, const timing_options& t, std::int64_t tokens) {
  const auto timing = step_time(loads, exchange, s, t);
  method_step out;
  out.step_us = timing.step_us;
  out.compute_us = timing.compute_us;
  out.total_work_us = timing.total_work_us;
  out.tokens = tokens;
  out.packs = s.packs();
  return out;
}

inline std::vector<std::int64_t> costs_of(const std::vector<pack_meta>& meta) {
  std::vector<std::int64_t> out(meta.size());
  for (std::size_t p = 0; p < meta.size(); ++p) {
    out[p] = meta[p].cost;
  }
  return out;
}

// LB_A or LB_B of `costs`.
inline std::int64_t best_step(std::vector<std::int64_t> costs, const shape& s, sync_mode mode) {
  std::sort(costs.begin(), costs.end(), std::greater<>());
  return mode == sync_mode::per_micro_step ? lower_bound_a_sorted(costs, s)
                                           : lower_bound_b_sorted(costs, s);
}

} // namespace detail

/// One global batch of shape `s` under every method: the 1D packs of `one_d` from `start_1d`
/// (baseline, local, both rebalance methods: the same packs) and the 2D packs of `two_d` from
/// `start_2d` (the same samples packed with an image budget: the same number of packs, which hold
/// fewer tokens). The solver runs once; `rebalance-sync` and `rebalance-overlap` differ only in
/// how the exchange runs. Pure and deterministic. Dominated by `solve`.
///
/// ```
/// auto r = packswap::simulate_batch(one_d, 0, two_d, 0, {/*dp=*/1024, /*ga=*/16});
/// auto& overlap = r[static_cast<std::size_t>(packswap::method::rebalance_overlap)];
/// ```
[[nodiscard]] inline batch_result simulate_batch(const pack_stream& one_d, std::size_t start_1d,
                                                 const pack_stream& two_d, std::size_t start_2d,
                                                 const shape& s,
                                                 const simulation_options& opt = {}) {
  opt.network.validate();
  PACKSWAP_EXPECTS(one_d.capacity == two_d.capacity, errc::invalid_argument,
                   "the 1D stream has capacity " << one_d.capacity << ", the 2D stream "
                                                 << two_d.capacity << "; they must agree");
  batch_result out;
  const auto at = [&out](method m) -> method_step& { return out[static_cast<std::size_t>(m)]; };
  const timing_options compute_only{opt.sync, exchange_mode::overlapped, opt.first};
  const auto loader = loader_placement(s);

  const auto meta = batch_meta(one_d, start_1d, s);
  const auto costs = detail::costs_of(meta);
  const std::int64_t tokens = batch_tokens(one_d, start_1d, s.packs());
  at(method::baseline) = detail::timed(cell_loads(costs, loader, s), {}, s, compute_only, tokens);
  at(method::local) =
      detail::timed(cell_loads(costs, local_placement(costs, s), s), {}, s, compute_only, tokens);
  {
    const auto costs_2d = detail::costs_of(batch_meta(two_d, start_2d, s));
    method_step& r = at(method::two_d);
    r = detail::timed(cell_loads(costs_2d, loader, s), {}, s, compute_only,
                      batch_tokens(two_d, start_2d, s.packs()));
    r.best_us = detail::best_step(costs_2d, s, opt.sync);
  }

  solve_options so;
  so.mode = opt.sync;
  so.eps = opt.eps;
  so.topology = opt.topology_aware ? opt.network.topology() : topology{};
  so.plan_rank = 0; // the plan is not needed: the exchange is priced from the cells
  so.count_peers = false;
  const auto sol = solve(meta, s, so);
  const std::int64_t best =
      opt.sync == sync_mode::per_micro_step ? sol.balance.lb_a : sol.balance.lb_b;
  at(method::baseline).best_us = best;
  at(method::local).best_us = best;
  const auto loads = cell_loads(costs, sol.cells, s);
  const auto x = measure_exchange(meta, sol.cells, s, opt.network);
  const std::pair<method, exchange_mode> runs[] = {
      {method::rebalance_sync, exchange_mode::synchronous},
      {method::rebalance_overlap, exchange_mode::overlapped}};
  for (const auto& [m, mode] : runs) {
    method_step r = detail::timed(loads, x.time_us, s, {opt.sync, mode, opt.first}, tokens);
    r.best_us = best;
    r.moved_bytes = x.moved_bytes;
    if (opt.guard && x.moved > 0 && r.step_us >= at(method::baseline).step_us) {
      r = at(method::baseline);
      r.fell_back = true;
    }
    at(m) = r;
  }
  return out;
}

/// Global batch `k` of a run of `steps` batches of shape `s`: `simulate_batch` at the positions
/// `batch_start` gives each stream for `seed`.
[[nodiscard]] inline batch_result simulate_step(const pack_stream& one_d, const pack_stream& two_d,
                                                const shape& s, std::int64_t steps, std::int64_t k,
                                                std::uint64_t seed,
                                                const simulation_options& opt = {}) {
  validate(s);
  return simulate_batch(one_d, batch_start(one_d.size(), s.packs(), steps, k, seed), two_d,
                        batch_start(two_d.size(), s.packs(), steps, k, seed), s, opt);
}

/// A method's sums over the steps of a run.
struct method_totals {
  std::int64_t steps = 0;         ///< global batches added
  std::int64_t step_us = 0;       ///< sum of `method_step::step_us`
  std::int64_t total_work_us = 0; ///< sum of `method_step::total_work_us`
  std::int64_t best_us = 0;       ///< sum of `method_step::best_us`
  std::int64_t tokens = 0;        ///< sum of `method_step::tokens`
  std::int64_t packs = 0;         ///< sum of `method_step::packs`
  std::int64_t moved_bytes = 0;   ///< sum of `method_step::moved_bytes`
  std::int64_t fallbacks = 0;     ///< batches with `method_step::fell_back`

  /// Adds one global batch; throws `errc::overflow` when a sum leaves `std::int64_t`.
  void add(const method_step& r) {
    ++steps;
    step_us = detail::checked_add(step_us, r.step_us, "summed step time");
    total_work_us = detail::checked_add(total_work_us, r.total_work_us, "summed compute");
    best_us = detail::checked_add(best_us, r.best_us, "summed best step");
    tokens = detail::checked_add(tokens, r.tokens, "summed tokens");
    packs += r.packs;
    moved_bytes = detail::checked_add(moved_bytes, r.moved_bytes, "summed moved bytes");
    fallbacks += r.fell_back ? 1 : 0;
  }
};

/// Sums for every method, indexed like `batch_result`.
using run_totals = std::array<method_totals, all_methods.size()>;

/// Adds one global batch's results to `totals`.
inline void accumulate(run_totals& totals, const batch_result& r) {
  for (std::size_t m = 0; m < totals.size(); ++m) {
    totals[m].add(r[m]);
  }
}

/// What a run says about one method: the columns of `packswap-sim`'s report.
struct method_summary {
  packswap::method method = method::baseline; ///< the method summarized
  double efficiency = 0.0;                    ///< real tokens / (packs x capacity)
  double waste = 0.0;                         ///< 1 - sum of ideal steps / sum of steps, in [0, 1]
  double step_time_ms = 0.0;                  ///< mean step time
  double relative_throughput = 0.0;           ///< real tokens per second / the baseline's
  double bytes_moved_per_rank = 0.0;          ///< bytes one rank sends per step, on average
  /// Sum of steps / sum of `method_step::best_us` - 1: what the best placement of the same packs
  /// would still save (0 for a method that reaches LB_A or LB_B and hides its exchange).
  double over_best = 0.0;
  std::int64_t steps = 0;     ///< global batches simulated
  std::int64_t fallbacks = 0; ///< batches where the guard kept the loader's placement
};

/// The summaries of `totals` for `dp` ranks and packs of `capacity` tokens. Waste weighs every
/// step by its length (the idle share of all GPU time in the run); throughput counts real tokens,
/// so a method whose packs hold fewer tokens (2D) pays for it.
[[nodiscard]] inline std::array<method_summary, all_methods.size()>
summarize(const run_totals& totals, std::int32_t dp, std::int64_t capacity) {
  PACKSWAP_EXPECTS(dp >= 1 && capacity >= 1, errc::invalid_argument,
                   "summarize needs dp >= 1 and capacity >= 1, got " << dp << " and " << capacity);
  const auto rate = [](const method_totals& t) {
    return t.step_us == 0 ? 0.0 : static_cast<double>(t.tokens) / static_cast<double>(t.step_us);
  };
  const double base_rate = rate(totals[static_cast<std::size_t>(method::baseline)]);
  std::array<method_summary, all_methods.size()> out;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const method_totals& t = totals[i];
    method_summary& m = out[i];
    m.method = all_methods[i];
    m.steps = t.steps;
    m.fallbacks = t.fallbacks;
    if (t.steps == 0) {
      continue;
    }
    m.efficiency = t.packs == 0 ? 0.0
                                : static_cast<double>(t.tokens) / (static_cast<double>(t.packs) *
                                                                   static_cast<double>(capacity));
    m.waste = waste(t.total_work_us, dp, t.step_us);
    m.step_time_ms = static_cast<double>(t.step_us) / 1000.0 / static_cast<double>(t.steps);
    m.relative_throughput = base_rate == 0.0 ? 0.0 : rate(t) / base_rate;
    m.bytes_moved_per_rank =
        static_cast<double>(t.moved_bytes) / static_cast<double>(t.steps) / static_cast<double>(dp);
    m.over_best = t.best_us == 0
                      ? 0.0
                      : static_cast<double>(t.step_us) / static_cast<double>(t.best_us) - 1.0;
  }
  return out;
}

/// A whole run, one global batch after another: `steps` batches of shape `s` cut from the
/// streams as `batch_start` says, every method on each, summarized. `progress(done, steps)` is
/// called after each batch (leave it empty for none). Pure apart from `progress`; deterministic.
/// Batches are independent, so a caller may also run `simulate_step` for different `k` on
/// different threads and `accumulate` the results in order: the summary is the same.
///
/// ```
/// auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 200'000, 42);
/// auto one_d = packswap::pack_samples(set);
/// packswap::budgeted_packer two_d_packer{8192, packswap::mean_image_tokens_per_pack(one_d)};
/// auto summary = packswap::simulate(packswap::make_pack_stream(set, one_d),
///                                   packswap::make_pack_stream(set, two_d_packer(set)),
///                                   {/*dp=*/64, /*ga=*/16}, /*steps=*/20, /*seed=*/42);
/// ```
[[nodiscard]] inline std::array<method_summary, all_methods.size()>
simulate(const pack_stream& one_d, const pack_stream& two_d, const shape& s, std::int64_t steps,
         std::uint64_t seed, const simulation_options& opt = {},
         const std::function<void(std::int64_t, std::int64_t)>& progress = {}) {
  PACKSWAP_EXPECTS(steps >= 1, errc::invalid_argument,
                   "steps is " << steps << ", must be at least 1");
  run_totals totals{};
  for (std::int64_t k = 0; k < steps; ++k) {
    accumulate(totals, simulate_step(one_d, two_d, s, steps, k, seed, opt));
    if (progress) {
      progress(k + 1, steps);
    }
  }
  return summarize(totals, s.dp, one_d.capacity);
}

} // namespace packswap
