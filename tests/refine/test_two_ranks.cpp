// Stage 2 with two ranks: the knapsack over pairs of packs (refine/detail/two_ranks.hpp), on its
// own and as refine_sorted keeps it beside the search.
#include <packswap/detail/prng.hpp>
#include <packswap/refine/detail/two_ranks.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fewest_moved.hpp"
#include "moved_bound.hpp"
#include "stress.hpp"

using namespace packswap;

namespace {

std::vector<std::int32_t> order_of(const std::vector<pack_meta>& packs) {
  std::vector<std::int64_t> costs(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  return detail::order_desc(costs);
}

// Rank 0's load and the bytes moved by `a`; checks that every rank holds ga packs, its i-th
// largest at or below cap i (A = LB_A), in micro-steps 0 .. ga - 1 by cost.
struct outcome {
  std::int64_t load0 = 0, load1 = 0, moved = 0;
};
outcome check_valid(const std::vector<pack_meta>& packs, const shape& s, const assignment& a) {
  const auto caps = test::chunk_caps(packs, s);
  std::vector<std::vector<std::int64_t>> held(
      2, std::vector<std::int64_t>(static_cast<std::size_t>(s.ga), -1));
  outcome o;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto r = static_cast<std::size_t>(a[p].rank);
    const auto m = static_cast<std::size_t>(a[p].micro_step);
    REQUIRE(r < 2);
    REQUIRE(m < static_cast<std::size_t>(s.ga));
    REQUIRE(held[r][m] == -1);
    held[r][m] = packs[p].cost;
    (r == 0 ? o.load0 : o.load1) += packs[p].cost;
    o.moved += packs[p].source_rank == a[p].rank ? 0 : packs[p].bytes;
  }
  for (const auto& h : held) {
    for (std::size_t i = 0; i < h.size(); ++i) {
      CHECK(h[i] <= caps[i]);
      if (i > 0) {
        CHECK(h[i] <= h[i - 1]);
      }
    }
  }
  return o;
}

// Two ranks of ga packs each, distinct costs (or costs from `values` values: ties), bytes
// 1 .. 1,000.
std::vector<pack_meta> two_rank_batch(prng& rng, std::int32_t ga, std::uint64_t values) {
  std::vector<pack_meta> packs;
  for (std::int32_t r = 0; r < 2; ++r) {
    for (std::int32_t i = 0; i < ga; ++i) {
      pack_meta m;
      m.cost = values == 0 ? static_cast<std::int64_t>(rng.below(1000000)) * 4096 +
                                 static_cast<std::int64_t>(packs.size())
                           : static_cast<std::int64_t>(rng.below(values)) * 1000;
      m.bytes = 1 + static_cast<std::int64_t>(rng.below(1000));
      m.source_rank = r;
      packs.push_back(m);
    }
  }
  return packs;
}

} // namespace

TEST_CASE("two ranks: every answer keeps A and the limit, and a wide window gives the fewest "
          "bytes of any") {
  // Small batches against every assignment: distinct costs, and few values (ties). Limits from
  // the tightest (half the total) to the whole total, where any split is within it: there
  // step 1 alone answers, with the fewest bytes of any assignment that keeps A.
  prng rng(41);
  detail::two_ranks two;
  int answered = 0;
  int fewest_met = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const shape s{2, 1 + static_cast<std::int32_t>(rng.below(7)), 1};
    const std::uint64_t values = trial % 2 == 0 ? 2 + rng.below(5) : 0;
    const auto packs = two_rank_batch(rng, s.ga, values);
    const auto order = order_of(packs);
    std::int64_t total = 0;
    for (const auto& m : packs) {
      total += m.cost;
    }
    const std::int64_t half = (total + 1) / 2;
    const std::int64_t limit = half + static_cast<std::int64_t>(rng.below(4)) * (total - half) / 3;
    INFO("trial " << trial << " ga " << s.ga << " values " << values << " limit " << limit);
    const std::int64_t fewest = test::fewest_moved(packs, s, limit);
    const bool found = two.run(packs, order, limit, topology{}, std::int64_t{1} << 62);
    CHECK(two.work() <= detail::two_ranks::work_bound(static_cast<std::int64_t>(packs.size())));
    if (!found) {
      continue;
    }
    ++answered;
    assignment a(packs.size());
    two.write(order, a);
    const auto o = check_valid(packs, s, a);
    CHECK(o.load0 <= limit);
    CHECK(o.load1 <= limit);
    CHECK(o.moved == two.weighted_moved());
    REQUIRE(fewest >= 0);
    CHECK(o.moved >= fewest);
    fewest_met += o.moved == fewest ? 1 : 0;
    if (limit == total) {
      CHECK(two.fewest_of_any());
      CHECK(o.moved == fewest);
    }
  }
  MESSAGE(answered << " answers, " << fewest_met << " with the fewest bytes within the limit");
  CHECK(answered > 300);
}

TEST_CASE("two ranks: with one value of cost, each rank keeps its own packs first") {
  // Every pair is a tie: the split is free, and each rank keeps its own packs first, moving
  // only the cheapest of the rank that has more than half.
  std::vector<pack_meta> packs;
  const std::int64_t bytes[] = {5, 1, 7, 3, 9, 2};
  const std::int32_t home[] = {0, 0, 0, 0, 1, 1};
  for (std::size_t p = 0; p < 6; ++p) {
    pack_meta m;
    m.cost = 100;
    m.bytes = bytes[p];
    m.source_rank = home[p];
    packs.push_back(m);
  }
  const shape s{2, 3, 1};
  const auto order = order_of(packs);
  detail::two_ranks two;
  REQUIRE(two.run(packs, order, 300, topology{}, std::int64_t{1} << 62));
  assignment a(packs.size());
  two.write(order, a);
  check_valid(packs, s, a);
  // Rank 0's four packs: it keeps the three dearest to move (7, 5, 3); the one of 1 byte moves.
  CHECK(two.weighted_moved() == 1);
  CHECK(a[1].rank == 1);
}

TEST_CASE("two ranks: refine keeps the knapsack's answer where it moves fewer bytes than the "
          "search") {
  // Stress batches at dp 2 where the search's answer moved far more than the knapsack's
  // (Pareto costs with giant packs at ga 64 and 1,024, bimodal at ga 64). Every answer keeps A
  // and B within the limit and moves no more than stage 1.
  struct batch {
    test::stress::dist d;
    std::int32_t ga;
    int seed;
    double eps;
    double most; // the most moved bytes, as a multiple of the lower bound
  };
  const batch batches[] = {{test::stress::dist::pareto, 64, 1, 0.0, 4.0},
                           {test::stress::dist::pareto, 1024, 4, 0.0, 3.0},
                           {test::stress::dist::pareto, 1024, 4, 0.001, 2.0},
                           {test::stress::dist::bimodal, 64, 4, 0.0, 1.1}};
  for (const auto& b : batches) {
    const shape s{2, b.ga, 1};
    const auto packs = test::stress::batch(s, b.d, static_cast<std::uint64_t>(b.seed));
    solve_options opt;
    opt.eps = b.eps;
    const auto sol = solve(packs, s, opt);
    solve_options stage1 = opt;
    stage1.refine = false;
    const auto bound = test::moved_lower_bound(packs, s);
    INFO(test::stress::name(b.d) << " ga " << b.ga << " seed " << b.seed << " eps " << b.eps
                                 << " moved " << sol.movement.moved_bytes << " bound " << bound);
    CHECK(sol.balance.a == sol.balance.lb_a);
    CHECK(sol.balance.b <= detail::relax(sol.stage1_b, detail::eps_ppm(b.eps)));
    CHECK(sol.movement.moved_bytes <= solve(packs, s, stage1).movement.moved_bytes);
    CHECK(static_cast<double>(sol.movement.moved_bytes) <= b.most * static_cast<double>(bound));
    CHECK(sol.stage2_work <= detail::stage2_work_bound(s.packs(), s.ga));
  }
}

TEST_CASE("two ranks on two nodes: the same answers, every byte weighed four times") {
  // With one rank per node every moved byte crosses nodes, so the weights scale every price
  // alike and the choices, tie-breaks included, are those of one node.
  for (const auto d : {test::stress::dist::pareto, test::stress::dist::bytes_tied,
                       test::stress::dist::ties, test::stress::dist::lognormal}) {
    const shape s{2, 256, 1};
    const auto packs = test::stress::batch(s, d, 3);
    for (const double eps : {0.0, 0.01}) {
      solve_options one;
      one.eps = eps;
      solve_options two = one;
      two.topology = topology::uniform(1, 4);
      const auto a = solve(packs, s, one);
      const auto b = solve(packs, s, two);
      INFO(test::stress::name(d) << " eps " << eps);
      CHECK(a.cells == b.cells);
      CHECK(b.movement.weighted_bytes == 4 * a.movement.moved_bytes);
      CHECK(b.movement.inter_node_bytes == b.movement.moved_bytes);
    }
  }
}

TEST_CASE("two ranks: a flip across a narrow window, then the walk back, finds the fewest bytes") {
  // At eps = 0 on these stress batches the window the limit leaves rank 0's load is narrower than
  // the cost gap after the dearest run: walking from the fewest-bytes choices towards it only
  // reaches it by dear flips, while the dearest run's flip, past it, and cheap ones back land in
  // it for the fewest bytes of any answer within the limit (moved_two_ranks_within, exact).
  struct batch {
    test::stress::dist d;
    int seed;
  };
  for (const auto& b :
       {batch{test::stress::dist::lognormal, 1}, batch{test::stress::dist::bimodal, 2},
        batch{test::stress::dist::bytes_tied, 1}}) {
    const shape s{2, 1024, 1};
    const auto packs = test::stress::batch(s, b.d, static_cast<std::uint64_t>(b.seed));
    solve_options stage1;
    stage1.refine = false;
    const std::int64_t limit = solve(packs, s, stage1).stage1_b;
    const auto order = order_of(packs);
    detail::two_ranks two;
    INFO(std::string(test::stress::name(b.d)) << " seed " << b.seed);
    REQUIRE(two.run(packs, order, limit, topology{}, std::int64_t{1} << 62));
    CHECK_FALSE(two.fewest_of_any());
    CHECK(two.work() <= detail::two_ranks::work_bound(static_cast<std::int64_t>(packs.size())));
    const auto fewest = test::moved_two_ranks_within(packs, limit, std::int64_t{1} << 30);
    REQUIRE(fewest.has_value());
    CHECK(two.weighted_moved() == *fewest);
    assignment a(packs.size());
    two.write(order, a);
    const auto o = check_valid(packs, s, a);
    CHECK(o.load0 <= limit);
    CHECK(o.load1 <= limit);
    CHECK(o.moved == *fewest);
  }
}
