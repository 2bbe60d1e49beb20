#include <packswap/plan/plan.hpp>
#include <packswap/plan/verify.hpp>

#include <doctest/doctest.h>

#include <vector>

using namespace packswap;

TEST_CASE("verify names a plan that disagrees with its assignment") {
  const shape s{2, 1, 1};
  const std::vector<pack_meta> packs{{1, 10, 0}, {1, 10, 1}};
  const assignment a{{1, 0}, {0, 0}};
  const assignment other{{0, 0}, {1, 0}};
  const auto pl = make_plan(packs, s, other);
  CHECK_THROWS_WITH_AS(verify(packs, s, a, pl), doctest::Contains("pack 0 is computed at (rank 0"),
                       error);
  CHECK_NOTHROW(verify(packs, s, other, pl));
}

TEST_CASE("verify refuses a plan built for another shape") {
  const std::vector<pack_meta> packs{{1, 10, 0}, {1, 10, 1}};
  const auto pl = make_plan(packs, {2, 1, 1}, assignment{{0, 0}, {1, 0}});
  const std::vector<pack_meta> four{{1, 10, 0}, {1, 10, 0}, {1, 10, 1}, {1, 10, 1}};
  CHECK_THROWS_WITH_AS(verify(four, {2, 2, 1}, assignment{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, pl),
                       doctest::Contains("plan shape"), error);
}
