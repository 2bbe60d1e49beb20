// Building the plan (who computes, keeps, sends and receives which pack at every micro-step) from a
// solved assignment, as `packswap::make_plan` and the solve do. The batch: the stress set's
// `bimodal` distribution (thumbnails and long video clips, 5% text-only), seed 1, of dp x ga x mbs
// packs, solved once at eps = 0 by a kept solver, whose answer there moves most packs (the largest
// plans):
//   plan_all  every rank's plan (what packswap-plan, the simulator and solve_options::plan_rank =
//             -1 ask for), its storage and working memory kept across calls as a kept solver keeps
//             them
//   plan_own  rank 0's plan alone (what the engine asks for on every rank)
// Arguments dp/ga/mbs. Report medians: --benchmark_repetitions=5
// --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <packswap/plan/plan.hpp>
#include <packswap/solve.hpp>

#include "stress.hpp"

#include <map>
#include <tuple>

namespace {

struct solved {
  packswap::shape shape;
  std::vector<packswap::pack_meta> packs;
  packswap::assignment cells;
};

const solved& batch(std::int32_t dp, std::int32_t ga, std::int32_t mbs) {
  static std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, solved> cache;
  const auto key = std::make_tuple(dp, ga, mbs);
  auto it = cache.find(key);
  if (it == cache.end()) {
    solved b;
    b.shape = packswap::shape{dp, ga, mbs};
    packswap::test::stress::dist d{};
    packswap::test::stress::parse("bimodal", d);
    b.packs = packswap::test::stress::batch(b.shape, d, 1);
    packswap::solve_options opt;
    opt.plan_rank = 0;
    b.cells = packswap::solve(b.packs, b.shape, opt).cells;
    it = cache.emplace(key, std::move(b)).first;
  }
  return it->second;
}

void plan(benchmark::State& state, bool every_rank) {
  const auto& b =
      batch(static_cast<std::int32_t>(state.range(0)), static_cast<std::int32_t>(state.range(1)),
            static_cast<std::int32_t>(state.range(2)));
  packswap::detail::plan_scratch ws;
  packswap::plan out;
  const std::int32_t first = 0;
  const std::int32_t last = every_rank ? b.shape.dp : 1;
  packswap::detail::build_plan_into(b.packs, b.shape, b.cells, first, last, ws, out); // untimed
  for (auto _ : state) {
    packswap::detail::build_plan_into(b.packs, b.shape, b.cells, first, last, ws, out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(b.packs.size()));
}

void shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"dp", "ga", "mbs"});
  bench->Args({64, 16, 1});    // 1,024 packs: the smoke run
  bench->Args({1024, 16, 1});  // 16,384 packs, the benchmark's shape
  bench->Args({1024, 4, 4});   // 16,384 packs, cells of four
  bench->Args({1024, 256, 1}); // 262,144 packs
  bench->Args({16384, 16, 1}); // 262,144 packs
  bench->Args({65536, 16, 1}); // 1,048,576 packs
  bench->Args({16384, 16, 4}); // 1,048,576 packs, cells of four
  bench->Unit(benchmark::kMillisecond);
}

void plan_all(benchmark::State& state) {
  plan(state, true);
}
void plan_own(benchmark::State& state) {
  plan(state, false);
}

} // namespace

BENCHMARK(plan_all)->Apply(shapes);
BENCHMARK(plan_own)->Apply(shapes);

BENCHMARK_MAIN();
