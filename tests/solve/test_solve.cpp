#include <packswap/plan/verify.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"
#include "stress.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
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

TEST_CASE("solve takes costs and bytes near the int64 limit") {
  // Every sum stays in range (the sanitizer builds check): stage 2 stands down where its own
  // sums could not, or runs on the costs divided by their common factor (the scale here) where
  // that brings them within its range.
  prng rng(37);
  constexpr std::int64_t top = std::numeric_limits<std::int64_t>::max();
  for (int trial = 0; trial < 600; ++trial) {
    const auto s = test::random_shape(rng, 12, 6, rng.chance(1, 4) ? 3 : 1);
    auto packs = test::random_batch(s, rng(), mix::vlm);
    std::int64_t cost_sum = 0;
    std::int64_t byte_sum = 0;
    for (auto& p : packs) {
      p.cost = rng.uniform(0, std::int64_t{1} << rng.uniform(0, 40));
      p.bytes = rng.uniform(0, std::int64_t{1} << rng.uniform(0, 40));
      cost_sum += p.cost;
      byte_sum += p.bytes;
    }
    const std::int64_t cost_top = rng.chance(1, 2) ? top : top / (2 * (s.ga + 2));
    const std::int64_t byte_scale = rng.chance(1, 2) ? top / (byte_sum + 1) : 1;
    for (auto& p : packs) {
      p.cost *= cost_top / (cost_sum + 1);
      p.bytes *= byte_scale;
    }
    solve_options opt;
    opt.mode = rng.chance(1, 3) ? sync_mode::per_step : sync_mode::per_micro_step;
    opt.eps = rng.chance(1, 2) ? 0.0 : 0.5;
    if (rng.chance(1, 2)) {
      opt.topology = topology::uniform(2, std::int64_t{1} << 20);
    }
    const auto sol = solve(packs, s, opt);
    CAPTURE(trial);
    CHECK_NOTHROW(verify(packs, s, sol.cells, sol.plan));
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
  static_assert(is_refiner_v<refiner>);
  static_assert(!is_refiner_v<balancer>);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
  static_assert(refiner_like<keep_stage1>);
  static_assert(!refiner_like<balancer>);
  static_assert(balancer_like<balancer>);
#endif
  const shape s{8, 4, 1};
  const auto packs = test::random_batch(s, 2, mix::vlm);
  const auto sol = solve(packs, s, {}, balancer{}, keep_stage1{});
  solve_options off;
  off.refine = false;
  CHECK(sol.cells == solve(packs, s, off).cells);
}

namespace {

// Everything a solution holds, compared field by field.
void check_same(const solution& got, const solution& want) {
  CHECK(got.cells == want.cells);
  CHECK(got.plan.digest() == want.plan.digest());
  CHECK(got.balance.a == want.balance.a);
  CHECK(got.balance.b == want.balance.b);
  CHECK(got.balance.lb_a == want.balance.lb_a);
  CHECK(got.balance.lb_b == want.balance.lb_b);
  CHECK(got.movement.moved == want.movement.moved);
  CHECK(got.movement.moved_bytes == want.movement.moved_bytes);
  CHECK(got.movement.weighted_bytes == want.movement.weighted_bytes);
  CHECK(got.movement.max_peers == want.movement.max_peers);
  CHECK(got.movement.mean_peers == want.movement.mean_peers);
  // The lists cell by cell too (the digest reads their contents, not where each cell's begin).
  REQUIRE(got.plan.first_rank() == want.plan.first_rank());
  REQUIRE(got.plan.last_rank() == want.plan.last_rank());
  const auto same = [](auto x, auto y) {
    return std::equal(x.begin(), x.end(), y.begin(), y.end());
  };
  for (auto r = want.plan.first_rank(); r < want.plan.last_rank(); ++r) {
    for (std::int32_t m = 0; m < want.plan.batch_shape().ga; ++m) {
      CHECK(same(got.plan.compute(r, m), want.plan.compute(r, m)));
      CHECK(same(got.plan.keep(r, m), want.plan.keep(r, m)));
      CHECK(same(got.plan.sends(r, m), want.plan.sends(r, m)));
      CHECK(same(got.plan.receives(r, m), want.plan.receives(r, m)));
    }
  }
  CHECK(got.stage1_a == want.stage1_a);
  CHECK(got.stage1_b == want.stage1_b);
  CHECK(got.stage2_work == want.stage2_work);
  CHECK(got.stage2_bounded == want.stage2_bounded);
}

} // namespace

TEST_CASE("a reused solver gives solve's answers while batches grow, shrink and change shape") {
  prng rng(77);
  solver reused;
  solution out; // reused too
  for (int trial = 0; trial < 300; ++trial) {
    // Mostly small, now and then large, so the kept memory is both too small and too big.
    const auto s = rng.chance(1, 8) ? shape{static_cast<std::int32_t>(64 + rng.below(64)), 16, 1}
                                    : test::random_shape(rng, 32, 8, 2);
    const auto packs =
        test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 3));
    solve_options opt;
    opt.mode = rng.chance(1, 3) ? sync_mode::per_step : sync_mode::per_micro_step;
    opt.eps = rng.chance(1, 2) ? 0.0 : 0.01;
    opt.refine = !rng.chance(1, 8);
    opt.plan_rank = rng.chance(1, 2) ? -1 : static_cast<std::int32_t>(rng.below(s.dp));
    opt.count_peers = opt.plan_rank < 0;
    if (rng.chance(1, 4)) {
      opt.topology = topology::uniform(2);
    }
    const auto want = solve(packs, s, opt);
    if (rng.chance(1, 2)) {
      reused.solve(packs, s, opt, out);
      check_same(out, want);
    } else {
      check_same(reused.solve(packs, s, opt), want);
    }
    if (trial % 50 == 49) {
      reused.release();
    }
  }
}

// With more than 64 levels the bring-home's swaps leave a rank's places alone (the run's last
// phase, see stage2::state::places_live): a solver reused across searches that succeed, give up,
// or are weighed against the fallback must still give solve's answers on every later batch.
TEST_CASE(
    "a reused solver gives solve's answers with many levels, where searches succeed or fail") {
  namespace stress = test::stress;
  solver reused;
  solution out;
  for (const shape s : {shape{8, 128, 1}, shape{4, 256, 1}, shape{16, 96, 1}, shape{64, 16, 1}}) {
    for (const auto d : stress::all_dists) {
      for (const double eps : {0.0, 0.01}) {
        const auto packs = stress::batch(s, d, 3);
        solve_options opt;
        opt.eps = eps;
        INFO(stress::name(d) << " " << s.dp << " x " << s.ga << " eps " << eps);
        reused.solve(packs, s, opt, out);
        check_same(out, solve(packs, s, opt));
      }
    }
  }
}

TEST_CASE("a reused solution keeps its plan's storage once batches stop growing") {
  const shape s{16, 8, 1};
  const auto first = test::random_batch(s, 11, mix::vlm);
  const auto second = test::random_batch(s, 12, mix::uniform);
  solver reused;
  solution out;
  reused.solve(first, s, {}, out);
  reused.solve(second, s, {}, out); // every list now has room for either batch's
  const auto* compute = out.plan.compute(0, 0).data();
  const auto* keep = out.plan.keep(0, 0).data();
  for (const auto* packs : {&first, &second}) {
    reused.solve(*packs, s, {}, out);
    check_same(out, solve(*packs, s));
    CHECK(out.plan.compute(0, 0).data() == compute); // written in place, not reallocated
    CHECK(out.plan.keep(0, 0).data() == keep);
  }
}

TEST_CASE("a solver that rejected a batch still solves the next one") {
  const shape s{8, 4, 1};
  const auto packs = test::random_batch(s, 5, mix::vlm);
  solver reused;
  solution out;
  reused.solve(packs, s, {}, out);
  auto bad = packs;
  bad[3].cost = -1;
  CHECK_THROWS_WITH_AS(reused.solve(bad, s, {}, out), doctest::Contains("pack 3 has cost -1"),
                       error);
  check_same(out, solve(packs, s)); // untouched by the rejected call
  reused.solve(packs, s, {}, out);
  check_same(out, solve(packs, s));
}
