// Packing throughput, single-threaded, in samples/s (items_per_second): the default preset's
// stream is generated once, outside the timed loop; each iteration packs all of it. The
// `efficiency` counter is the packing efficiency of that run.
#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/workload.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>

namespace {

constexpr std::int64_t stream_samples = 200'000;

const packswap::sample_set& stream() {
  static const auto set =
      packswap::generate(packswap::workload_preset("vlm-pretrain"), stream_samples, 1);
  return set;
}

template <class Packer>
void run(benchmark::State& state, const Packer& packer) {
  const auto& set = stream();
  double efficiency = 0.0;
  for (auto _ : state) {
    const auto packs = packer(set);
    benchmark::DoNotOptimize(packs.total_tokens());
    efficiency = packswap::measure_packing(packs).efficiency();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(set.size()));
  state.counters["efficiency"] = efficiency;
}

// Args: buffer, lookahead.
void greedy(benchmark::State& state) {
  run(state, packswap::greedy_packer{8192, state.range(0), packswap::oversize_policy::reject,
                                     state.range(1)});
}
BENCHMARK(greedy)
    ->ArgNames({"buffer", "lookahead"})
    ->Args({1000, 16})
    ->Args({1000, 0})
    ->Args({64, 16})
    ->Args({10'000, 16})
    ->Unit(benchmark::kMillisecond);

// Args: buffer; the budget is the mean image tokens per pack of the 1D packing.
void budgeted(benchmark::State& state) {
  const auto budget =
      packswap::mean_image_tokens_per_pack(packswap::greedy_packer{8192, state.range(0)}(stream()));
  run(state,
      packswap::budgeted_packer{8192, budget, state.range(0), packswap::oversize_policy::skip});
}
BENCHMARK(budgeted)->ArgNames({"buffer"})->Arg(1000)->Arg(10'000)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
