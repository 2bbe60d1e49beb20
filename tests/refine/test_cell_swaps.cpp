// Stage 2's bring-home over cells of several packs (refine/detail/cell_swaps.hpp) against the
// obvious search it indexes: every place of the home rank weighed for every pack away from home.
#include <packswap/batch.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/refine/detail/cell_swaps.hpp>
#include <packswap/refine/topology.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

using namespace packswap;

namespace {

// The definition: for each pack away from home, in pack order, every place of its home rank
// (in place order) holding a pack from elsewhere; the trade that saves most weighted bytes
// within the limit and the cell caps, the first place among equals.
void bring_home_by_scan(span<const pack_meta> packs, const shape& s, const topology& topo,
                        span<const std::int64_t> caps, std::int64_t limit, assignment& a,
                        std::int32_t passes) {
  const auto dp = static_cast<std::size_t>(s.dp);
  const auto ga = static_cast<std::size_t>(s.ga);
  const auto k = static_cast<std::size_t>(s.packs_per_rank());
  const std::size_t n = packs.size();
  std::vector<std::int64_t> cell_load(dp * ga, 0);
  std::vector<std::int64_t> rank_load(dp, 0);
  std::vector<std::size_t> place(n); // place[r * k + i]: a pack rank r computes
  std::vector<std::size_t> used(dp, 0);
  for (std::size_t p = 0; p < n; ++p) {
    const auto r = static_cast<std::size_t>(a[p].rank);
    cell_load[r * ga + static_cast<std::size_t>(a[p].micro_step)] += packs[p].cost;
    rank_load[r] += packs[p].cost;
    place[r * k + used[r]++] = p;
  }
  bool changed = true;
  for (std::int32_t pass = 0; pass < passes && changed; ++pass) {
    changed = false;
    for (std::size_t p = 0; p < n; ++p) {
      if (a[p].rank == packs[p].source_rank) {
        continue; // at home
      }
      const std::int32_t r = a[p].rank;
      const std::int32_t h = packs[p].source_rank;
      const auto rr = static_cast<std::size_t>(r);
      const auto hh = static_cast<std::size_t>(h);
      const auto mp = static_cast<std::size_t>(a[p].micro_step);
      std::size_t best = n;
      std::int64_t best_saving = 0;
      for (std::size_t at = hh * k; at < (hh + 1) * k; ++at) {
        const std::size_t q = place[at];
        const std::int32_t sq = packs[q].source_rank;
        const auto mq = static_cast<std::size_t>(a[q].micro_step);
        const std::int64_t d = packs[p].cost - packs[q].cost;
        if (sq == h || rank_load[hh] + d > limit || rank_load[rr] - d > limit ||
            cell_load[hh * ga + mq] + d > caps[mq] || cell_load[rr * ga + mp] - d > caps[mp]) {
          continue;
        }
        const std::int64_t before =
            topo.weight(h, r) * packs[p].bytes + topo.weight(sq, h) * packs[q].bytes;
        const std::int64_t after = topo.weight(sq, r) * packs[q].bytes;
        if (after - before < best_saving) {
          best_saving = after - before;
          best = at;
        }
      }
      if (best == n) {
        continue;
      }
      const std::size_t q = place[best];
      const std::int64_t d = packs[p].cost - packs[q].cost;
      rank_load[hh] += d;
      rank_load[rr] -= d;
      cell_load[hh * ga + static_cast<std::size_t>(a[q].micro_step)] += d;
      cell_load[rr * ga + mp] -= d;
      const auto at_p = static_cast<std::size_t>(
          std::find(place.begin() + static_cast<std::ptrdiff_t>(rr * k),
                    place.begin() + static_cast<std::ptrdiff_t>((rr + 1) * k), p) -
          place.begin());
      std::swap(place[at_p], place[best]);
      std::swap(a[p], a[q]);
      changed = true;
    }
  }
}

// A random batch of `s` whose costs and bytes follow `kind`: 0 spread, 1 a few values (ties and
// zeros), 2 heavy-tailed, 3 nearly equal; every pack dealt to a random cell.
struct case_data {
  std::vector<pack_meta> packs;
  assignment a;
  std::vector<std::int64_t> caps;
  std::int64_t limit = 0;
};

std::int64_t draw(prng& g, int kind) {
  switch (kind) {
  case 0:
    return g.uniform(0, 1000);
  case 1:
    return 100 * g.uniform(0, 3);
  case 2:
    return g.chance(1, 20) ? g.uniform(5000, 50000) : g.uniform(1, 200);
  default:
    return 1000 + g.uniform(0, 10);
  }
}

case_data random_case(prng& g, const shape& s) {
  case_data c;
  const auto n = static_cast<std::size_t>(s.packs());
  const int cost_kind = static_cast<int>(g.below(4));
  const int bytes_kind = static_cast<int>(g.below(4));
  c.packs.resize(n);
  for (auto& m : c.packs) {
    m.cost = draw(g, cost_kind);
    m.bytes = draw(g, bytes_kind);
    m.source_rank = static_cast<std::int32_t>(g.below(static_cast<std::uint64_t>(s.dp)));
  }
  // Cells in a random order, mbs packs each.
  std::vector<cell> cells;
  for (std::int32_t r = 0; r < s.dp; ++r) {
    for (std::int32_t m = 0; m < s.ga; ++m) {
      for (std::int32_t j = 0; j < s.mbs; ++j) {
        cells.push_back({r, m});
      }
    }
  }
  for (std::size_t i = n; i > 1; --i) {
    std::swap(cells[i - 1], cells[g.below(i)]);
  }
  c.a = cells;
  // Some packs start at home, as after a renaming.
  for (std::size_t p = 0; p < n; ++p) {
    if (g.chance(1, 3)) {
      c.packs[p].source_rank = c.a[p].rank;
    }
  }
  std::vector<std::int64_t> cell_load(static_cast<std::size_t>(s.dp * s.ga), 0);
  std::vector<std::int64_t> rank_load(static_cast<std::size_t>(s.dp), 0);
  for (std::size_t p = 0; p < n; ++p) {
    cell_load[static_cast<std::size_t>(c.a[p].rank * s.ga + c.a[p].micro_step)] += c.packs[p].cost;
    rank_load[static_cast<std::size_t>(c.a[p].rank)] += c.packs[p].cost;
  }
  c.caps.assign(static_cast<std::size_t>(s.ga), 0);
  for (std::int32_t r = 0; r < s.dp; ++r) {
    for (std::int32_t m = 0; m < s.ga; ++m) {
      auto& cap = c.caps[static_cast<std::size_t>(m)];
      cap = std::max(cap, cell_load[static_cast<std::size_t>(r * s.ga + m)]);
    }
  }
  for (auto& cap : c.caps) {
    cap += g.chance(1, 2) ? 0 : g.uniform(-100, 300);
  }
  // Mostly every rank within the limit, as stage 2 gives it; sometimes not.
  c.limit = *std::max_element(rank_load.begin(), rank_load.end()) +
            (g.chance(1, 2) ? 0 : g.uniform(-300, 500));
  return c;
}

topology random_topology(prng& g, std::int32_t dp) {
  switch (g.below(4)) {
  case 0:
    return {};
  case 1:
    return topology::uniform(static_cast<std::int32_t>(g.uniform(1, 3)), g.uniform(1, 5));
  case 2: {
    std::vector<std::int32_t> map(static_cast<std::size_t>(dp));
    for (auto& node : map) {
      node = static_cast<std::int32_t>(g.below(3));
    }
    return topology::from_map(std::move(map), g.uniform(2, 4));
  }
  default:
    return topology::uniform(2, 1);
  }
}

} // namespace

TEST_CASE("the indexed bring-home trades exactly as a scan of every place") {
  prng g(20261202);
  int traded = 0;
  detail::cell_places kept; // reused across cases of every size, as a kept solver does
  for (int trial = 0; trial < 3000; ++trial) {
    const shape s{static_cast<std::int32_t>(g.uniform(1, 9)),
                  static_cast<std::int32_t>(g.uniform(1, trial % 10 == 0 ? 40 : 6)),
                  static_cast<std::int32_t>(g.uniform(2, 4))};
    const case_data c = random_case(g, s);
    const topology topo = random_topology(g, s.dp);
    const auto passes = static_cast<std::int32_t>(g.uniform(1, 3));
    assignment expected = c.a;
    bring_home_by_scan(c.packs, s, topo, c.caps, c.limit, expected, passes);
    assignment got = c.a;
    detail::bring_home_cells(c.packs, s, topo, c.caps, c.limit, got, passes, kept);
    INFO("trial " << trial << " dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs);
    REQUIRE(got == expected);
    traded += expected != c.a ? 1 : 0;
  }
  // The cases reach trades, not only batches with none.
  CHECK(traded > 1000);
}
