#include <packswap/plan/verify.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <vector>

using namespace packswap;
using packswap::test::mix;

TEST_CASE("solve returns a verified plan whose metrics match its cells") {
  prng rng(31);
  for (int trial = 0; trial < 400; ++trial) {
    const auto s = test::random_shape(rng, 32, 8, 2);
    const auto packs =
        test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 3));
    solve_options opt;
    opt.mode = rng.chance(1, 2) ? sync_mode::per_step : sync_mode::per_micro_step;
    opt.eps = rng.chance(1, 2) ? 0.0 : 0.01;
    const auto sol = solve(packs, s, opt);
    CHECK_NOTHROW(verify(packs, s, sol.cells, sol.plan));
    const auto costs = test::costs_of(packs);
    const auto m = measure_balance(costs, sol.cells, s);
    CHECK(m.a == sol.balance.a);
    CHECK(m.b == sol.balance.b);
    CHECK(m.lb_a == sol.balance.lb_a);
    CHECK(m.lb_b == sol.balance.lb_b);
    const auto mv = measure_movement(packs, sol.cells, s);
    CHECK(mv.moved == sol.movement.moved);
    CHECK(mv.moved_bytes == sol.movement.moved_bytes);
    CHECK(mv.max_peers == sol.movement.max_peers);
    if (opt.mode == sync_mode::per_micro_step && s.mbs == 1) {
      CHECK(sol.balance.a == sol.balance.lb_a);
    }
    CHECK(sol.balance.b <= detail::relax(sol.stage1_b, detail::eps_ppm(opt.eps)));
  }
}

TEST_CASE("a rank's own plan from solve matches the whole plan") {
  const shape s{16, 8, 1};
  const auto packs = test::random_batch(s, 3, mix::vlm);
  const auto all = solve(packs, s);
  solve_options mine;
  mine.plan_rank = 5;
  mine.count_peers = false;
  const auto own = solve(packs, s, mine);
  CHECK(own.cells == all.cells);
  CHECK_NOTHROW(verify(packs, s, own.cells, own.plan));
  CHECK(own.movement.max_peers == 0);
  CHECK(own.movement.moved_bytes == all.movement.moved_bytes);
  CHECK_THROWS_WITH_AS(solve(packs, s, solve_options{sync_mode::per_micro_step, 0.0, {}, true, 16}),
                       doctest::Contains("plan_rank is 16"), error);
}

TEST_CASE("solve without refinement is stage 1 alone, and refinement only ever moves less") {
  const shape s{32, 16, 1};
  const auto packs = test::random_batch(s, 8, mix::vlm);
  solve_options off;
  off.refine = false;
  const auto raw = solve(packs, s, off);
  const auto refined = solve(packs, s);
  CHECK(raw.balance.a == refined.balance.a);
  CHECK(refined.balance.b <= raw.balance.b);
  CHECK(refined.movement.moved_bytes < raw.movement.moved_bytes);
}

TEST_CASE("bad input to solve names the offending value") {
  const shape s{2, 2, 1};
  std::vector<pack_meta> packs{{1, 1, 0}, {1, 1, 0}, {1, 1, 1}};
  CHECK_THROWS_WITH_AS(solve(packs, s), doctest::Contains("got 3 packs"), error);
  packs.push_back({-4, 1, 1});
  CHECK_THROWS_WITH_AS(solve(packs, s), doctest::Contains("pack 3 has cost -4"), error);
  packs[3].cost = 4;
  CHECK_THROWS_WITH_AS(solve(packs, {0, 2, 1}), doctest::Contains("dp is 0"), error);
  CHECK_THROWS_WITH_AS(solve(packs, {2, 0, 1}), doctest::Contains("ga is 0"), error);
  packs[3].source_rank = 0;
  CHECK_THROWS_WITH_AS(solve(packs, s), doctest::Contains("source rank 0 owns 3 packs"), error);
}

TEST_CASE("custom policies plug into solve") {
  struct keep_stage1 {
    assignment operator()(span<const pack_meta>, const shape&, const assignment& a,
                          const refine_options&) const {
      return a;
    }
  };
  static_assert(is_refiner_v<keep_stage1>);
  const shape s{8, 4, 1};
  const auto packs = test::random_batch(s, 2, mix::vlm);
  const auto sol = solve(packs, s, {}, balancer{}, keep_stage1{});
  solve_options off;
  off.refine = false;
  CHECK(sol.cells == solve(packs, s, off).cells);
}
