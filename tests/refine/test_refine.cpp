#include <packswap/balance/balance.hpp>
#include <packswap/balance/metrics.hpp>
#include <packswap/refine/movement.hpp>
#include <packswap/refine/refine.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <limits>
#include <numeric>
#include <vector>

using namespace packswap;
using packswap::test::mix;

namespace {

struct outcome {
  balance_metrics stage1, stage2;
  movement_metrics moved1, moved2;
};

outcome run(const std::vector<pack_meta>& packs, const shape& s, sync_mode mode, double eps,
            const topology& topo = {}) {
  const auto costs = test::costs_of(packs);
  const auto a1 = balance(costs, s, mode);
  const auto a2 = refine(packs, s, a1, refine_options{mode, eps, topo});
  CHECK_NOTHROW(validate_assignment(a2, s));
  return {measure_balance(costs, a1, s), measure_balance(costs, a2, s),
          measure_movement(packs, a1, s, topo), measure_movement(packs, a2, s, topo)};
}

} // namespace

TEST_CASE("stage 2 keeps A exact and B within eps of stage 1, and never moves more bytes") {
  prng rng(99);
  for (int trial = 0; trial < 1500; ++trial) {
    const auto s = test::random_shape(rng, 48, 8, 1);
    const mix m = test::all_mixes[rng.below(std::size(test::all_mixes))];
    const auto packs = test::random_batch(s, rng(), m, rng.chance(1, 4));
    const double eps = rng.chance(1, 2) ? 0.0 : 0.01 * static_cast<double>(rng.uniform(1, 5));
    const auto o = run(packs, s, sync_mode::per_micro_step, eps);
    INFO("dp=" << s.dp << " ga=" << s.ga << " mix=" << std::string(test::name(m))
               << " eps=" << eps);
    CHECK(o.stage2.a == o.stage2.lb_a);
    CHECK(o.stage2.b <= detail::relax(o.stage1.b, detail::eps_ppm(eps)));
    CHECK(o.moved2.moved_bytes <= o.moved1.moved_bytes);
  }
}

TEST_CASE("in per-step mode stage 2 keeps both A and B within eps of stage 1") {
  prng rng(100);
  for (int trial = 0; trial < 800; ++trial) {
    const auto s = test::random_shape(rng, 40, 8, 3);
    const mix m = test::all_mixes[rng.below(std::size(test::all_mixes))];
    const auto packs = test::random_batch(s, rng(), m);
    const double eps = rng.chance(1, 2) ? 0.0 : 0.02;
    const auto o = run(packs, s, sync_mode::per_step, eps);
    INFO("dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs
               << " mix=" << std::string(test::name(m)));
    CHECK(o.stage2.b <= detail::relax(o.stage1.b, detail::eps_ppm(eps)));
    CHECK(o.stage2.a <= detail::relax(o.stage1.a, detail::eps_ppm(eps)));
    CHECK(o.moved2.moved_bytes <= o.moved1.moved_bytes);
  }
}

TEST_CASE("with mbs > 1 stage 2 never raises A or B above stage 1 at eps = 0") {
  prng rng(101);
  for (int trial = 0; trial < 800; ++trial) {
    const auto s = test::random_shape(rng, 32, 6, 4);
    const mix m = test::all_mixes[rng.below(std::size(test::all_mixes))];
    const auto packs = test::random_batch(s, rng(), m);
    const auto o = run(packs, s, sync_mode::per_micro_step, 0.0);
    INFO("dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs
               << " mix=" << std::string(test::name(m)));
    CHECK(o.stage2.a <= o.stage1.a);
    CHECK(o.stage2.b <= o.stage1.b);
    CHECK(o.moved2.moved_bytes <= o.moved1.moved_bytes);
  }
}

TEST_CASE("stage 2 keeps most bytes home on VLM-like batches") {
  // Karmarkar-Karp alone moves nearly every byte; the target is at most half of that.
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const shape s{64, 16, 1};
    const auto o = run(test::random_batch(s, seed, mix::vlm), s, sync_mode::per_micro_step, 0.0);
    CHECK(o.moved1.moved_bytes > 0);
    CHECK(static_cast<double>(o.moved2.moved_bytes) <=
          0.5 * static_cast<double>(o.moved1.moved_bytes));
  }
}

TEST_CASE("at eps = 0, limits no single swap reaches are met by chains of two swaps") {
  // Batches whose stage-1 B leaves each rank a few hundred cost units of 40 million: the first
  // two attempts get stuck on a rank and only renaming stage 1's ranks was left (moving nearly
  // every byte). The chained attempts (wide band, then narrow: seed 80 needs the narrow one)
  // meet the limit and keep most bytes home.
  struct stuck_batch {
    shape s;
    std::uint64_t seed;
    mix m;
  };
  for (const auto& c :
       {stuck_batch{{64, 16, 1}, 36, mix::uniform}, stuck_batch{{64, 16, 1}, 80, mix::uniform},
        stuck_batch{{256, 16, 1}, 2, mix::uniform}, stuck_batch{{256, 16, 1}, 43, mix::vlm}}) {
    INFO("dp=" << c.s.dp << " seed=" << c.seed << " mix=" << std::string(test::name(c.m)));
    const auto o = run(test::random_batch(c.s, c.seed, c.m), c.s, sync_mode::per_micro_step, 0.0);
    CHECK(o.stage2.a == o.stage2.lb_a);
    CHECK(o.stage2.b <= o.stage1.b);
    CHECK(static_cast<double>(o.moved2.moved_bytes) <=
          0.5 * static_cast<double>(o.moved1.moved_bytes));
  }
}

TEST_CASE("a node map makes stage 2 keep traffic inside nodes") {
  const shape s{64, 16, 1};
  const auto packs = test::random_batch(s, 5, mix::vlm);
  const auto nodes = topology::uniform(8, 16);
  const auto flat = run(packs, s, sync_mode::per_micro_step, 0.0);
  const auto aware = run(packs, s, sync_mode::per_micro_step, 0.0, nodes);
  const auto costs = test::costs_of(packs);
  const auto a_flat = refine(packs, s, balance(costs, s), refine_options{});
  CHECK(aware.moved2.inter_node_bytes < measure_movement(packs, a_flat, s, nodes).inter_node_bytes);
  CHECK(flat.stage2.a == flat.stage2.lb_a);
  CHECK(aware.stage2.a == aware.stage2.lb_a);
}

TEST_CASE("eps outside [0, 1] is refused, naming the value") {
  const shape s{2, 1, 1};
  const std::vector<pack_meta> packs{{1, 1, 0}, {2, 2, 1}};
  const assignment a{{0, 0}, {1, 0}};
  CHECK_THROWS_WITH_AS(refine(packs, s, a, refine_options{sync_mode::per_step, -0.5}),
                       doctest::Contains("eps is -0.5"), error);
  CHECK_THROWS_WITH_AS(refine(packs, s, a, refine_options{sync_mode::per_step, 2.0}),
                       doctest::Contains("eps is 2"), error);
}

TEST_CASE("costs in a finer unit past the search's range get the plan of the coarser unit") {
  // Costs whose total leaves the search's range (detail::stage2_fits) but which share a factor,
  // as a finer unit gives (microseconds given in picoseconds): stage 2 runs on the costs divided
  // by their common factor, so from the same stage 1 its answer is the one those divided costs
  // get, bit for bit (the coarse costs' own, where they share no factor); stage 1 deals the fine
  // costs as it deals the coarse ones.
  prng rng(107);
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  int searched = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto s = test::random_shape(rng, 24, 48, rng.chance(1, 4) ? 3 : 1);
    auto coarse = test::random_batch(s, rng(), mix::vlm);
    std::int64_t factor = 0;
    std::int64_t total = 0;
    for (auto& p : coarse) {
      p.cost = p.cost / 7 * 7 + (rng.chance(1, 3) ? 1 : 0); // a factor of 7 in some batches
      factor = std::gcd(factor, p.cost);
      total += p.cost;
    }
    if (total == 0) {
      continue;
    }
    // A unit fine enough to leave the range, with the total still within int64.
    const std::int64_t range = top / (2 * (s.ga + 2));
    const std::int64_t unit = range / total + 1 + rng.uniform(0, (top / total - range / total) / 2);
    auto fine = coarse;
    auto divided = coarse;
    for (std::size_t p = 0; p < coarse.size(); ++p) {
      fine[p].cost *= unit;
      divided[p].cost /= factor;
    }
    REQUIRE_FALSE(detail::stage2_fits(total * unit, s, 0, topology{}));
    const auto mode = rng.chance(1, 4) ? sync_mode::per_step : sync_mode::per_micro_step;
    const double eps = rng.chance(1, 2) ? 0.0 : 0.01;
    const auto a1 = balance(test::costs_of(coarse), s, mode);
    INFO("trial " << trial << " dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs
                  << " unit=" << unit << " factor=" << factor << " eps=" << eps);
    const refine_options opt{mode, eps, topology{}};
    const auto a2 = refine(fine, s, a1, opt);
    CHECK(a2 == refine(divided, s, a1, opt));
    if (factor == 1) {
      CHECK(a2 == refine(coarse, s, a1, opt));
    }
    CHECK(balance(test::costs_of(fine), s, mode) == a1);
    const auto o = run(fine, s, mode, eps);
    if (mode == sync_mode::per_micro_step && s.mbs == 1) {
      CHECK(o.stage2.a == o.stage2.lb_a);
    }
    CHECK(o.stage2.b <= detail::relax(o.stage1.b, detail::eps_ppm(eps)));
    searched += o.moved2.weighted_bytes < o.moved1.weighted_bytes ? 1 : 0;
  }
  CHECK(searched > 150); // stage 2 moved fewer bytes than stage 1 on most batches
}

TEST_CASE("stage 2 keeps its guarantees with costs or bytes near the int64 limit") {
  // Cost or byte totals near the limit make the search stand down for the renaming, unless the
  // costs share a factor that brings them within its range (then the search runs on them divided
  // by it; a cost one above a multiple of the scale breaks the factor in some trials); just
  // inside its range, loads leave no room for a rank's load and a place number in one word.
  // Either way nothing overflows (the sanitizer builds check) and the guarantees hold.
  prng rng(103);
  for (int trial = 0; trial < 1500; ++trial) {
    const auto s = test::random_shape(rng, 12, 6, rng.chance(1, 4) ? 3 : 1);
    auto packs = test::random_batch(s, rng(), mix::vlm);
    const int huge = static_cast<int>(rng.uniform(0, 2)); // 0: costs, 1: bytes, 2: both
    std::int64_t cost_sum = 0;
    std::int64_t byte_sum = 0;
    for (auto& p : packs) {
      if (huge != 1) {
        p.cost = rng.uniform(0, std::int64_t{1} << rng.uniform(0, 40));
      }
      if (huge != 0) {
        p.bytes = rng.uniform(0, std::int64_t{1} << rng.uniform(0, 40));
      }
      cost_sum += p.cost;
      byte_sum += p.bytes;
    }
    const std::int64_t top = std::numeric_limits<std::int64_t>::max();
    // Half the time just inside the range where the search runs (see detail::stage2_fits).
    const std::int64_t cost_top = rng.chance(1, 2) ? top : top / (2 * (s.ga + 2));
    const std::int64_t cost_scale = huge != 1 ? cost_top / (cost_sum + 1) : 1;
    const std::int64_t byte_scale = huge != 0 ? top / (byte_sum + 1) : 1;
    const bool factor = rng.chance(1, 2);
    for (auto& p : packs) {
      p.cost *= cost_scale;
      p.bytes *= byte_scale;
    }
    if (!factor && cost_scale > 1 && !packs.empty() && packs[0].cost < top) {
      ++packs[0].cost; // no factor shared with the scale: the total stays within int64
    }
    const double eps = rng.chance(1, 2) ? 0.0 : 0.25 * static_cast<double>(rng.uniform(1, 4));
    const sync_mode mode = rng.chance(1, 4) ? sync_mode::per_step : sync_mode::per_micro_step;
    const topology topo =
        rng.chance(1, 2) ? topology{} : topology::uniform(2, std::int64_t{1} << 20);
    const auto o = run(packs, s, mode, eps, topo);
    INFO("dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs << " huge=" << huge << " eps=" << eps);
    if (mode == sync_mode::per_micro_step && s.mbs == 1) {
      CHECK(o.stage2.a == o.stage2.lb_a);
    }
    CHECK(o.stage2.b <= detail::relax(o.stage1.b, detail::eps_ppm(eps)));
    CHECK(o.moved2.weighted_bytes <= o.moved1.weighted_bytes);
  }
}
