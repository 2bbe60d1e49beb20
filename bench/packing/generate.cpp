// Workload generation throughput, in samples/s (items_per_second), per preset.
#include <packswap/packing/workload.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

void generate(benchmark::State& state, const std::string& preset) {
  const auto w = packswap::workload_preset(preset);
  constexpr std::int64_t samples = 100'000;
  std::uint64_t seed = 0;
  for (auto _ : state) {
    const auto set = packswap::generate(w, samples, ++seed);
    benchmark::DoNotOptimize(set.total_tokens());
  }
  state.SetItemsProcessed(state.iterations() * samples);
}
BENCHMARK_CAPTURE(generate, vlm_pretrain, std::string("vlm-pretrain"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate, text_only, std::string("text-only"))->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
