#include <packswap/balance/metrics.hpp>

#include <packswap/balance/balance.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <vector>

using namespace packswap;

TEST_CASE("A, B and their lower bounds match a hand-computed example") {
  // dp = 2, ga = 2: costs 9, 7, 4, 1.
  const shape s{2, 2, 1};
  const std::vector<std::int64_t> costs{9, 7, 4, 1};
  // Rank 0: 9 then 1; rank 1: 7 then 4. Micro-step maxima 9 and 4: A = 13. Loads 10 and 11.
  const assignment a{{0, 0}, {1, 0}, {1, 1}, {0, 1}};
  const auto m = measure_balance(costs, a, s);
  CHECK(m.a == 13);
  CHECK(m.b == 11);
  CHECK(m.lb_a == 9 + 4); // sorted chunks {9, 7} and {4, 1}
  CHECK(m.lb_b == 11);    // ceil(21 / 2)
}

TEST_CASE("LB_B is at least the lightest cell that can hold the largest pack") {
  const shape s{2, 1, 2};
  const std::vector<std::int64_t> costs{100, 1, 2, 3};
  const assignment a{{0, 0}, {0, 0}, {1, 0}, {1, 0}};
  const auto m = measure_balance(costs, a, s);
  CHECK(m.lb_b == 101); // 100 + the smallest other pack, above ceil(106 / 2) = 53
  CHECK(m.b == 101);
  CHECK(m.lb_a == 100); // one micro-step: max(largest pack, ceil(106 / 2))
  CHECK(m.a == 101);
}

TEST_CASE("an assignment mixing heavy packs into one micro-step pays for it in A") {
  const shape s{2, 2, 1};
  const std::vector<std::int64_t> costs{10, 10, 1, 1};
  const assignment mixed{{0, 0}, {1, 1}, {1, 0}, {0, 1}};
  const assignment grouped{{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  CHECK(measure_balance(costs, mixed, s).a == 20);
  CHECK(measure_balance(costs, grouped, s).a == 11);
  CHECK(measure_balance(costs, grouped, s).lb_a == 11);
}

TEST_CASE("with cells of several packs, LB_A counts heavy micro-steps by their largest pack") {
  // dp = 2, ga = 3, mbs = 2: one pack of 20, eight of 5, three of 1 (total 63, chunks of 4).
  // Sum of the chunks' maxima 20 + 5 + 5 = 30, ceil(63 / 2) = 32; the micro-step with the 20
  // counted by it and the others by their mean: 20 + ceil((63 - 35) / 2) = 34.
  const shape s{2, 3, 2};
  const std::vector<std::int64_t> costs{20, 5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1};
  // Cells {20, 1} {5, 5} | {5, 1} {5, 1} | {5, 5} {5, 5}: A = 21 + 6 + 10.
  const assignment best{{0, 0}, {1, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2},
                        {0, 2}, {1, 2}, {1, 2}, {0, 0}, {0, 1}, {1, 1}};
  const auto m = measure_balance(costs, best, s);
  CHECK(m.a == 37);
  CHECK(m.lb_a == 34);
  CHECK(lower_bound_a_sorted(costs, s) == 34); // costs are already in descending order
}

TEST_CASE("LB_A never exceeds A, whatever the assignment, for cells of several packs") {
  // Random shapes with mbs 2 to 4, every mix, and assignments from stage 1 (both modes) and
  // random valid ones; the bound must hold for each, and be at least both former bounds.
  prng rng(2024);
  for (int trial = 0; trial < 600; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(1, 12)),
                  static_cast<std::int32_t>(rng.uniform(1, 8)),
                  static_cast<std::int32_t>(rng.uniform(2, 4))};
    const auto m = test::all_mixes[rng.below(std::size(test::all_mixes))];
    const auto costs = test::costs_of(test::random_batch(s, rng(), m));
    std::vector<std::int64_t> sorted = costs;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    std::int64_t total = 0;
    std::int64_t maxima = 0;
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      total += sorted[i];
      maxima += i % static_cast<std::size_t>(s.dp * s.mbs) == 0 ? sorted[i] : 0;
    }
    const std::int64_t lb = lower_bound_a_sorted(sorted, s);
    CHECK(lb >= maxima);
    CHECK(lb >= (total + s.dp - 1) / s.dp);
    std::vector<assignment> candidates{balance(costs, s, sync_mode::per_micro_step),
                                       balance(costs, s, sync_mode::per_step)};
    for (int r = 0; r < 4; ++r) {
      // A random valid assignment: cells dealt mbs packs each, in a random order of packs.
      std::vector<std::size_t> perm(costs.size());
      for (std::size_t i = 0; i < perm.size(); ++i) {
        perm[i] = i;
      }
      for (std::size_t i = perm.size(); i > 1; --i) {
        std::swap(perm[i - 1], perm[static_cast<std::size_t>(rng.below(i))]);
      }
      assignment a(costs.size());
      for (std::size_t i = 0; i < perm.size(); ++i) {
        const auto c = static_cast<std::int32_t>(i / static_cast<std::size_t>(s.mbs));
        a[perm[i]] = cell{c % s.dp, c / s.dp};
      }
      candidates.push_back(a);
    }
    for (const auto& a : candidates) {
      const auto got = measure_balance(costs, a, s);
      CHECK(got.lb_a == lb);
      CHECK(got.a >= got.lb_a);
    }
  }
}

TEST_CASE("the load profile holds the cell loads' micro-step maxima and rank totals") {
  // With one pack per cell it is built from the packs alone; compared here with the table of
  // cell loads it replaces, for every mix (zero costs and ties included) and mbs 1 to 3.
  prng rng(11);
  detail::load_profile got;
  std::vector<std::int64_t> table;
  for (int trial = 0; trial < 600; ++trial) {
    const auto s = test::random_shape(rng, 12, 6, 3);
    const auto m = test::all_mixes[static_cast<std::size_t>(trial) % std::size(test::all_mixes)];
    const auto costs = test::costs_of(test::random_batch(s, rng(), m));
    // Stage 1's answer, and a scrambled one (any valid assignment will do).
    assignment a = balance(costs, s);
    for (std::size_t i = a.size(); i > 1; --i) {
      std::swap(a[i - 1],
                a[static_cast<std::size_t>(rng.uniform(0, static_cast<std::int64_t>(i) - 1))]);
    }
    const auto loads = cell_loads(costs, a, s);
    detail::profile_loads(costs, a, s, got, table);
    std::vector<std::int64_t> step_max(static_cast<std::size_t>(s.ga), 0);
    std::vector<std::int64_t> rank_sum(static_cast<std::size_t>(s.dp), 0);
    for (std::size_t r = 0; r < rank_sum.size(); ++r) {
      for (std::size_t k = 0; k < step_max.size(); ++k) {
        step_max[k] = std::max(step_max[k], loads[r * step_max.size() + k]);
        rank_sum[r] += loads[r * step_max.size() + k];
      }
    }
    CAPTURE(s.dp);
    CAPTURE(s.ga);
    CAPTURE(s.mbs);
    CHECK(got.step_max == step_max);
    CHECK(got.rank_sum == rank_sum);
    CHECK(got.a() == step_time_a(loads, s));
    CHECK(got.b() == step_time_b(loads, s));
  }
}
