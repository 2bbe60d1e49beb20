// Solver timings on the default workload (vlm-pretrain packed into 8K packs), ga = 16, from 256
// to 262,144 packs. Single-threaded; what each rank runs on the gathered metadata, every step,
// with one `packswap::solver` kept across steps (as a trainer keeps it; its first solve, which
// allocates the memory it then keeps, is not timed):
//   balance_plan  stage 1 and the caller's own plan (what a location-blind balancer costs)
//   solve         the full solve (stage 1, minimal-movement stage 2, own plan)
//   solve_all     the full solve building every rank's plan and counting peers (tests, CLI)
//   solve_once    `solve` through the free function `packswap::solve`, which allocates its
//                 working memory anew on every call (page faults included)
// Counter `faults` (where getrusage exists): the process's minor page faults per solve, 4 KiB pages
// of memory touched for the first time; a kept solver's stay near 0 once its batches stop
// growing, the free function's grow with the batch.
// Counter `kept_bytes` (kept solver, where glibc's mallinfo2 exists): bytes per pack the solver
// and its solution hold after their first solve, the memory a trainer's process keeps for them.
// Report medians: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <packswap/solve.hpp>

#include "workloads.hpp"

#include <map>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define PACKSWAP_BENCH_MALLINFO2 1
#endif

namespace {

const std::vector<packswap::pack_meta>& batch(std::int64_t packs) {
  static std::map<std::int64_t, std::vector<packswap::pack_meta>> cache;
  auto it = cache.find(packs);
  if (it == cache.end()) {
    const packswap::shape s{static_cast<std::int32_t>(packs / 16), 16, 1};
    it = cache.emplace(packs, packswap::bench::preset_batch("vlm-pretrain", s, 42)).first;
  }
  return it->second;
}

enum class calls { reused_solver, free_function };

// Minor page faults of this process so far; -1 where getrusage is missing.
double minor_faults() {
#if defined(__unix__) || defined(__APPLE__)
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
#else
  return -1.0;
#endif
}

// Bytes of heap memory in use by this process; -1 where glibc's mallinfo2 is missing.
double heap_in_use() {
#ifdef PACKSWAP_BENCH_MALLINFO2
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
#else
  return -1.0;
#endif
}

void run(benchmark::State& state, bool refine, bool all_plans, calls how) {
  const std::int64_t packs = state.range(0);
  const packswap::shape s{static_cast<std::int32_t>(packs / 16), 16, 1};
  const auto& b = batch(packs);
  packswap::solve_options opt;
  opt.refine = refine;
  opt.plan_rank = all_plans ? -1 : 0;
  opt.count_peers = all_plans;
  packswap::solver solver;
  packswap::solution sol;
  if (how == calls::reused_solver) {
    const double heap_before = heap_in_use(); // an empty solver and solution hold nothing yet
    solver.solve(b, s, opt, sol); // untimed: a trainer's solver has seen a batch of this size
    if (heap_before >= 0) {
      state.counters["kept_bytes"] = (heap_in_use() - heap_before) / static_cast<double>(packs);
    }
  }
  const double faults_before = minor_faults();
  for (auto _ : state) {
    if (how == calls::reused_solver) {
      solver.solve(b, s, opt, sol);
    } else {
      sol = packswap::solve(b, s, opt);
    }
    benchmark::DoNotOptimize(sol.cells.data());
  }
  if (faults_before >= 0) { // no counter where faults are not counted
    state.counters["faults"] =
        (minor_faults() - faults_before) / static_cast<double>(state.iterations());
  }
  state.SetItemsProcessed(state.iterations() * packs);
  state.counters["dp"] = static_cast<double>(s.dp);
}

void balance_plan(benchmark::State& state) {
  run(state, false, false, calls::reused_solver);
}
void solve(benchmark::State& state) {
  run(state, true, false, calls::reused_solver);
}
void solve_all(benchmark::State& state) {
  run(state, true, true, calls::reused_solver);
}
void solve_once(benchmark::State& state) {
  run(state, true, false, calls::free_function);
}

} // namespace

BENCHMARK(balance_plan)->RangeMultiplier(4)->Range(256, 262144)->Unit(benchmark::kMillisecond);
BENCHMARK(solve)->RangeMultiplier(4)->Range(256, 262144)->Unit(benchmark::kMillisecond);
BENCHMARK(solve_all)->RangeMultiplier(4)->Range(256, 262144)->Unit(benchmark::kMillisecond);
BENCHMARK(solve_once)->RangeMultiplier(4)->Range(256, 262144)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
