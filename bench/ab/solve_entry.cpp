// One revision's solve behind a C entry point, built as a shared library by scripts/ab-solve so
// that two revisions run interleaved in one process (see solve_ab.cpp). With
// PACKSWAP_AB_SOLVER the calls share one packswap::solver and one solution, as a trainer's do;
// without it each call goes through the free function packswap::solve (revisions before the
// solver existed).
#include <packswap/solve.hpp>

#include <cstdint>

extern "C" __attribute__((visibility("default"))) std::int64_t
packswap_ab_solve(const void* packs, std::int64_t count, std::int32_t dp, std::int32_t ga,
                  int refine, double eps) {
  const packswap::span<const packswap::pack_meta> batch(
      static_cast<const packswap::pack_meta*>(packs), static_cast<std::size_t>(count));
  packswap::solve_options opt;
  opt.plan_rank = 0; // a rank's own plan, as in bench/balance/solve.cpp
  opt.count_peers = false;
  opt.refine = refine != 0;
  opt.eps = eps;
#ifdef PACKSWAP_AB_SOLVER
  static packswap::solver solver;
  static packswap::solution sol;
  solver.solve(batch, {dp, ga, 1}, opt, sol);
#else
  const auto sol = packswap::solve(batch, {dp, ga, 1}, opt);
#endif
  return sol.movement.moved_bytes;
}
