#include <packswap/balance/metrics.hpp>

#include <doctest/doctest.h>

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
