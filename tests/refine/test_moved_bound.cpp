// The moved-bytes lower bounds of the stress benchmark (tests/support/moved_bound.hpp and
// moved_flow.hpp) and the solver's own (stage2::moved_floor, which its search's review reads)
// against exhaustive search over every assignment of small batches.
#include <packswap/detail/prng.hpp>
#include <packswap/refine/detail/stage2/floor.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fewest_moved.hpp"
#include "moved_bound.hpp"
#include "moved_flow.hpp"
#include "stress.hpp"

using namespace packswap;

namespace {

// A batch of dp x ga packs, ga from each rank, costs and bytes drawn from `values` values each
// (few values: many ties, and zeros).
std::vector<pack_meta> small_batch(prng& rng, const shape& s, std::uint64_t values) {
  std::vector<pack_meta> packs;
  for (std::int32_t r = 0; r < s.dp; ++r) {
    for (std::int32_t i = 0; i < s.ga; ++i) {
      pack_meta m;
      m.cost = static_cast<std::int64_t>(rng.below(values)) * 10;
      m.bytes = 1 + static_cast<std::int64_t>(rng.below(values));
      m.source_rank = r;
      packs.push_back(m);
    }
  }
  return packs;
}

// A small batch with distinct costs (drawn from 1,000 values, then each times 16 plus the pack's
// index, which keeps their order), or else with costs and bytes from 2 + below(few) values.
std::vector<pack_meta> small_batch_of(prng& rng, const shape& s, bool distinct, std::uint64_t few) {
  if (!distinct) {
    return small_batch(rng, s, 2 + rng.below(few));
  }
  auto packs = small_batch(rng, s, 1000);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    packs[p].cost = packs[p].cost * 16 + static_cast<std::int64_t>(p);
  }
  return packs;
}

// dp from 1 to 4, then ga from 1 to `most_ga`; none above 9 packs, too many for the exhaustive
// oracle.
std::optional<shape> small_shape(prng& rng, std::uint64_t most_ga) {
  const shape s{1 + static_cast<std::int32_t>(rng.below(4)),
                1 + static_cast<std::int32_t>(rng.below(most_ga)), 1};
  if (s.dp * s.ga > 9) {
    return std::nullopt;
  }
  return s;
}

// The solver's floor on the bytes any answer moves (stage2::moved_floor), with the caps of
// A = LB_A (the sorted chunks' maxima, which stage 1's micro-step maxima are).
std::int64_t solver_floor(const std::vector<pack_meta>& packs, const shape& s) {
  std::vector<std::int64_t> costs(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  detail::stage2::state st;
  st.prepare(packs, s, topology{}, test::chunk_caps(packs, s), 0, detail::order_desc(costs));
  return detail::stage2::moved_floor{}.run(st);
}

} // namespace

TEST_CASE("the moved-bytes lower bound never exceeds the fewest bytes any assignment moves") {
  prng rng(31);
  int strictly_below = 0;
  int floor_exact = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const auto drawn = small_shape(rng, 3);
    if (!drawn) {
      continue;
    }
    const shape s = *drawn;
    const auto packs = small_batch(rng, s, 2 + rng.below(6));
    const std::int64_t bound = test::moved_lower_bound(packs, s);
    const std::int64_t fewest = test::fewest_moved(packs, s);
    const std::int64_t floor = solver_floor(packs, s);
    INFO("dp ", s.dp, " ga ", s.ga, " trial ", trial);
    REQUIRE(fewest >= 0);
    CHECK(bound >= 0);
    CHECK(bound <= fewest);
    CHECK(floor >= 0);
    CHECK(floor <= bound);
    strictly_below += bound < fewest ? 1 : 0;
    floor_exact += floor == fewest && fewest > 0 ? 1 : 0;
  }
  // The solver's floor (stage2::moved_floor) is tight on many of them.
  CHECK(floor_exact > 50);
  // Ties leave slack the bound spends rank by rank: it is not exact in general.
  CHECK(strictly_below > 0);
}

TEST_CASE("the solver's moved floor never exceeds the benchmark's bound") {
  // Its one family (per level, one pack per home rank plus the level's spare slots) is one of
  // the bound's two, with the spare slots' packs bounded by the largest of them: never above the
  // bound, which the test above checks against every assignment of small batches, the floor
  // with it.
  // Two ranks, two packs each: rank 0 holds the two dear packs (bytes 5 and 7), rank 1 the two
  // cheap ones (3 and 4). Each rank must end with one dear and one cheap pack, so each keeps one
  // of its own at most: the larger, and 5 + 3 bytes move.
  const std::vector<pack_meta> two = {{10, 5, 0}, {9, 7, 0}, {2, 3, 1}, {1, 4, 1}};
  CHECK(solver_floor(two, shape{2, 2, 1}) == 8);
  CHECK(test::fewest_moved(two, shape{2, 2, 1}) == 8);
  // The stress set's and the probes' batches: never above the benchmark's bound.
  const auto check_dists = [](const auto& dists) {
    for (const auto d : dists) {
      for (const shape s : {shape{64, 16, 1}, shape{16, 64, 1}, shape{256, 4, 1}}) {
        const auto packs = test::stress::batch(s, d, 1);
        INFO(test::stress::name(d), " dp ", s.dp, " ga ", s.ga);
        CHECK(solver_floor(packs, s) <= test::moved_lower_bound(packs, s));
      }
    }
  };
  check_dists(test::stress::all_dists);
  check_dists(test::stress::probe_dists);
}

TEST_CASE("with two ranks the moved-bytes lower bound is exact, ties and all") {
  // The walk along the runs of equal cost (moved_two_ranks_exact) against every assignment:
  // small random batches with distinct costs and with few values (ties, zeros), and the stress
  // set's batches at dp 2.
  prng rng(32);
  for (int trial = 0; trial < 300; ++trial) {
    const shape s{2, 1 + static_cast<std::int32_t>(rng.below(5)), 1};
    const auto packs = small_batch_of(rng, s, trial % 2 == 0, 4);
    INFO("ga ", s.ga, " trial ", trial);
    CHECK(test::moved_lower_bound(packs, s) == test::fewest_moved(packs, s));
  }
  for (const auto d : test::stress::all_dists) {
    const shape s{2, 5, 1};
    const auto packs = test::stress::batch(s, d, 7);
    INFO(test::stress::name(d));
    CHECK(test::moved_lower_bound(packs, s) == test::fewest_moved(packs, s));
  }
}

TEST_CASE("with two ranks and a limit on the loads, the fewest moved bytes are exact") {
  // moved_two_ranks_within against every assignment: small random batches with distinct costs
  // and with few values (ties, zeros), each under limits from the tightest any assignment with
  // A = LB_A meets to none; and the stress set's batches at dp 2.
  prng rng(33);
  int bound_by_limit = 0;
  int none_fit = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const shape s{2, 1 + static_cast<std::int32_t>(rng.below(5)), 1};
    const auto packs = small_batch_of(rng, s, trial % 2 == 0, 4);
    std::int64_t total = 0;
    for (const auto& m : packs) {
      total += m.cost;
    }
    const std::int64_t unlimited = test::fewest_moved(packs, s);
    for (const std::int64_t limit : {(total + 1) / 2 - 1, (total + 1) / 2, (total + 1) / 2 + 3,
                                     total * 9 / 16, std::numeric_limits<std::int64_t>::max()}) {
      INFO("ga ", s.ga, " trial ", trial, " limit ", limit, " total ", total);
      const std::int64_t fewest = test::fewest_moved(packs, s, limit);
      const auto within = test::moved_two_ranks_within(packs, limit, std::int64_t{1} << 26);
      if (fewest < 0) {
        CHECK_FALSE(within.has_value());
        ++none_fit;
        continue;
      }
      REQUIRE(within.has_value());
      CHECK(*within == fewest);
      bound_by_limit += fewest > unlimited ? 1 : 0;
    }
  }
  // The limits bind on some batches and leave none on others.
  CHECK(bound_by_limit > 20);
  CHECK(none_fit > 20);
  for (const auto d : test::stress::all_dists) {
    const shape s{2, 5, 1};
    const auto packs = test::stress::batch(s, d, 7);
    std::int64_t total = 0;
    for (const auto& p : packs) {
      total += p.cost;
    }
    for (const std::int64_t limit : {(total + 1) / 2, total * 51 / 100, total * 53 / 100}) {
      INFO(std::string(test::stress::name(d)), " limit ", limit);
      const std::int64_t fewest = test::fewest_moved(packs, s, limit);
      const auto within = test::moved_two_ranks_within(packs, limit, std::int64_t{1} << 26);
      if (fewest < 0) {
        CHECK_FALSE(within.has_value());
        continue;
      }
      REQUIRE(within.has_value());
      CHECK(*within == fewest);
    }
  }
}

namespace {
std::vector<pack_meta> listed(const std::vector<std::int64_t>& costs,
                              const std::vector<std::int32_t>& homes) {
  std::vector<pack_meta> packs(costs.size());
  for (std::size_t p = 0; p < costs.size(); ++p) {
    packs[p].cost = costs[p];
    packs[p].bytes = 1;
    packs[p].source_rank = homes[p];
  }
  return packs;
}
} // namespace

TEST_CASE("the moved-bytes lower bound counts the packs a rank must take in") {
  SUBCASE("no slack: one pack of every level on every rank") {
    // Rank 1 holds both packs of level 0 and rank 0 both of level 1. Each rank's own packs
    // alone fit its prefixes (rank 0 could keep both of its packs), but every rank holds one
    // pack of each level, so one pack of each level moves: 2, not 1.
    const shape s{2, 2, 1};
    const auto packs = listed({10, 9, 5, 4}, {1, 1, 0, 0});
    CHECK(test::fewest_moved(packs, s) == 2);
    CHECK(test::moved_lower_bound(packs, s) == 2);
  }
  SUBCASE("the slack of a level is shared by all ranks") {
    // Two packs of level 0 (cost 10, both rank 2's) and four of level 1 (cost 5, two each on
    // ranks 0 and 1): one slot 0 is left for a level-1 pack, so only one rank may keep both of
    // its level-1 packs. Each rank on its own could: 2, not 1.
    const shape s{3, 2, 1};
    const auto packs = listed({10, 10, 5, 5, 5, 5}, {2, 2, 0, 0, 1, 1});
    CHECK(test::fewest_moved(packs, s) == 2);
    CHECK(test::moved_lower_bound(packs, s) == 2);
  }
  SUBCASE("a rank's prefixes bound it across levels") {
    // Rank 1's four packs all of level 2, where the slack of the levels below would let it keep
    // them all; but a rank holds three packs: 1, not 0.
    const shape s{2, 3, 1};
    const auto packs = listed({10, 10, 10, 10, 20, 10}, {1, 1, 1, 0, 0, 1});
    CHECK(test::fewest_moved(packs, s) == 1);
    CHECK(test::moved_lower_bound(packs, s) == 1);
  }
}

TEST_CASE("the limited two-rank table declines a batch larger than its allowance") {
  // Costs 1,000,003 and 1: the common step is 1, so the table spans a million entries a run.
  const shape s{2, 2, 1};
  const auto packs = listed({1000003, 1000002, 1, 2}, {0, 1, 0, 1});
  CHECK_FALSE(test::moved_two_ranks_within(packs, 1000005, 1000).has_value());
  const auto within = test::moved_two_ranks_within(packs, 1000005, std::int64_t{1} << 24);
  REQUIRE(within.has_value());
  CHECK(*within == test::fewest_moved(packs, s, 1000005));
}

TEST_CASE("the flow's fewest moved bytes are exact at any dp, ties and all") {
  // moved_fewest_exact against every assignment of small batches with few values (ties, zeros,
  // levels with slack: blocks of several levels) and distinct costs (blocks of one level).
  prng rng(34);
  int above_bound = 0;
  int checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const auto drawn = small_shape(rng, 4);
    if (!drawn) {
      continue;
    }
    const shape s = *drawn;
    const auto packs = small_batch_of(rng, s, trial % 3 == 0, 5);
    const std::int64_t fewest = test::fewest_moved(packs, s);
    const auto exact = test::moved_fewest_exact(packs, s, std::int64_t{1} << 30);
    INFO("dp ", s.dp, " ga ", s.ga, " trial ", trial);
    REQUIRE(exact.has_value());
    CHECK(*exact == fewest);
    above_bound += *exact > test::moved_lower_bound(packs, s) ? 1 : 0;
    ++checked;
  }
  CHECK(checked > 1000);
  // Where the matroid bound's two families leave slack, the flow reads more.
  CHECK(above_bound > 10);
}

TEST_CASE("on the stress set the flow's fewest bytes lie between the bound and the solver's") {
  // At dp 2 the flow equals the walk along the runs (moved_two_ranks_exact); above it, it is at
  // least the matroid bound and at most what the solver moves (its answer keeps A = LB_A).
  for (const auto d : test::stress::all_dists) {
    for (const shape s : {shape{2, 64, 1}, shape{3, 40, 1}, shape{8, 32, 1}, shape{64, 4, 1}}) {
      const auto packs = test::stress::batch(s, d, 5);
      const auto exact = test::moved_fewest_exact(packs, s, std::int64_t{1} << 30);
      INFO(std::string(test::stress::name(d)), " dp ", s.dp, " ga ", s.ga);
      REQUIRE(exact.has_value());
      const std::int64_t bound = test::moved_lower_bound(packs, s);
      if (s.dp == 2) {
        CHECK(*exact == bound);
      } else {
        CHECK(*exact >= bound);
      }
      const auto sol = solve(packs, s, {});
      REQUIRE(sol.balance.a == sol.balance.lb_a);
      CHECK(*exact <= sol.movement.moved_bytes);
    }
  }
}

TEST_CASE("the flow declines a batch past its allowance of work") {
  // Three costs for 64 packs: one block of levels with slack, whose flow weighs thousands of
  // links; with an allowance of 100 units it answers none.
  prng rng(35);
  const shape s{4, 16, 1};
  const auto packs = small_batch(rng, s, 3);
  CHECK_FALSE(test::moved_fewest_exact(packs, s, 100).has_value());
  const auto exact = test::moved_fewest_exact(packs, s, std::int64_t{1} << 30);
  REQUIRE(exact.has_value());
  CHECK(*exact >= test::moved_lower_bound(packs, s));
}
