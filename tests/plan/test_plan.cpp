#include <packswap/balance/balance.hpp>
#include <packswap/plan/plan.hpp>
#include <packswap/plan/verify.hpp>
#include <packswap/refine/refine.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <algorithm>
#include <utility>
#include <vector>

using namespace packswap;

TEST_CASE("a hand-made plan lists keeps, sends and receives as the assignment says") {
  const shape s{2, 2, 1};
  // Rank 0 loaded packs 0, 1; rank 1 loaded 2, 3. Pack 1 and pack 2 trade ranks.
  const std::vector<pack_meta> packs{{9, 90, 0}, {5, 50, 0}, {7, 70, 1}, {1, 10, 1}};
  const assignment a{{0, 0}, {1, 1}, {0, 1}, {1, 0}};
  const auto pl = make_plan(packs, s, a);
  CHECK(pl.keep(0, 0).size() == 1);
  CHECK(pl.keep(0, 0)[0] == 0);
  REQUIRE(pl.sends(0, 1).size() == 1);
  CHECK(pl.sends(0, 1)[0] == transfer{1, 1, 50});
  REQUIRE(pl.receives(1, 1).size() == 1);
  CHECK(pl.receives(1, 1)[0] == transfer{1, 0, 50});
  REQUIRE(pl.receives(0, 1).size() == 1);
  CHECK(pl.receives(0, 1)[0] == transfer{2, 1, 70});
  CHECK(pl.receive_bytes(0, 1) == 70);
  CHECK(pl.send_bytes(1, 1) == 70);
  CHECK(pl.sends(0).size() == 1);
  CHECK_NOTHROW(verify(packs, s, a, pl));
}

TEST_CASE("every send is matched by a receive on its peer, in the same order") {
  prng rng(5);
  for (int trial = 0; trial < 600; ++trial) {
    const auto s = test::random_shape(rng, 24, 6, 3);
    const auto packs =
        test::random_batch(s, rng(), test::all_mixes[rng.below(7)], rng.chance(1, 3));
    const auto a1 = balance(test::costs_of(packs), s);
    for (const auto& a : {a1, refine(packs, s, a1)}) {
      const auto pl = make_plan(packs, s, a);
      CHECK_NOTHROW(verify(packs, s, a, pl));
      std::int64_t sends = 0;
      std::int64_t receives = 0;
      for (std::int32_t r = 0; r < s.dp; ++r) {
        sends += static_cast<std::int64_t>(pl.sends(r).size());
        receives += static_cast<std::int64_t>(pl.receives(r).size());
      }
      CHECK(sends == receives);
    }
  }
}

TEST_CASE("one rank's plan is exactly its slice of the whole plan") {
  prng rng(6);
  for (int trial = 0; trial < 200; ++trial) {
    const auto s = test::random_shape(rng, 16, 6, 2);
    const auto packs = test::random_batch(s, rng(), test::mix::vlm);
    const auto a = refine(packs, s, balance(test::costs_of(packs), s));
    const auto all = make_plan(packs, s, a);
    const auto r = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.dp)));
    const auto mine = make_plan(packs, s, a, r);
    CHECK(mine.first_rank() == r);
    CHECK(mine.last_rank() == r + 1);
    CHECK_NOTHROW(verify(packs, s, a, mine));
    for (std::int32_t m = 0; m < s.ga; ++m) {
      const auto x = all.sends(r, m);
      const auto y = mine.sends(r, m);
      CHECK(std::vector<transfer>(x.begin(), x.end()) == std::vector<transfer>(y.begin(), y.end()));
      const auto u = all.receives(r, m);
      const auto v = mine.receives(r, m);
      CHECK(std::vector<transfer>(u.begin(), u.end()) == std::vector<transfer>(v.begin(), v.end()));
      const auto c = all.compute(r, m);
      const auto d = mine.compute(r, m);
      CHECK(std::vector<std::int32_t>(c.begin(), c.end()) ==
            std::vector<std::int32_t>(d.begin(), d.end()));
    }
    if (s.dp > 1) {
      const std::int32_t other = (r + 1) % s.dp;
      CHECK_THROWS_WITH_AS(mine.sends(other, 0), doctest::Contains("outside this plan"), error);
    }
  }
}

namespace {

// Cells dealt at random, so that most packs move.
assignment random_deal(const shape& s, std::size_t n, prng& rng) {
  std::vector<std::size_t> deal(n);
  for (std::size_t i = 0; i < n; ++i) {
    deal[i] = i;
  }
  for (std::size_t i = n; i > 1; --i) {
    std::swap(deal[i - 1], deal[rng.below(i)]);
  }
  const auto mbs = static_cast<std::size_t>(s.mbs);
  const auto ga = static_cast<std::size_t>(s.ga);
  assignment a(n);
  for (std::size_t p = 0; p < n; ++p) {
    const std::size_t c = deal[p] / mbs;
    a[p] = cell{static_cast<std::int32_t>(c / ga), static_cast<std::int32_t>(c % ga)};
  }
  return a;
}

// Every list of the whole plan and of rank r0's own against one built from its definition:
// compute and keep by pack id, sends and receives by (peer, pack id).
void check_lists(const std::vector<pack_meta>& packs, const shape& s, const assignment& a,
                 std::int32_t r0) {
  const auto n = packs.size();
  const auto all = make_plan(packs, s, a);
  const auto mine = make_plan(packs, s, a, r0);
  for (std::int32_t r = 0; r < s.dp; ++r) {
    for (std::int32_t m = 0; m < s.ga; ++m) {
      std::vector<std::int32_t> compute, keep;
      std::vector<transfer> sends, receives;
      for (std::size_t p = 0; p < n; ++p) { // ascending id
        const auto id = static_cast<std::int32_t>(p);
        const std::int32_t from = packs[p].source_rank;
        if (a[p].rank == r && a[p].micro_step == m) {
          compute.push_back(id);
          if (from == r) {
            keep.push_back(id);
          } else {
            receives.push_back({id, from, packs[p].bytes});
          }
        }
        if (from == r && a[p].rank != r && a[p].micro_step == m) {
          sends.push_back({id, a[p].rank, packs[p].bytes});
        }
      }
      const auto by_peer = [](const transfer& x, const transfer& y) {
        return x.peer < y.peer || (x.peer == y.peer && x.pack < y.pack);
      };
      std::sort(sends.begin(), sends.end(), by_peer);
      std::sort(receives.begin(), receives.end(), by_peer);
      for (const plan* pl : {&all, &mine}) {
        if (r < pl->first_rank() || r >= pl->last_rank()) {
          continue;
        }
        CAPTURE(r);
        CAPTURE(m);
        const auto c = pl->compute(r, m);
        const auto k = pl->keep(r, m);
        const auto sd = pl->sends(r, m);
        const auto rv = pl->receives(r, m);
        CHECK(std::vector<std::int32_t>(c.begin(), c.end()) == compute);
        CHECK(std::vector<std::int32_t>(k.begin(), k.end()) == keep);
        CHECK(std::vector<transfer>(sd.begin(), sd.end()) == sends);
        CHECK(std::vector<transfer>(rv.begin(), rv.end()) == receives);
      }
    }
  }
}

} // namespace

TEST_CASE("every list holds what the assignment says, in its documented order") {
  prng rng(8);
  for (int trial = 0; trial < 300; ++trial) {
    const auto s = test::random_shape(rng, 20, 6, 3);
    const auto packs = test::random_batch(s, rng(), test::mix::vlm, rng.chance(1, 2));
    const auto a = random_deal(s, packs.size(), rng);
    check_lists(packs, s, a,
                static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.dp))));
  }
}

TEST_CASE("long send and receive lists are in their documented order too") {
  // A cell whose rank's loader made many packs sends most of them, and one of many packs
  // receives most of its own: lists far longer than the few packs a cell usually exchanges.
  prng rng(9);
  for (const shape s : {shape{8, 1, 96}, shape{24, 2, 48}, shape{3, 4, 40}}) {
    const auto packs = test::random_batch(s, rng(), test::mix::vlm, false);
    const auto a = random_deal(s, packs.size(), rng);
    std::size_t longest = 0;
    const auto all = make_plan(packs, s, a);
    for (std::int32_t r = 0; r < s.dp; ++r) {
      for (std::int32_t m = 0; m < s.ga; ++m) {
        longest = std::max({longest, all.sends(r, m).size(), all.receives(r, m).size()});
      }
    }
    CAPTURE(s.dp);
    CHECK(longest > 32);
    check_lists(packs, s, a, s.dp - 1);
  }
}

TEST_CASE("micro-step 0 is the one with the cheapest exchange, and A and B stay") {
  prng rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto s = test::random_shape(rng, 16, 8, 2);
    const auto packs = test::random_batch(s, rng(), test::mix::vlm, true);
    const auto costs = test::costs_of(packs);
    const auto a = balance(costs, s);
    const auto o = order_micro_steps(packs, s, a);
    const auto before = measure_balance(costs, a, s);
    const auto after = measure_balance(costs, o, s);
    CHECK(before.a == after.a);
    CHECK(before.b == after.b);
    const auto pl = make_plan(packs, s, o);
    std::int64_t first = 0;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      first = std::max(first, pl.receive_bytes(r, 0));
    }
    for (std::int32_t m = 1; m < s.ga; ++m) {
      std::int64_t worst = 0;
      for (std::int32_t r = 0; r < s.dp; ++r) {
        worst = std::max(worst, pl.receive_bytes(r, m));
      }
      CHECK(first <= worst);
    }
  }
}

TEST_CASE("micro-step 0 is chosen by the largest per-rank receive, then the total, then index") {
  // A reference built on the table of received bytes per cell, against order_micro_steps, which
  // needs no table when mbs = 1: random batches, zero-byte packs and all-equal sizes included.
  prng rng(8);
  for (int trial = 0; trial < 600; ++trial) {
    const auto s = test::random_shape(rng, 12, 6, 3);
    const auto m = test::all_mixes[static_cast<std::size_t>(trial) % std::size(test::all_mixes)];
    const auto packs = test::random_batch(s, rng(), m, trial % 2 == 0);
    const auto a = balance(test::costs_of(packs), s);
    const auto ga = static_cast<std::size_t>(s.ga);
    std::vector<std::int64_t> recv(static_cast<std::size_t>(s.cells()), 0);
    for (std::size_t p = 0; p < packs.size(); ++p) {
      if (packs[p].source_rank != a[p].rank) {
        recv[static_cast<std::size_t>(a[p].rank) * ga +
             static_cast<std::size_t>(a[p].micro_step)] += packs[p].bytes;
      }
    }
    std::int32_t best = 0;
    std::pair<std::int64_t, std::int64_t> best_key{0, 0};
    for (std::size_t k = 0; k < ga; ++k) {
      std::pair<std::int64_t, std::int64_t> key{0, 0};
      for (std::size_t r = 0; r < static_cast<std::size_t>(s.dp); ++r) {
        key.first = std::max(key.first, recv[r * ga + k]);
        key.second += recv[r * ga + k];
      }
      if (k == 0 || key < best_key) {
        best = static_cast<std::int32_t>(k);
        best_key = key;
      }
    }
    assignment want = a;
    for (auto& c : want) {
      c.micro_step = c.micro_step == best  ? 0
                     : c.micro_step < best ? c.micro_step + 1
                                           : c.micro_step;
    }
    CAPTURE(s.dp);
    CAPTURE(s.ga);
    CAPTURE(s.mbs);
    CHECK(order_micro_steps(packs, s, a) == want);
  }
}

TEST_CASE("the assignment digest tells different plans apart and equal ones together") {
  const assignment a{{0, 0}, {1, 0}};
  const assignment b{{1, 0}, {0, 0}};
  CHECK(digest(a) == digest(assignment(a)));
  CHECK(digest(a) != digest(b));
}

TEST_CASE("a plan for a rank outside the batch is refused, naming the rank") {
  const std::vector<pack_meta> packs{{1, 10, 0}, {1, 10, 1}};
  const assignment a{{0, 0}, {1, 0}};
  CHECK_THROWS_WITH_AS(make_plan(packs, {2, 1, 1}, a, 2),
                       doctest::Contains("rank 2 is outside dp=2"), error);
  CHECK_THROWS_WITH_AS(make_plan(packs, {2, 1, 1}, a, -1), doctest::Contains("rank -1 is outside"),
                       error);
}
