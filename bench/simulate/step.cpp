// One simulated global batch on the default workload (vlm-pretrain in 8K packs, default compute
// and network models), ga = 16:
//   simulate_step  every method, the solver included (what packswap-sim does per batch), with the
//                  solver's eps at 0 (the library's default) and 0.01 (packswap-sim's default
//                  when ranks meet every micro-step: A stays exact, stage 2 is much faster)
//   timing_only    the simulator's own model on a solved batch: exchange profile and step times
//                  for both exchange modes (what a step costs beyond the solver)
// Report medians: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/workload.hpp>
#include <packswap/simulate/simulator.hpp>

#include <map>
#include <utility>

namespace {

constexpr std::int32_t ga = 16;

// The 1D and 2D streams of a pool holding two global batches of `dp` ranks, built once.
const std::pair<packswap::pack_stream, packswap::pack_stream>& streams(std::int32_t dp) {
  static std::map<std::int32_t, std::pair<packswap::pack_stream, packswap::pack_stream>> cache;
  auto it = cache.find(dp);
  if (it == cache.end()) {
    const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"),
                                        std::int64_t{dp} * ga * 8, 42);
    const auto one_d = packswap::greedy_packer{}(set);
    packswap::budgeted_packer two_d{8192, packswap::mean_image_tokens_per_pack(one_d)};
    two_d.on_oversize = packswap::oversize_policy::skip;
    it = cache
             .emplace(dp, std::make_pair(packswap::make_pack_stream(set, one_d),
                                         packswap::make_pack_stream(set, two_d(set))))
             .first;
  }
  return it->second;
}

void simulate_step(benchmark::State& state, double eps) {
  const auto dp = static_cast<std::int32_t>(state.range(0));
  const auto& [one_d, two_d] = streams(dp);
  const packswap::shape s{dp, ga};
  packswap::simulation_options opt;
  opt.eps = eps;
  std::int64_t k = 0;
  for (auto _ : state) {
    auto r = packswap::simulate_step(one_d, two_d, s, 1 << 20, k++, 42, opt);
    benchmark::DoNotOptimize(r.data());
  }
  state.SetItemsProcessed(state.iterations() * s.packs());
}

void timing_only(benchmark::State& state) {
  const auto dp = static_cast<std::int32_t>(state.range(0));
  const packswap::shape s{dp, ga};
  const auto meta = packswap::batch_meta(streams(dp).first, 0, s);
  packswap::solve_options opt;
  opt.plan_rank = 0;
  opt.count_peers = false;
  const auto sol = packswap::solve(meta, s, opt);
  std::vector<std::int64_t> costs(meta.size());
  for (std::size_t p = 0; p < meta.size(); ++p) {
    costs[p] = meta[p].cost;
  }
  const packswap::network_model net;
  for (auto _ : state) {
    const auto loads = packswap::cell_loads(costs, sol.cells, s);
    const auto x = packswap::measure_exchange(meta, sol.cells, s, net);
    for (const auto mode :
         {packswap::exchange_mode::synchronous, packswap::exchange_mode::overlapped}) {
      auto t =
          packswap::step_time(loads, x.time_us, s, {packswap::sync_mode::per_micro_step, mode});
      benchmark::DoNotOptimize(t.step_us);
    }
  }
  state.SetItemsProcessed(state.iterations() * s.packs());
}

} // namespace

BENCHMARK_CAPTURE(simulate_step, eps_0, 0.0)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(simulate_step, eps_0_01, 0.01)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(timing_only)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
