// Golden digests: fixed seeded batches must give bit-identical assignments on every compiler and
// standard library (this program is built by both the g++ and the clang++ presets). When the
// solver changes on purpose, run with PACKSWAP_PRINT_GOLDEN=1 and paste the new table.
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"
#include "stress.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace packswap;
using packswap::test::mix;

namespace {

struct golden {
  shape s;
  mix m;
  sync_mode mode;
  double eps;
  std::uint64_t digest;
};

const golden table[] = {
#include "golden_table.inc"
};

// Stress batches (tests/support/stress.hpp, seed 7), the first four of which (and heavy_rank at
// 32 x 32) stop stage 2 at its work bound (`bounded`): the answer past the bound must be as
// deterministic as any other. Multiples at 1,024 x 8 is one whose re-deal unlocks a crowd of
// ranks just above the limit (stage2::redeal_phase). The six at dp 2 take the two-rank path
// (detail::two_ranks): its fewest-bytes choices alone (bimodal at ga 1,024, ties), its walk's
// answer kept over the search's (bytes_tied), the search's kept over its walk's (pareto, whose
// bring-home the work bound ends), and the walk back from a flip across the window kept
// (lognormal at ga 2,048, with the search ended by its work bound, and bimodal at ga 96). Graded at
// 4,096 x 4 is a search its review abandons for stage 1 renamed (refine_sorted), not at the bound.
// The last three end in a settle that reads by level with 32 or 64 levels, from 8,192 packs
// (stage2::bring_home_phase): bimodal after the work bound, pareto after a successful search, as
// the fallback its answer is weighed against (refine_sorted).
struct golden_stress {
  shape s;
  test::stress::dist d;
  double eps;
  bool bounded;
  std::uint64_t digest;
};

const golden_stress stress_table[] = {
#include "golden_stress_table.inc"
};

// Stress batches (seed 7) on nodes of 8 ranks, a byte across nodes weighing 4: the bring-home
// then tries the ranks of a pack's home node too, where none brings it home, reading the levels
// whose costs let the loads fit (stage2::bring_home_phase) from 32 levels (uniform and
// bytes_tied at ga 64, eps 0 and 0.01), by level (pareto at ga 256, a settle after the work
// bound), or its places (ga 16; bimodal's a settle after the work bound).
const golden_stress nodes_table[] = {
#include "golden_nodes_table.inc"
};

} // namespace

TEST_CASE("fixed batches give the same assignment, bit for bit, on every build") {
  const bool print = std::getenv("PACKSWAP_PRINT_GOLDEN") != nullptr;
  for (const auto& g : table) {
    const auto packs = test::random_batch(g.s, 1234 + static_cast<std::uint64_t>(g.s.dp), g.m);
    solve_options opt;
    opt.mode = g.mode;
    opt.eps = g.eps;
    const auto d = digest(solve(packs, g.s, opt).cells);
    if (print) {
      std::printf("{{%d, %d, %d}, mix::%s, sync_mode::%s, %g, 0x%016llxULL},\n", g.s.dp, g.s.ga,
                  g.s.mbs, test::name(g.m),
                  g.mode == sync_mode::per_step ? "per_step" : "per_micro_step", g.eps,
                  static_cast<unsigned long long>(d));
      continue;
    }
    INFO("dp=" << g.s.dp << " ga=" << g.s.ga << " mbs=" << g.s.mbs
               << " mix=" << std::string(test::name(g.m)) << " eps=" << g.eps);
    CHECK(d == g.digest);
  }
}

namespace {

// Checks (or, with PACKSWAP_PRINT_GOLDEN set, prints) every batch of `batches`, each solved with
// `topo`.
template <std::size_t N>
void check_stress(const golden_stress (&batches)[N], const topology& topo) {
  const bool print = std::getenv("PACKSWAP_PRINT_GOLDEN") != nullptr;
  for (const auto& g : batches) {
    const auto packs = test::stress::batch(g.s, g.d, 7);
    solve_options opt;
    opt.eps = g.eps;
    opt.topology = topo;
    const auto sol = solve(packs, g.s, opt);
    const auto d = digest(sol.cells);
    if (print) {
      std::printf("{{%d, %d, %d}, test::stress::dist::%s, %g, %s, 0x%016llxULL},\n", g.s.dp, g.s.ga,
                  g.s.mbs, test::stress::name(g.d), g.eps, sol.stage2_bounded ? "true" : "false",
                  static_cast<unsigned long long>(d));
      continue;
    }
    INFO("dp=" << g.s.dp << " ga=" << g.s.ga << " dist=" << std::string(test::stress::name(g.d))
               << " eps=" << g.eps);
    CHECK(sol.stage2_bounded == g.bounded);
    CHECK(d == g.digest);
  }
}

} // namespace

TEST_CASE("stress batches, the work bound hit or not, give the same assignment on every build") {
  check_stress(stress_table, topology{});
}

TEST_CASE("stress batches on nodes of 8 ranks give the same assignment on every build") {
  check_stress(nodes_table, topology::uniform(8, 4));
}
