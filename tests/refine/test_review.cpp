// The search's review (refine_sorted): a search still running after review_work_per_pack units
// of work per pack (plus review_work_constant) is abandoned where stage 1 renamed moves at most
// 1/review_slack_den more bytes than the moved floor (stage2::moved_floor), and the renaming is
// the answer; elsewhere the search goes on.
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "moved_bound.hpp"
#include "stress.hpp"

#include <cstdint>
#include <vector>

using namespace packswap;
using test::stress::dist;

namespace {

// The work at which the search of n packs is reviewed.
std::int64_t review_point(std::size_t n) {
  return detail::review_work(static_cast<std::int64_t>(n));
}

// The stress batch (s, d, seed) solved at eps = 0 as the CLI does, after what every answer
// keeps: A exact, B within stage 1's, no more bytes moved than stage 1.
struct solved {
  std::vector<pack_meta> packs;
  solution sol;
  std::int64_t stage1_moved = 0;
};
solved solve_stress(const shape& s, dist d, std::uint64_t seed) {
  solved out;
  out.packs = test::stress::batch(s, d, seed);
  out.sol = solve(out.packs, s, solve_options{});
  solve_options stage1;
  stage1.refine = false;
  out.stage1_moved = solve(out.packs, s, stage1).movement.moved_bytes;
  CHECK(out.sol.balance.a == out.sol.balance.lb_a);
  CHECK(out.sol.balance.b <= out.sol.stage1_b);
  CHECK(out.sol.movement.moved_bytes <= out.stage1_moved);
  return out;
}

} // namespace

TEST_CASE("a long search is abandoned where stage 1 renamed moves almost the fewest bytes") {
  // Costs graded across the ranks (as shards sorted by length give): the loads follow the home
  // ranks, three quarters of the bytes must move, and stage 1 renamed moves within 2.5% of the
  // floor. The search ran 0.9 M units of work before the review.
  const shape s{4096, 4, 1};
  const auto r = solve_stress(s, dist::graded, 1);
  const std::int64_t at = review_point(r.packs.size());
  // Ended at the review, within the step under way there; not at the bound.
  CHECK(r.sol.stage2_work >= at);
  CHECK(r.sol.stage2_work <= at + 16 * s.ga + 16384);
  CHECK_FALSE(r.sol.stage2_bounded);
  // Within 1/32 of the fewest bytes any answer moves (the benchmark's bound is at least the
  // solver's floor).
  CHECK(r.sol.movement.moved_bytes * 32 <= test::moved_lower_bound(r.packs, s) * 33);
}

TEST_CASE("a long search goes on where it can move far fewer bytes than stage 1 renamed") {
  // `multiples` 16 x 1,024 (costs multiples of one value): the search succeeds after about
  // 0.4 M units moving a few hundredths of stage 1's bytes, where stage 1 renamed moves most.
  const shape s{16, 1024, 1};
  const auto r = solve_stress(s, dist::multiples, 3);
  CHECK(r.sol.stage2_work > review_point(r.packs.size()));
  CHECK(r.sol.movement.moved_bytes * 10 < r.stage1_moved);
}

TEST_CASE("the review weighs the renaming's bytes as the node map weighs them") {
  // The same graded batch with eight ranks a node: stage 1 renamed sends most of its moved bytes
  // across nodes, at four times the weight, and the floor counts each moved byte once, so the
  // review lets the search go on; with the crossing weighing 1 it ends it as on one node.
  const shape s{4096, 4, 1};
  const auto packs = test::stress::batch(s, dist::graded, 1);
  const std::int64_t at = review_point(packs.size());
  for (const std::int64_t weight : {1, 4}) {
    INFO("inter-node weight ", weight);
    solve_options opt;
    opt.topology = topology::uniform(8, weight);
    const auto sol = solve(packs, s, opt);
    CHECK(sol.balance.a == sol.balance.lb_a);
    CHECK(sol.balance.b <= sol.stage1_b);
    CHECK((sol.stage2_work <= at + 16 * s.ga + 16384) == (weight == 1));
  }
}
