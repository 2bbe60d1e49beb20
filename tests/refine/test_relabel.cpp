#include <packswap/balance/balance.hpp>
#include <packswap/balance/metrics.hpp>
#include <packswap/refine/movement.hpp>
#include <packswap/refine/relabel.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "batches.hpp"

using namespace packswap;

TEST_CASE("renaming ranks keeps A and B and never moves more bytes") {
  prng rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const auto s = test::random_shape(rng, 32, 8, 3);
    const auto packs =
        test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 2));
    const auto costs = test::costs_of(packs);
    const auto a = balance(costs, s);
    const auto b = relabel_ranks(packs, s, a);
    CHECK_NOTHROW(validate_assignment(b, s));
    const auto ma = measure_balance(costs, a, s);
    const auto mb = measure_balance(costs, b, s);
    CHECK(ma.a == mb.a);
    CHECK(ma.b == mb.b);
    CHECK(measure_movement(packs, b, s).moved_bytes <= measure_movement(packs, a, s).moved_bytes);
  }
}

TEST_CASE("with a node map, renaming never moves more weighted bytes than the names it got") {
  prng rng(12);
  for (int trial = 0; trial < 400; ++trial) {
    const auto s = test::random_shape(rng, 32, 8, 2);
    const auto packs = test::random_batch(s, rng(), test::all_mixes[rng.below(7)], true);
    const auto nodes =
        topology::uniform(static_cast<std::int32_t>(rng.uniform(1, 8)), rng.uniform(2, 16));
    const auto a = balance(test::costs_of(packs), s);
    const auto b = relabel_ranks(packs, s, a, nodes);
    CHECK(measure_movement(packs, b, s, nodes).weighted_bytes <=
          measure_movement(packs, a, s, nodes).weighted_bytes);
  }
}

TEST_CASE("a column that is one rank's own packs gets that rank's name") {
  const shape s{3, 2, 1};
  const std::vector<pack_meta> packs{{5, 10, 0}, {4, 10, 0}, {5, 10, 1},
                                     {4, 10, 1}, {5, 10, 2}, {4, 10, 2}};
  // Stage 1 put rank 2's packs in column 0, rank 0's in column 1, rank 1's in column 2.
  const assignment a{{1, 0}, {1, 1}, {2, 0}, {2, 1}, {0, 0}, {0, 1}};
  const auto b = relabel_ranks(packs, s, a);
  CHECK(measure_movement(packs, b, s).moved == 0);
}

namespace {

// The greedy as its contract states it: every (column, source rank) pair with the bytes it
// would keep, all sorted by bytes descending, then column, then rank; each taken while its
// column and rank are both free; columns left over get the free ranks in order.
std::vector<std::int32_t> greedy_names(const std::vector<pack_meta>& packs, const shape& s,
                                       const assignment& a) {
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> kept;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    kept[{a[p].rank, packs[p].source_rank}] -= packs[p].bytes;
  }
  std::vector<std::tuple<std::int64_t, std::int32_t, std::int32_t>> pairs; // (-bytes, col, rank)
  for (const auto& [key, neg_bytes] : kept) {
    pairs.emplace_back(neg_bytes, key.first, key.second);
  }
  std::sort(pairs.begin(), pairs.end());
  const auto dp = static_cast<std::size_t>(s.dp);
  std::vector<std::int32_t> name(dp, -1);
  std::vector<char> taken(dp, 0);
  for (const auto& [neg_bytes, column, rank] : pairs) {
    auto& target = name[static_cast<std::size_t>(column)];
    if (target < 0 && !taken[static_cast<std::size_t>(rank)]) {
      target = rank;
      taken[static_cast<std::size_t>(rank)] = 1;
    }
  }
  std::size_t next = 0;
  for (auto& target : name) {
    if (target < 0) {
      while (taken[next]) {
        ++next;
      }
      target = static_cast<std::int32_t>(next);
      taken[next] = 1;
    }
  }
  return name;
}

} // namespace

TEST_CASE("renaming gives the greedy's names where ranks contend for the same columns") {
  // Many ranks, columns of many packs, and bytes that tie: a rank's best columns are often
  // taken by others first, so its later choices come from its sorted remainder.
  prng rng(14);
  for (int trial = 0; trial < 40; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(64, 192)),
                  static_cast<std::int32_t>(rng.uniform(16, 48)), 1};
    auto packs = test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 2));
    for (auto& p : packs) {
      p.bytes = static_cast<std::int64_t>(1 + rng.below(2));
    }
    const auto a = balance(test::costs_of(packs), s);
    const auto b = relabel_ranks(packs, s, a);
    const auto name = greedy_names(packs, s, a);
    bool as_greedy = true;
    for (std::size_t p = 0; p < a.size(); ++p) {
      as_greedy = as_greedy && b[p].rank == name[static_cast<std::size_t>(a[p].rank)];
    }
    CHECK(as_greedy);
  }
}

TEST_CASE("renaming gives the greedy's names, ties in bytes included") {
  prng rng(13);
  for (int trial = 0; trial < 600; ++trial) {
    const auto s = test::random_shape(rng, 48, 8, 3);
    auto packs = test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 2));
    if (rng.chance(1, 2)) {
      for (auto& p : packs) { // few distinct byte sizes: many pairs tie
        p.bytes = static_cast<std::int64_t>(1 + rng.below(3));
      }
    }
    const auto a = balance(test::costs_of(packs), s);
    const auto b = relabel_ranks(packs, s, a);
    const auto name = greedy_names(packs, s, a);
    // The greedy's names, unless they would not have moved fewer bytes: then none changes.
    const bool renamed = std::any_of(a.begin(), a.end(), [&](const cell& c) {
      return name[static_cast<std::size_t>(c.rank)] != c.rank;
    });
    bool as_greedy = true;
    bool unchanged = true;
    for (std::size_t p = 0; p < a.size(); ++p) {
      as_greedy = as_greedy && b[p].rank == name[static_cast<std::size_t>(a[p].rank)];
      unchanged = unchanged && b[p].rank == a[p].rank && b[p].micro_step == a[p].micro_step;
    }
    CHECK((as_greedy || (renamed && unchanged)));
    if (renamed && unchanged && !as_greedy) {
      assignment renamed_a = a;
      for (auto& c : renamed_a) {
        c.rank = name[static_cast<std::size_t>(c.rank)];
      }
      CHECK(measure_movement(packs, renamed_a, s).moved_bytes >=
            measure_movement(packs, a, s).moved_bytes);
    }
  }
}
