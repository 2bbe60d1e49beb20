// refine_options::work_scale (solve_options::work_scale): every work bound of stage 2 scaled by
// it, in parts per thousand. The work stays under the scaled bound, the answers keep A and B at
// any scale, the default is scale 1, and values outside [0.001, 64] are refused by name.
#include <packswap/refine/refine.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "stress.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace packswap;
using test::stress::dist;

TEST_CASE("the work scale resolves to parts per thousand and scales every bound exactly") {
  CHECK(detail::work_permille(1.0) == 1000);
  CHECK(detail::work_permille(0.001) == 1);
  CHECK(detail::work_permille(0.25) == 250);
  CHECK(detail::work_permille(64.0) == 64000);
  // floor(w * permille / 1000), with no overflow for the largest bounds.
  CHECK(detail::scale_work(1999, 500) == 999);
  CHECK(detail::scale_work(7, 1) == 0);
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 64;
  CHECK(detail::scale_work(big, 64000) == big / 1000 * 64000 + big % 1000 * 64);
  for (const std::int64_t n : {1, 64, 16384, 16385, 1 << 20}) {
    CHECK(detail::stage2_bound(n, 1000) == detail::stage2_bound(n));
    CHECK(detail::stage2_bound(n, 250) == detail::stage2_bound(n) / 4);
    CHECK(detail::fallback_allowance(n, 500) == detail::fallback_allowance(n) / 2);
    CHECK(detail::review_work(n, 2000) == 2 * detail::review_work(n));
    // The search's part and the fallback's still add up to the bound up to 16,384 packs.
    if (n <= detail::shared_bound_up_to) {
      CHECK(detail::stage2_search_bound(n, 250) + detail::fallback_allowance(n, 250) ==
            detail::stage2_bound(n, 250));
    }
  }
}

TEST_CASE("a work scale outside [0.001, 64] is refused, naming the value") {
  const shape s{4, 4, 1};
  const auto packs = test::stress::batch(s, dist::lognormal, 1);
  const auto stage1 = solve(packs, s, solve_options{}).cells; // any valid assignment
  for (const double bad : {0.0, 0.0004, 64.5, -1.0, std::nan("")}) {
    solve_options opt;
    opt.work_scale = bad;
    CHECK_THROWS_WITH_AS(solve(packs, s, opt), doctest::Contains("work_scale is"), error);
    refine_options ropt;
    ropt.work_scale = bad;
    CHECK_THROWS_WITH_AS(refine(packs, s, stage1, ropt),
                         doctest::Contains("must be in [0.001, 64]"), error);
  }
}

TEST_CASE("under any work scale the work stays under its scaled bound and A and B hold") {
  // Cells of the stress set at 16,384 packs whose searches give up or succeed late at eps = 0
  // (ga 16 to 1,024), and ga 1 and 4, where the indexes charged past a check weigh most against
  // a bound scaled down (stage2_work_bound), one light distribution among them, at scales from a
  // thousandth to four: the work never exceeds stage2_work_bound at that scale, A stays exact, B
  // within (1 + eps) of stage 1's, and no more bytes move than stage 1's. At a thousandth most
  // searches end at the bound; scale 1 is the default, bit for bit.
  const shape shapes[] = {{16, 1024, 1}, {1024, 16, 1}, {64, 256, 1}, {16384, 1, 1}, {4096, 4, 1}};
  const dist dists[] = {dist::bimodal, dist::pareto, dist::lognormal, dist::near_equal};
  int tiny_bounded = 0;
  int tiny_solves = 0;
  for (const auto d : dists) {
    for (const auto& s : shapes) {
      const auto packs = test::stress::batch(s, d, 1);
      for (const double eps : {0.0, 0.01}) {
        solve_options base;
        base.eps = eps;
        const auto by_default = solve(packs, s, base);
        // Stage 1 alone reads no work scale: its moved bytes, once per batch and eps.
        solve_options stage1 = base;
        stage1.refine = false;
        const std::int64_t stage1_bytes = solve(packs, s, stage1).movement.moved_bytes;
        for (const double scale : {0.001, 0.05, 0.25, 1.0, 4.0}) {
          solve_options opt = base;
          opt.work_scale = scale;
          const auto sol = solve(packs, s, opt);
          INFO("dist=" << test::stress::name(d) << " dp=" << s.dp << " ga=" << s.ga
                       << " eps=" << eps << " scale=" << scale << " work=" << sol.stage2_work);
          const std::int64_t permille = detail::work_permille(scale);
          CHECK(sol.stage2_work <= detail::stage2_work_bound(s.packs(), s.ga, permille));
          CHECK(sol.balance.a == sol.balance.lb_a);
          CHECK(sol.balance.b <= detail::relax(sol.stage1_b, detail::eps_ppm(eps)));
          CHECK(sol.movement.moved_bytes <= stage1_bytes);
          if (scale == 1.0) {
            CHECK(sol.cells == by_default.cells);
            CHECK(sol.stage2_work == by_default.stage2_work);
          }
          if (scale == 0.001) {
            ++tiny_solves;
            tiny_bounded += sol.stage2_bounded ? 1 : 0;
          }
        }
      }
    }
  }
  // A thousandth of the bound (about 1,000 units at 16,384 packs) ends every search but those
  // that need no repair at all.
  CHECK(2 * tiny_bounded > tiny_solves);
}
