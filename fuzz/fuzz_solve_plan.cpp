// Bytes -> a global batch (shape, mode, eps, costs, bytes, source ranks). solve() must return a
// plan that verify() accepts (every pack in exactly one cell, cells full, every send matched by
// its receive), A == LB_A where promised, B and A within eps of stage 1, never more bytes moved
// than stage 1, and the same answer twice; one rank's own plan must verify too.
#include <packswap/plan/verify.hpp>
#include <packswap/solve.hpp>

#include "fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  std::uint64_t next(std::uint64_t bound) { // in [0, bound), 0 once the input runs out
    std::uint64_t v = 0;
    for (int i = 0; i < 4 && pos < size; ++i) {
      v = (v << 8) | data[pos++];
    }
    return bound == 0 ? 0 : v % bound;
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader r{data, size};
  const packswap::shape s{static_cast<std::int32_t>(1 + r.next(32)),
                          static_cast<std::int32_t>(1 + r.next(8)),
                          static_cast<std::int32_t>(1 + r.next(3))};
  packswap::solve_options opt;
  opt.mode = r.next(2) == 0 ? packswap::sync_mode::per_micro_step : packswap::sync_mode::per_step;
  static constexpr double eps_choices[] = {0.0, 0.0, 0.001, 0.01, 0.05};
  opt.eps = eps_choices[r.next(5)];
  if (r.next(4) == 0) {
    opt.topology = packswap::topology::uniform(static_cast<std::int32_t>(1 + r.next(8)), 4);
  }
  const auto scale = static_cast<std::int64_t>(1) << r.next(40); // costs from tiny to huge
  const std::size_t n = static_cast<std::size_t>(s.packs());
  std::vector<packswap::pack_meta> packs(n);
  for (std::size_t p = 0; p < n; ++p) {
    packs[p].cost = static_cast<std::int64_t>(r.next(1000)) * scale / 1000;
    packs[p].bytes = static_cast<std::int64_t>(r.next(1u << 24));
    packs[p].source_rank =
        static_cast<std::int32_t>(p / static_cast<std::size_t>(s.packs_per_rank()));
  }
  // Shuffle the sources (each rank still owns ga * mbs packs).
  for (std::size_t i = n; i > 1; --i) {
    std::swap(packs[i - 1].source_rank, packs[static_cast<std::size_t>(r.next(i))].source_rank);
  }
  const auto sol = packswap::solve(packs, s, opt);
  packswap::verify(packs, s, sol.cells, sol.plan);
  if (opt.mode == packswap::sync_mode::per_micro_step && s.mbs == 1) {
    PACKSWAP_FUZZ_CHECK(sol.balance.a == sol.balance.lb_a);
  }
  const auto ppm = packswap::detail::eps_ppm(opt.eps);
  PACKSWAP_FUZZ_CHECK(sol.balance.b <= packswap::detail::relax(sol.stage1_b, ppm));
  if (opt.mode == packswap::sync_mode::per_step) {
    PACKSWAP_FUZZ_CHECK(sol.balance.a <= packswap::detail::relax(sol.stage1_a, ppm));
  } else {
    PACKSWAP_FUZZ_CHECK(sol.balance.a <= sol.stage1_a);
  }
  auto raw = opt;
  raw.refine = false;
  const auto stage1 = packswap::solve(packs, s, raw);
  PACKSWAP_FUZZ_CHECK(sol.movement.weighted_bytes <= stage1.movement.weighted_bytes);
  PACKSWAP_FUZZ_CHECK(packswap::solve(packs, s, opt).cells == sol.cells);
  auto mine = opt;
  mine.plan_rank = static_cast<std::int32_t>(r.next(static_cast<std::uint64_t>(s.dp)));
  const auto own = packswap::solve(packs, s, mine);
  PACKSWAP_FUZZ_CHECK(own.cells == sol.cells);
  packswap::verify(packs, s, own.cells, own.plan);
  return 0;
}
