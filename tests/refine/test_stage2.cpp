// Stage 2's internals (refine/detail/stage2/): the pieces whose answers must match a slower,
// obvious computation.
#include <packswap/cost/pack_meta.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/detail/sort.hpp>
#include <packswap/refine/detail/home_first.hpp>
#include <packswap/refine/detail/stage2/fill.hpp>
#include <packswap/refine/detail/stage2/pin.hpp>
#include <packswap/refine/detail/stage2/redeal.hpp>
#include <packswap/refine/detail/stage2/state.hpp>
#include <packswap/refine/topology.hpp>
#include <packswap/solve.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"
#include "moved_bound.hpp"
#include "presets.hpp"
#include "stress.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

using namespace packswap;

namespace {

struct completion_answer {
  bool ok = false;
  std::int64_t fill_lo = 0, fill_hi = 0;
};

// The definition, in O(k): u(j) = j + 1 - held(<= j) >= 0, R(j) = min over j' >= j of u(j'), the
// slack used at j (u(j) - R(j)) within what the level has left; the free slots receive
// R(j) - R(j - 1) packs of level j.
completion_answer completable(const std::vector<std::int32_t>& cnt,
                              const std::vector<std::int64_t>& slack_left,
                              const std::vector<std::int64_t>& lo,
                              const std::vector<std::int64_t>& hi) {
  const std::size_t k = cnt.size();
  std::vector<std::int64_t> u(k);
  std::int64_t held = 0;
  completion_answer a;
  a.ok = true;
  for (std::size_t j = 0; j < k; ++j) {
    held += cnt[j];
    u[j] = static_cast<std::int64_t>(j) + 1 - held;
    a.ok &= u[j] >= 0;
  }
  std::vector<std::int64_t> r(k);
  for (std::size_t j = k; j-- > 0;) {
    r[j] = j + 1 == k ? u[j] : std::min(u[j], r[j + 1]);
    if (u[j] - r[j] > slack_left[j]) {
      a.ok = false;
    }
  }
  for (std::size_t j = 0; j < k; ++j) {
    const std::int64_t received = r[j] - (j == 0 ? 0 : r[j - 1]);
    a.fill_lo += received * lo[j];
    a.fill_hi += received * hi[j];
  }
  return a;
}

// What every answer of stage 2 keeps, whether the search or the fallback gave it: A exact (one
// pack per cell), B within (1 + eps) of stage 1's, and no more bytes moved than stage 1 moves.
void check_keeps_stage1(const std::vector<pack_meta>& packs, const shape& s,
                        const solve_options& opt, const solution& sol) {
  CHECK(sol.balance.a == sol.balance.lb_a);
  CHECK(sol.balance.b <= detail::relax(sol.stage1_b, detail::eps_ppm(opt.eps)));
  solve_options stage1 = opt;
  stage1.refine = false;
  CHECK(sol.movement.moved_bytes <= solve(packs, s, stage1).movement.moved_bytes);
}

// The stress set's batch (s, d, seed) solved at eps = 0, as the CLI does, after the checks every
// answer passes (check_keeps_stage1); the tests below check how its search ended.
solution solve_stress_eps0(const shape& s, test::stress::dist d, int seed) {
  const auto packs = test::stress::batch(s, d, static_cast<std::uint64_t>(seed));
  const solve_options opt{};
  const auto sol = solve(packs, s, opt);
  INFO(test::stress::name(d) << " seed=" << seed << " work=" << sol.stage2_work);
  check_keeps_stage1(packs, s, opt, sol);
  return sol;
}

// What refine_sorted gives stage 2 for `packs`: stage 1's micro-step maxima as caps (relaxed by
// eps in per_step mode), its B relaxed by eps as the limit, the packs by cost descending.
struct stage2_input {
  std::vector<std::int64_t> caps;
  std::int64_t limit = 0;
  std::vector<std::int32_t> order;
};
stage2_input stage2_input_for(const std::vector<pack_meta>& packs, const shape& s, double eps,
                              bool per_step) {
  std::vector<std::int64_t> costs(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    costs[p] = packs[p].cost;
  }
  const auto stage1 = balance(costs, s);
  detail::load_profile loads;
  std::vector<std::int64_t> table;
  detail::profile_loads(costs, stage1, s, loads, table);
  const std::int64_t ppm = detail::eps_ppm(eps);
  stage2_input in;
  in.caps.assign(loads.step_max.begin(), loads.step_max.end());
  for (auto& c : in.caps) {
    c = per_step ? detail::relax(c, ppm) : c;
  }
  std::sort(in.caps.begin(), in.caps.end(), std::greater<>());
  in.limit = detail::relax(loads.b(), ppm);
  in.order = detail::order_desc(costs);
  return in;
}

// The stage-2 engine refine_sorted prepares for `packs` (stage2_input_for); no work limit.
detail::home_first engine_for(const std::vector<pack_meta>& packs, const shape& s, double eps,
                              bool per_step) {
  const auto in = stage2_input_for(packs, s, eps, per_step);
  return detail::home_first(packs, s, topology{}, in.caps, in.limit, in.order);
}

// Where the fallback's settle of `packs` starts: the batch, stage 1 with its ranks renamed to
// keep the most bytes home (refine_sorted), the bytes that moves, and the settle's work
// allowance.
struct settle_start {
  std::vector<pack_meta> packs;
  assignment renamed;
  std::int64_t before = 0;
  std::int64_t allowance = 0;
};
settle_start settle_start_of(std::vector<pack_meta> packs, const shape& s) {
  settle_start a;
  a.packs = std::move(packs);
  std::vector<std::int64_t> costs(a.packs.size());
  for (std::size_t p = 0; p < a.packs.size(); ++p) {
    costs[p] = a.packs[p].cost;
  }
  a.renamed = detail::relabel_valid(a.packs, s, balance(costs, s), topology{});
  a.before = measure_movement(a.packs, a.renamed, s).moved_bytes;
  a.allowance = detail::fallback_allowance(s.packs());
  return a;
}
// The same for the stress set's bimodal batch (s, seed).
settle_start bimodal_settle_start(const shape& s, int seed) {
  return settle_start_of(
      test::stress::batch(s, test::stress::dist::bimodal, static_cast<std::uint64_t>(seed)), s);
}

// The weighted bytes moved once `a` is settled at eps = 0, two passes within `limit` units of
// work, as the fallback runs; `work` the units spent.
std::int64_t settled(const settle_start& a, const shape& s, std::int64_t limit,
                     std::int64_t& work) {
  auto engine = engine_for(a.packs, s, 0, false);
  engine.limit_work(limit);
  engine.settle(a.renamed, 2);
  work = engine.work();
  return engine.weighted_moved();
}

using test::preset_batch; // as the benchmarks cut it

// A workload preset's batch (s, seed) solved at eps = 0, as solve_stress_eps0 does.
solution solve_preset_eps0(const char* preset, const shape& s, std::uint64_t seed) {
  const auto packs = preset_batch(preset, s, seed);
  const solve_options opt{};
  const auto sol = solve(packs, s, opt);
  INFO(preset << " seed=" << seed << " work=" << sol.stage2_work);
  check_keeps_stage1(packs, s, opt, sol);
  return sol;
}

// A and B of the engine's current placement of `packs`.
balance_metrics balance_of(const std::vector<pack_meta>& packs, const shape& s,
                           const detail::home_first& engine) {
  assignment a;
  std::vector<std::size_t> used;
  engine.cells(a, used);
  return measure_balance(test::costs_of(packs), a, s);
}

// Pins, fills and re-deals `packs` at eps = 0 as the first attempt does (tuning t); how many ranks
// end above the limit.
std::int32_t over_after_redeal(const std::vector<pack_meta>& packs, const shape& s,
                               const detail::stage2::tuning& t) {
  const auto in = stage2_input_for(packs, s, 0, false);
  detail::stage2::state st;
  st.prepare(packs, s, topology{}, in.caps, in.limit, in.order);
  st.reset();
  detail::stage2::pin_phase pin;
  detail::stage2::fill_phase fill;
  detail::stage2::redeal_phase redeal;
  pin.run(st, t);
  fill.run(st);
  redeal.run(st, t);
  std::int32_t over = 0;
  for (std::size_t r = 0; r < st.dp; ++r) {
    over += st.load[r] > st.limit ? 1 : 0;
  }
  return over;
}

// A stage-2 state over random packs of shape s (costs 0 to 3 ga, random homes; caps 3 (ga - j),
// so a rank may hold any number of packs of a level), ga packs dealt to each rank at random.
// `few`: costs from three values only (0, k and 3k units), so that the first and last levels hold
// about a third of the packs each, as ties across many levels give.
detail::stage2::state random_dealt_state(prng& rng, const shape& s, std::int64_t unit = 1,
                                         bool few = false) {
  const auto k = static_cast<std::size_t>(s.ga);
  const auto n = static_cast<std::size_t>(s.packs());
  std::vector<pack_meta> packs(n);
  for (std::size_t p = 0; p < n; ++p) {
    const auto kk = static_cast<std::int64_t>(k);
    const std::int64_t three[] = {0, kk, 3 * kk};
    packs[p].cost = (few ? three[rng.below(3)] : rng.uniform(0, kk * 3)) * unit;
    packs[p].bytes = rng.uniform(1, 100);
    packs[p].source_rank = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.dp)));
  }
  std::vector<std::int64_t> costs(n);
  for (std::size_t p = 0; p < n; ++p) {
    costs[p] = packs[p].cost;
  }
  const auto order = detail::order_desc(costs); // by cost descending, ties by id
  std::vector<std::int64_t> caps(k);
  for (std::size_t j = 0; j < k; ++j) { // non-increasing, caps[0] above every cost
    caps[j] = static_cast<std::int64_t>(3 * (k - j)) * unit;
  }
  detail::stage2::state st;
  st.prepare(packs, s, topology{}, caps, 0, order);
  st.reset();
  // Ranks of k packs each, in a random deal.
  std::vector<std::size_t> deal(n);
  for (std::size_t p = 0; p < n; ++p) {
    deal[p] = p / k;
  }
  for (std::size_t p = n; p-- > 1;) {
    std::swap(deal[p], deal[static_cast<std::size_t>(rng.below(p + 1))]);
  }
  for (std::size_t p = 0; p < n; ++p) {
    st.place(p, deal[p]);
  }
  return st;
}

// The first global batch (s, seed) of workload preset `preset` at eps = 0: without crowd rounds
// (t.crowd_min above dp) its re-deal leaves a crowd of ranks above the limit (an eighth of them or
// more); with them, none; and the first attempt then succeeds with under a quarter of the work.
void check_crowd_unlocked(const char* preset, const shape& s, std::uint64_t seed) {
  detail::stage2::tuning crowd;
  detail::stage2::tuning no_crowd;
  no_crowd.crowd_min = std::numeric_limits<std::int32_t>::max();
  const auto packs = preset_batch(preset, s, seed);
  INFO(preset << " dp=" << s.dp << " ga=" << s.ga << " seed=" << seed);
  CHECK(8 * over_after_redeal(packs, s, no_crowd) >= s.dp); // a crowd
  CHECK(over_after_redeal(packs, s, crowd) == 0);
  auto with = engine_for(packs, s, 0, false);
  auto without = with;
  REQUIRE(with.run(crowd));
  REQUIRE(without.run(no_crowd));
  INFO("work " << with.work() << " without the crowd " << without.work());
  CHECK(4 * with.work() < without.work());
}

} // namespace

TEST_CASE_TEMPLATE("min_add_tree answers range minima and last-below queries like a plain array", V,
                   std::int32_t, std::int64_t) {
  prng rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    // Flat and tree; a third of the trees exactly fill their leaves (n a power of two), where
    // a range over every value reaches the root.
    const auto n = rng.chance(1, 3) ? std::size_t{128} << rng.below(2)
                                    : static_cast<std::size_t>(rng.uniform(1, 200));
    std::vector<V> v(n);
    for (auto& x : v) {
      x = static_cast<V>(rng.uniform(-20, 20));
    }
    detail::stage2::min_add_tree<V> tree;
    tree.assign(v.data(), n);
    for (int op = 0; op < 60; ++op) {
      // Any range, or one from the first value, to the last, or both (as the pin asks).
      const auto ends = rng.below(4);
      const auto a = ends == 1 || ends == 3 ? 0 : static_cast<std::size_t>(rng.below(n + 1));
      const auto b = ends >= 2 ? n
                               : static_cast<std::size_t>(rng.uniform(
                                     static_cast<std::int64_t>(a), static_cast<std::int64_t>(n)));
      if (rng.chance(1, 2)) {
        const auto d = static_cast<V>(rng.uniform(-3, 3));
        tree.add(a, b, d);
        for (std::size_t i = a; i < b; ++i) {
          v[i] += d;
        }
      }
      V m = detail::stage2::min_add_tree<V>::none;
      for (std::size_t i = a; i < b; ++i) {
        m = std::min(m, v[i]);
      }
      CHECK(tree.min(a, b) == m);
      const auto t = static_cast<V>(rng.uniform(-25, 25));
      std::ptrdiff_t last = -1;
      for (std::size_t i = 0; i < b; ++i) {
        if (v[i] < t) {
          last = static_cast<std::ptrdiff_t>(i);
        }
      }
      CHECK(tree.last_below(b, t) == last);
    }
  }
}

TEST_CASE_TEMPLATE("completion tracks whether a rank stays completable as packs come and go", V,
                   std::int32_t, std::int64_t) {
  // Slack left runs up to far past what int32 holds (the tree keeps it within range).
  prng rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const auto k = static_cast<std::size_t>(rng.uniform(1, 160)); // flat and tree
    std::vector<std::int64_t> slack(k), lo(k), hi(k);
    for (std::size_t j = 0; j < k; ++j) {
      slack[j] = rng.chance(1, 2)   ? 0
                 : rng.chance(1, 8) ? rng.uniform(0, std::int64_t{1} << 40)
                                    : rng.uniform(0, 3);
      lo[j] = rng.uniform(0, 1000);
      hi[j] = lo[j] + rng.uniform(0, 1000);
    }
    std::vector<std::int32_t> cnt(k, 0);
    detail::stage2::completion<V> tree;
    tree.build(cnt.data(), k, slack.data(), lo.data(), hi.data());
    for (int op = 0; op < 80; ++op) {
      const auto l = static_cast<std::size_t>(rng.below(k));
      if (cnt[l] > 0 && rng.chance(1, 3)) {
        --cnt[l];
        tree.remove(l);
      } else {
        auto after = cnt;
        ++after[l];
        const auto want = completable(after, slack, lo, hi);
        std::size_t j0 = 0;
        const bool can = tree.can_add(l, j0);
        REQUIRE(can == want.ok);
        if (!can) {
          continue;
        }
        CHECK(tree.fill_lo_after_add(j0) == want.fill_lo);
        cnt = after;
        tree.add(l, j0);
      }
      const auto now = completable(cnt, slack, lo, hi);
      REQUIRE(now.ok);
      CHECK(tree.fill_lo == now.fill_lo);
      CHECK(tree.fill_hi == now.fill_hi);
    }
  }
}

TEST_CASE("state keeps full_from and level_excess exact through swaps across levels") {
  // Random placements (crowded levels included) of random level sets, then random swaps: after
  // each, both ranks' full_from rows, crowded counts and level_excess match their definitions
  // over the level counts, whether the row was up to date before the swap (updated in place) or
  // not (rebuilt).
  prng rng(23);
  for (int trial = 0; trial < 60; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(1, 6)),
                  static_cast<std::int32_t>(rng.uniform(1, 80)), 1};
    const auto k = static_cast<std::size_t>(s.ga);
    const auto n = static_cast<std::size_t>(s.packs());
    auto st = random_dealt_state(rng, s);
    const auto check_rank = [&](std::size_t r) {
      std::vector<std::int32_t> want(k);
      std::int32_t prefix = 0;
      std::int32_t excess = 0;
      std::int32_t crowded = 0;
      for (std::size_t j = 0; j < k; ++j) {
        prefix += st.cnt[r * k + j];
        excess = std::max(excess, prefix - static_cast<std::int32_t>(j) - 1);
        crowded += prefix > static_cast<std::int32_t>(j) + 1 ? 1 : 0;
      }
      for (std::size_t j = 0; j < k; ++j) {
        want[j] = static_cast<std::int32_t>(k);
        std::int32_t held = 0;
        for (std::size_t i = 0; i < k; ++i) {
          held += st.cnt[r * k + i];
          if (i >= j && held >= static_cast<std::int32_t>(i) + 1) {
            want[j] = static_cast<std::int32_t>(i);
            break;
          }
        }
      }
      CHECK(st.level_excess(r) == excess);
      const std::int32_t* f = st.full_from(r);
      CHECK(std::vector<std::int32_t>(f, f + k) == want);
      CHECK(st.crowded_levels[r] == crowded);
    };
    for (int op = 0; op < 200; ++op) {
      const auto x = static_cast<std::size_t>(rng.below(n));
      const auto y = static_cast<std::size_t>(rng.below(n));
      const auto a = static_cast<std::size_t>(st.pk[x].rank);
      const auto b = static_cast<std::size_t>(st.pk[y].rank);
      if (a == b) {
        continue;
      }
      if (rng.chance(1, 8)) { // a rank whose row goes stale: rebuilt on its next query
        st.unplace(x);
        st.place(x, a);
      }
      st.swap_packs(x, y);
      INFO("trial " << trial << " op " << op);
      check_rank(a);
      check_rank(b);
    }
  }
}

TEST_CASE("rebuild_places lists every rank's packs after swaps that left the places behind") {
  // Random placements, then random swaps with the places left alone (as the bring-home does with
  // many levels): rebuild_places gives every rank exactly its packs, each pack's slot its place,
  // and each place its pack's record.
  prng rng(29);
  for (int trial = 0; trial < 40; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(2, 6)),
                  static_cast<std::int32_t>(rng.uniform(1, 80)), 1};
    const auto k = static_cast<std::size_t>(s.ga);
    const auto n = static_cast<std::size_t>(s.packs());
    auto st = random_dealt_state(rng, s);
    st.places_live = false;
    for (int op = 0; op < 100; ++op) {
      const auto x = static_cast<std::size_t>(rng.below(n));
      const auto y = static_cast<std::size_t>(rng.below(n));
      if (st.pk[x].rank != st.pk[y].rank) {
        st.swap_packs(x, y);
      }
    }
    st.rebuild_places();
    INFO("trial " << trial);
    CHECK(st.places_live);
    std::vector<std::size_t> held(st.dp, 0);
    for (std::size_t p = 0; p < n; ++p) {
      ++held[static_cast<std::size_t>(st.pk[p].rank)];
    }
    for (std::size_t r = 0; r < st.dp; ++r) {
      REQUIRE(st.used[r] == held[r]);
      for (std::size_t i = 0; i < st.used[r]; ++i) {
        const auto& at = st.items[r * k + i];
        const auto p = static_cast<std::size_t>(at.pack);
        CHECK(static_cast<std::size_t>(st.pk[p].rank) == r);
        CHECK(static_cast<std::size_t>(st.pk[p].slot) == i);
        CHECK(at.home == st.pk[p].home);
        CHECK(at.level == st.pk[p].level);
        CHECK(at.cost == st.pk[p].cost);
        CHECK(at.bytes == st.pk[p].bytes);
      }
    }
  }
}

TEST_CASE("state keeps the rows of packs away from home exact through swaps") {
  // Random deals (a rank may hold any number of packs of a level, some of them home), the rows
  // built, then random swaps: after each, every row entry of both ranks is the first pack of its
  // level list away from home (so that the rows' answers do not depend on how they are kept),
  // with its cost less the level's cheapest, exactly where the rank holds one
  // (state::ensure_away_rows); and so after the lists and the rows are rebuilt. Half the trials in
  // a unit so fine that the offsets need 64 bits (state::wide_rows); half with costs from three
  // values, whose crowded levels link their away packs (state::away_listed).
  prng rng(29);
  int listed = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(2, 6)),
                  static_cast<std::int32_t>(rng.uniform(1, 120)), 1};
    const bool wide = trial % 2 == 1;
    const bool few = trial % 4 >= 2;
    auto st = random_dealt_state(rng, s, wide ? std::int64_t{1} << 30 : 1, few);
    const std::size_t k = st.k;
    st.ensure_away_rows();
    REQUIRE(st.wide_rows() == (wide && st.widest_spread[0] > 0));
    listed += st.any_listed ? 1 : 0;
    const auto offset_at = [&](std::size_t at) {
      return st.wide_rows() ? st.away_offset_wide[at] : std::int64_t{st.away_offset[at]};
    };
    const std::int64_t none =
        st.wide_rows() ? detail::stage2::state::no_offset_wide : detail::stage2::state::no_offset;
    const auto check_rank = [&](std::size_t r) {
      for (std::size_t l = 0; l < k; ++l) {
        const std::size_t at = r * k + st.spread_pos[l];
        std::int32_t away = 0;
        for (std::size_t p = 0; p < st.n; ++p) {
          away += st.pk[p].rank == static_cast<std::int32_t>(r) &&
                          st.pk[p].level == static_cast<std::int32_t>(l) && st.src(p) != r
                      ? 1
                      : 0;
        }
        INFO("rank " << r << " level " << l << " away " << away);
        if (away == 0) {
          CHECK(st.away_pack[at] == -1);
          CHECK(offset_at(at) == none);
          continue;
        }
        REQUIRE(st.away_pack[at] >= 0);
        const auto p = static_cast<std::size_t>(st.away_pack[at]);
        CHECK(st.pk[p].rank == static_cast<std::int32_t>(r));
        CHECK(st.pk[p].level == static_cast<std::int32_t>(l));
        CHECK(st.src(p) != r);
        std::int32_t first = st.at_level[r * k + l];
        while (first >= 0 && st.src(static_cast<std::size_t>(first)) == r) {
          first = st.next_at_level[static_cast<std::size_t>(first)];
        }
        CHECK(st.away_pack[at] == first);
        CHECK(offset_at(at) == st.pk[p].cost - st.spread_floor[st.spread_pos[l]]);
      }
    };
    for (int op = 0; op < 150; ++op) {
      const auto x = static_cast<std::size_t>(rng.below(st.n));
      const auto y = static_cast<std::size_t>(rng.below(st.n));
      const auto a = static_cast<std::size_t>(st.pk[x].rank);
      const auto b = static_cast<std::size_t>(st.pk[y].rank);
      if (a == b) {
        continue;
      }
      st.swap_packs(x, y);
      INFO("trial " << trial << " op " << op);
      check_rank(a);
      check_rank(b);
    }
    st.index_levels(); // as after a re-deal: the rows go with the lists, rebuilt when needed
    CHECK_FALSE(st.rows_live);
    st.ensure_away_rows();
    for (std::size_t r = 0; r < st.dp; ++r) {
      check_rank(r);
    }
  }
  CHECK(listed >= 10); // the linked path ran
}

TEST_CASE("stage 2's work stays under its bound on the stress set, and its answers keep A and B") {
  // Every stress distribution and probe beyond the set, shapes from ga 16 to 1,024 (the bound is
  // hit on some of them), three eps: the searches' work never exceeds stage2_work_bound (linear in
  // the pack count), A stays exact, B within (1 + eps) of stage 1's, and no more bytes move than
  // stage 1's. Fewer under the sanitizers (tests/refine/CMakeLists.txt defines
  // PACKSWAP_TEST_SANITIZED).
#ifdef PACKSWAP_TEST_SANITIZED
  const shape shapes[] = {{4, 256, 1}, {64, 16, 1}};
  const int seeds = 1;
#else
  // 16 x 1,024 and 1,024 x 16 (16,384 packs) hit the bound on the hardest distributions.
  const shape shapes[] = {{4, 256, 1},  {8, 128, 1},  {16, 64, 1},   {64, 16, 1},  {2, 512, 1},
                          {16, 256, 1}, {4, 1024, 1}, {16, 1024, 1}, {1024, 16, 1}};
  const int seeds = 2;
#endif
  int bounded = 0;
  std::vector<test::stress::dist> dists(std::begin(test::stress::all_dists),
                                        std::end(test::stress::all_dists));
  dists.insert(dists.end(), std::begin(test::stress::probe_dists),
               std::end(test::stress::probe_dists));
  for (const auto d : dists) {
    for (const auto& s : shapes) {
      for (const double eps : {0.0, 0.001, 0.01}) {
        for (int seed = 1; seed <= seeds; ++seed) {
          const auto packs = test::stress::batch(s, d, static_cast<std::uint64_t>(seed));
          solve_options opt;
          opt.eps = eps;
          const auto sol = solve(packs, s, opt);
          INFO(test::stress::name(d)
               << " dp=" << s.dp << " ga=" << s.ga << " eps=" << eps << " seed=" << seed);
          CHECK(sol.stage2_work <= detail::stage2_work_bound(s.packs(), s.ga));
          check_keeps_stage1(packs, s, opt, sol);
          bounded += sol.stage2_bounded ? 1 : 0;
        }
      }
    }
  }
#ifdef PACKSWAP_TEST_SANITIZED
  (void)bounded; // the sanitized shapes are too small to reach the bound
#else
  CHECK(bounded > 0); // the bound is exercised
#endif
}

TEST_CASE("a repair that cannot end within the work bound gives up early, keeping A and B") {
  // Bimodal costs at eps = 0 with 4,096 ranks: the repair lowers the excess too slowly to end
  // within the bound, and gives up at its pace (repair_pace::hopeless) well before it: the work
  // reported, the fallback's included, stays below the search's bound alone. The answer is the
  // fallback's, as at the bound: at 65,536 packs, a settle that weighs a few compensating pairs
  // per visit (bring_home_phase::capped_settle_from).
#ifdef PACKSWAP_TEST_SANITIZED
  const int seeds = 0; // 65,536 packs: too slow under the sanitizers
#else
  const int seeds = 2;
#endif
  const shape s{4096, 16, 1};
  for (int seed = 2; seed < 2 + seeds; ++seed) {
    const auto sol = solve_stress_eps0(s, test::stress::dist::bimodal, seed);
    INFO("seed=" << seed << " work=" << sol.stage2_work);
    CHECK(sol.stage2_bounded);
    CHECK(sol.stage2_work < detail::stage2_search_bound(s.packs()));
  }
}

TEST_CASE("the repair's pace is judged against the whole bound, the fallback's part included") {
  // high-res at dp 1,024 x ga 16, eps = 0, seeds 57 and 84 (benchmark workload batches): the
  // search succeeds after about half a million units, near the search's part of the bound
  // (stage2_search_bound, which leaves the fallback's allowance). Judged against that part alone,
  // its pace would have given up for the fallback (0.58-0.59 of Karmarkar-Karp's bytes instead
  // of 0.47-0.48); judged against the whole bound (repair_pace::judged_limit), it runs as it did
  // before the fallback's allowance was kept back.
  const shape s{1024, 16, 1};
  for (const std::uint64_t seed : {57, 84}) {
    const auto sol = solve_preset_eps0("high-res", s, seed);
    INFO("seed=" << seed << " work=" << sol.stage2_work);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(2 * sol.stage2_work > detail::stage2_search_bound(s.packs()));
  }
}

TEST_CASE("with many levels, a repair that stalls gives up long before the work bound") {
  // Log-normal costs at eps = 0 on 16 ranks of 1,024 levels: each repair step reads tens of
  // thousands of units, the repair sheds most of the excess in its first steps and then stalls.
  // The pace, judged from the 4th step and over the recent work (repair_pace::hopeless), ends
  // the search well before its bound (judged as with few levels, it spends all of it, 1.05 M
  // units with the fallback's): the work reported, the fallback's included, stays under two
  // thirds of the bound (stage2_bound), and the answer is the fallback's, keeping A and B.
  const shape s{16, 1024, 1};
  const std::int64_t bound = detail::stage2_bound(s.packs());
  for (int seed = 1; seed <= 2; ++seed) {
    const auto sol = solve_stress_eps0(s, test::stress::dist::lognormal, seed);
    INFO("seed=" << seed << " work=" << sol.stage2_work);
    CHECK(sol.stage2_bounded);
    CHECK(3 * sol.stage2_work < 2 * bound);
  }
}

TEST_CASE("a search that moves a giant pack away is weighed against the fallback") {
  // Pareto costs with three giant packs (each about a tenth of the batch's bytes) at eps = 0: the
  // search succeeds, but the pin gives up every giant (with it, its rank could not be completed
  // with the band's cheap packs of its other levels) and the fill deals them to other ranks. The
  // renaming keeps the giants home, so the fallback (stage 1 renamed, then brought home within
  // its allowance, as refine_sorted runs it) moves under half the search's bytes, and the answer
  // must move no more than it.
  const shape s{1024, 16, 1};
  for (int seed = 1; seed <= 2; ++seed) {
    const auto packs =
        test::stress::batch(s, test::stress::dist::pareto, static_cast<std::uint64_t>(seed));
    const auto sol = solve_stress_eps0(s, test::stress::dist::pareto, seed);
    auto engine = engine_for(packs, s, 0, false);
    REQUIRE(engine.run(detail::home_first::tuning{}));
    const std::int64_t searched = engine.weighted_moved();
    const auto start = settle_start_of(packs, s);
    engine.limit_work(start.allowance);
    engine.settle(start.renamed, 2);
    const std::int64_t fallback = engine.weighted_moved();
    INFO("seed=" << seed << " search " << searched << " fallback " << fallback);
    CHECK(2 * fallback < searched);
    CHECK(sol.movement.moved_bytes <= fallback);
    CHECK_FALSE(sol.stage2_bounded);
  }
}

TEST_CASE("a search that moves more than half of stage 1's bytes is weighed where renaming does") {
  // The probe `geometric` (costs 2^u microseconds) at eps = 0 on 1,024 ranks of 16 levels: the
  // search succeeds but moves more than half of stage 1's bytes, no pack of them 1/64 of the
  // batch's, while stage 1 renamed alone moves fewer. The fallback is computed too, and the
  // answer must move no more than it, and fewer bytes than the search.
  const shape s{1024, 16, 1};
  const auto d = test::stress::dist::geometric;
  const auto packs = test::stress::batch(s, d, 1);
  const auto sol = solve_stress_eps0(s, d, 1);
  auto engine = engine_for(packs, s, 0, false);
  REQUIRE(engine.run(detail::home_first::tuning{}));
  const std::int64_t searched = engine.weighted_moved();
  const auto start = settle_start_of(packs, s);
  std::vector<std::int64_t> costs;
  for (const auto& p : packs) {
    costs.push_back(p.cost);
  }
  const std::int64_t stage1 = measure_movement(packs, balance(costs, s), s).moved_bytes;
  engine.limit_work(start.allowance);
  engine.settle(start.renamed, 2);
  const std::int64_t fallback = engine.weighted_moved();
  INFO("search " << searched << " fallback " << fallback << " renamed " << start.before
                 << " stage 1 " << stage1);
  CHECK(2 * searched > stage1);
  CHECK(start.before < searched);
  CHECK(sol.movement.moved_bytes <= fallback);
  CHECK(sol.movement.moved_bytes < searched);
}

TEST_CASE("a repair that ends with a few ranks just above the limit is trimmed, not given up") {
  // Costs uniform to the microsecond (`uniform`) at eps = 0: Karmarkar-Karp leaves every rank
  // within a few microseconds of the limit, and the search that keeps most packs home ends with
  // a few ranks above it by less than a single swap of the repair can carry. The trim clears
  // each with one or two same-level swaps with one partner (stage2::trim_phase), so the search
  // succeeds within its bound and moves within 1% of the lower bound on moved bytes. (Without
  // it, these three searches give up and the fallback moves 0.76-0.91 of Karmarkar-Karp's bytes,
  // about twice the bound.)
  const std::pair<shape, int> batches[] = {{{64, 256, 1}, 1}, {{64, 256, 1}, 2}, {{8, 1024, 1}, 3}};
  for (const auto& batch : batches) {
    // Copied, not bound: clang 14 does not let INFO's lambda capture a structured binding.
    const shape s = batch.first;
    const int seed = batch.second;
    const auto packs =
        test::stress::batch(s, test::stress::dist::uniform, static_cast<std::uint64_t>(seed));
    const auto sol = solve_stress_eps0(s, test::stress::dist::uniform, seed);
    const std::int64_t bound = test::moved_lower_bound(packs, s);
    INFO("dp=" << s.dp << " seed=" << seed << " moved " << sol.movement.moved_bytes
               << " lower bound " << bound);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(100 * sol.movement.moved_bytes <= 101 * bound);
  }
}

TEST_CASE("an attempt whose repair rounds get no nearer ends early, keeping A and B") {
  // Log-normal, heavy-rank and byte-tied costs at eps = 0 on 4,096 ranks of 4 levels: every
  // attempt's repair gets stuck on one rank a few hundred microseconds over the limit, and each
  // round that releases its pins ends at the same excess. The second such round ends the
  // attempt (home_first::run): the three attempts and the fallback take under a quarter of the
  // bound (stage2_bound; all five rounds of every attempt: about a third), and the answer is the
  // fallback's, keeping A and B; the bound is not what ended the search.
  const shape s{4096, 4, 1};
  const std::pair<test::stress::dist, int> batches[] = {{test::stress::dist::lognormal, 2},
                                                        {test::stress::dist::heavy_rank, 2},
                                                        {test::stress::dist::bytes_tied, 1}};
  for (const auto& batch : batches) {
    const auto sol = solve_stress_eps0(s, batch.first, batch.second);
    INFO(test::stress::name(batch.first)
         << " seed=" << batch.second << " work=" << sol.stage2_work);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(4 * sol.stage2_work < detail::stage2_bound(s.packs()));
  }
}

TEST_CASE("in a large batch with few levels, a repair that slows steadily gives up early") {
  // Bimodal costs at eps = 0 on 1,024 ranks of 16 levels: each repair step sheds less excess
  // than the one before, and the repair would need several times the work bound. The pace over
  // the recent work (repair_pace::hopeless, batches of 16,384 packs or more) ends the search:
  // the work reported, the fallback's included, stays under three fifths of the bound
  // (stage2_bound; judged by the pace since the start alone, the search gives up later and the
  // work reported is 1.07 M and 1.11 M units, past that bound; by the recent pace at twice its
  // rate, 0.69 M and 0.77 M), and the answer is the fallback's, keeping A and B.
  const shape s{1024, 16, 1};
  for (int seed = 1; seed <= 2; ++seed) {
    const auto sol = solve_stress_eps0(s, test::stress::dist::bimodal, seed);
    INFO("seed=" << seed << " work=" << sol.stage2_work);
    CHECK(sol.stage2_bounded);
    CHECK(5 * sol.stage2_work < 3 * detail::stage2_bound(s.packs()));
  }
}

TEST_CASE("an attempt that starts from an earlier attempt's pins and re-deal repeats it exactly") {
  // The chained attempt after the wide band fails starts from the placement the wide attempt's
  // first repair began with (stage2::start_snapshot) instead of pinning, filling and re-dealing
  // again: it must end exactly as the same attempt run first by an engine of its own. Without a
  // work limit, so that the two differ in nothing but the snapshot; both sync modes (per_step
  // relaxes the caps by eps too), eps 0 and 0.001.
  const shape shapes[] = {{1024, 4, 1}, {256, 16, 1}, {64, 64, 1}};
  const detail::home_first::tuning wide;
  detail::home_first::tuning chained = wide;
  chained.chains = true;
  int restored = 0;
  for (const auto d : test::stress::all_dists) {
    for (const auto& s : shapes) {
      for (const double eps : {0.0, 0.001}) {
        for (const bool per_step : {false, true}) {
          for (int seed = 1; seed <= 3; ++seed) {
            const auto packs = test::stress::batch(s, d, static_cast<std::uint64_t>(seed));
            auto first = engine_for(packs, s, eps, per_step);
            auto fresh = first; // as prepared, before any attempt
            if (first.run(wide)) {
              continue; // no second attempt to compare
            }
            ++restored;
            INFO(test::stress::name(d) << " dp=" << s.dp << " ga=" << s.ga << " eps=" << eps
                                       << (per_step ? " per-step" : "") << " seed=" << seed);
            const bool again = first.run(chained);
            CHECK(again == fresh.run(chained));
            CHECK(first.weighted_moved() == fresh.weighted_moved());
            if (again) {
              assignment a, b;
              std::vector<std::size_t> used;
              first.cells(a, used);
              fresh.cells(b, used);
              CHECK(a == b);
            }
          }
        }
      }
    }
  }
  CHECK(restored > 0); // the wide band fails on some of these batches
}

TEST_CASE("the re-deal unlocks a crowd of ranks just above the limit") {
  // Packed vlm-pretrain batches at eps = 0: Karmarkar-Karp's B lies within a hair of the mean
  // load, and the re-deal sweeps leave most ranks above it by less than the mean room, none of
  // them far; the repair would fix them one step each. Counted as far (t.crowd_min, see
  // redeal_phase::redeal_rounds), they unlock one home pack each and the sweeps leave no rank
  // above the limit; the attempt then succeeds with a fraction of the work and stays within the
  // limit as any attempt does.
#ifdef PACKSWAP_TEST_SANITIZED
  const shape shapes[] = {{256, 16, 1}};
#else
  const shape shapes[] = {{256, 16, 1}, {1024, 16, 1}};
#endif
  for (const auto& s : shapes) {
    for (std::uint64_t seed = 2; seed <= 3; ++seed) {
      check_crowd_unlocked("vlm-pretrain", s, seed);
    }
  }
}

TEST_CASE("a first re-deal round with no far rank unlocks a crowd just above the limit") {
  // Packed captioning batches at eps = 0: the sweeps leave a crowd of ranks above the limit by a
  // hair (0.01-0.02% of it on average), none of them far. The first round counts them as far
  // (redeal_phase::redeal_rounds) rather than ending the re-deal with nothing unlocked, and the
  // sweeps leave none above the limit: the attempt then succeeds with a fraction of the work the
  // repair would take to fix the crowd one step each (1,024 x 16 seed 1: 0.02 million units
  // against 0.37 million).
#ifdef PACKSWAP_TEST_SANITIZED
  const std::pair<shape, std::uint64_t> batches[] = {{{256, 16, 1}, 16}};
#else
  const std::pair<shape, std::uint64_t> batches[] = {
      {{256, 16, 1}, 16}, {{1024, 16, 1}, 1}, {{1024, 16, 1}, 4}};
#endif
  for (const auto& batch : batches) {
    check_crowd_unlocked("captioning", batch.first, batch.second);
  }
}

TEST_CASE("smaller batches' crowd rounds go on while the crowd is above the limit by a hair") {
  // Packed vlm-pretrain batches at eps = 0 whose last unlock round, a crowd round, still leaves a
  // crowd above the limit by a hair (0.003-0.005% of it on average; 1,024 x 16 seed 48: 875 ranks,
  // which the repair took 0.72 million units of work to fix one step each). Below 65,536 packs the
  // crowd rounds go on while the crowd is above the limit by at most 1/8,192 of it
  // (redeal_phase::redeal_rounds), and one more leaves none above it.
#ifdef PACKSWAP_TEST_SANITIZED
  const std::pair<shape, std::uint64_t> batches[] = {{{256, 16, 1}, 12}};
#else
  const std::pair<shape, std::uint64_t> batches[] = {{{256, 16, 1}, 12}, {{1024, 16, 1}, 48}};
#endif
  for (const auto& batch : batches) {
    const shape& s = batch.first; // not a structured binding: INFO captures it
    const std::uint64_t seed = batch.second;
    const auto packs = preset_batch("vlm-pretrain", s, seed);
    INFO("dp=" << s.dp << " ga=" << s.ga << " seed=" << seed);
    CHECK(over_after_redeal(packs, s, {}) == 0);
    auto engine = engine_for(packs, s, 0, false);
    REQUIRE(engine.run({}));
    CHECK(engine.work() < 4 * s.packs()); // a few units per pack
  }
}

TEST_CASE("the repair goes on past ranks it cannot fix, and all of them give up their pins") {
  // high-res at dp 4,096 x ga 4, eps = 0: four packs a rank, and the repair meets a rank no swap
  // helps after a few hundred steps. Ending each round there, one rank unlocking a round, took
  // 0.65, 0.63 and 0.90 million units of work (seeds 1-3, 0.62-0.86 of the bound, stage2_bound);
  // repairing the other ranks first and unlocking every rank passed over, 0.24, 0.12 and 0.28
  // million, keeping A and B.
  const shape s{4096, 4, 1};
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto sol = solve_preset_eps0("high-res", s, seed);
    INFO("seed=" << seed << " work=" << sol.stage2_work);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(3 * sol.stage2_work < detail::stage2_bound(s.packs()));
  }
}

#ifndef PACKSWAP_TEST_SANITIZED
TEST_CASE("in large batches the re-deal's crowd rounds go on while the crowd's excess falls") {
  // vlm-pretrain at dp 1,024 x ga 256 (262,144 packs), eps = 0, seed 3: the first crowd round
  // leaves more ranks above the limit than it found (932 against 918) but by much less in all
  // (4.70 million us against 7.85 million); the rounds that go on (redeal_phase::redeal_rounds,
  // from 65,536 packs) leave none above it, where the repair would take millions of units of
  // work.
  const shape s{1024, 256, 1};
  CHECK(over_after_redeal(preset_batch("vlm-pretrain", s, 3), s, {}) == 0);
}

TEST_CASE("in large batches a few ranks just above the limit unlock pins to cover their excess") {
  // pareto at dp 1,024 x ga 256 (262,144 packs), eps = 0: giant packs set the limit and the
  // other ranks keep much room, so the few ranks the sweeps leave above it are not far. Each
  // unlocks as many pins as its excess needs (redeal_phase::unlock_to_cover); the search then
  // ends with a fraction of the work it took when they unlocked none (seed 1: 3.97 million units,
  // stopped by the bound; seed 2: 6.35 million), and keeps A and B.
  const shape s{1024, 256, 1};
  for (int seed = 1; seed <= 2; ++seed) {
    const auto sol = solve_stress_eps0(s, test::stress::dist::pareto, seed);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(8 * sol.stage2_work < detail::stage2_bound(s.packs()));
  }
}

TEST_CASE("a repair short of work takes a partner's full fix without searching the cost index") {
  // multiples at dp 16,384 x ga 16 (262,144 packs), eps = 0: costs from 15 values, one to a
  // level, so the re-deal moves no load and the repair takes a cross-level swap for most ranks
  // over the limit; past the point where it would need more than half the work left
  // (repair_pace::hurried), a step takes the first partner's full fix. Searching the cost
  // index as well for one moving fewer bytes took 6.81 and 6.57 million units (0.76 and 0.74 of
  // the bound, stage2_bound; above the search's part of it); without, 5.47 and 5.25 million, with
  // A and B kept.
  const shape s{16384, 16, 1};
  for (int seed = 1; seed <= 2; ++seed) {
    const auto sol = solve_stress_eps0(s, test::stress::dist::multiples, seed);
    CHECK_FALSE(sol.stage2_bounded);
    CHECK(10 * sol.stage2_work < 7 * detail::stage2_bound(s.packs()));
  }
}
#endif

TEST_CASE("a large settle visits the heaviest packs first and ends passes that stop paying") {
  // Bimodal costs at eps = 0 on 1,024 ranks of 16 levels, settled from stage 1 renamed, within the
  // fallback's allowance (as refine_sorted runs it). The settle first builds its rows of packs away
  // from home (19,456 units here); then, heaviest first, a sixteenth of the allowance brings home
  // 66-71% of what the whole settle does (in input order, 12%), and each pass ends where its visits
  // stop paying (bring_home_phase::payoff): the settle ends within a third of its allowance (in
  // input order it spends 93% and 100% of it). Before the rows, with each visit's compensating
  // pairs weighed one by one, it brought home 4-5% less in about the same work.
  const shape s{1024, 16, 1};
  for (int seed = 1; seed <= 2; ++seed) {
    const auto a = bimodal_settle_start(s, seed);
    std::int64_t work = 0, prefix_work = 0, rows_work = 0;
    const std::int64_t whole = a.before - settled(a, s, a.allowance, work);
    // With no work to spend, the settle only builds its rows (bring_home_phase::run).
    CHECK(settled(a, s, 0, rows_work) == a.before);
    const std::int64_t prefix = a.before - settled(a, s, rows_work + a.allowance / 16, prefix_work);
    INFO("seed=" << seed << " brought home " << whole << " bytes in " << work << " units, "
                 << prefix << " in " << prefix_work << " (rows: " << rows_work << ")");
    CHECK(5 * prefix > 3 * whole);
    CHECK(3 * work < a.allowance);
  }
}

TEST_CASE("with many levels the settle weighs only compensating pairs that fit, read from rows") {
  // Bimodal costs at eps = 0 on 64 ranks of 256 levels, settled from stage 1 renamed within the
  // fallback's allowance (as refine_sorted runs it after a search gives up). Trading a pack home
  // needs a same-level pair of the two ranks to carry the load back within the limit, which
  // leaves a narrow range at eps = 0: weighed one by one, widest level first, a visit's eight
  // pairs rarely held one; read from the two ranks' rows (state::ensure_away_rows), only pairs
  // that fit are weighed.
  const shape s{64, 256, 1};
  for (int seed = 1; seed <= 3; ++seed) {
    const auto a = bimodal_settle_start(s, seed);
    std::int64_t work = 0;
    const std::int64_t after = settled(a, s, a.allowance, work);
    INFO("seed=" << seed << " moved " << a.before << " -> " << after << " in " << work << " units");
    // 0.58-0.61 of what the renamed stage 1 moves, both passes ending within the allowance;
    // weighing pairs one by one, 0.61-0.86, the allowance spent on seeds 2 and 3.
    CHECK(100 * after < 62 * a.before);
    CHECK(work < a.allowance);
  }
}

TEST_CASE("at crowded tied levels the settle tries the pack a row holds first") {
  // Multiples (costs from 15 values) at eps = 0 on 16 ranks of 1,024 levels, settled from stage 1
  // renamed within the fallback's allowance: the levels of equal caps share their packs, some 70
  // a rank. Reading the home rank's levels for each visit, the allowance lasted a few hundred
  // visits and the settle still moved 0.92-0.94 of the renamed stage 1's bytes; trying first the
  // pack the home rank's row holds at the visit's level (bring_home_phase::run), taken where it
  // fits, it moves 0.075-0.081 of them.
  const shape s{16, 1024, 1};
  for (const int seed : {3, 8}) {
    const auto a = settle_start_of(
        test::stress::batch(s, test::stress::dist::multiples, static_cast<std::uint64_t>(seed)), s);
    std::int64_t work = 0;
    const std::int64_t after = settled(a, s, a.allowance, work);
    INFO("seed=" << seed << " moved " << a.before << " -> " << after << " in " << work << " units");
    CHECK(10 * after < a.before);
    CHECK(work <= a.allowance + 16 * s.ga + 16384);
  }
}

TEST_CASE("the settle's rows take levels whose spread passes their 32-bit offsets") {
  // The high-res preset on 256 ranks of 64 levels at eps = 0 (as below), with its costs in
  // nanoseconds: the widest levels' spreads pass 2^28 units, and the rows hold 64-bit offsets
  // (state::wide_rows). The settle takes the same trades as in microseconds, with the same work
  // (0.45-0.50 of the renamed stage 1's bytes); weighing its pairs one by one, 0.59-0.66.
  const shape s{256, 64, 1};
  for (int seed = 1; seed <= 3; ++seed) {
    auto packs = preset_batch("high-res", s, static_cast<std::uint64_t>(seed));
    const auto micro = settle_start_of(packs, s);
    for (auto& p : packs) {
      p.cost *= 1000;
    }
    // Some level (a run of dp packs by cost) spans 2^28 units or more.
    std::vector<std::int64_t> costs = test::costs_of(packs);
    std::sort(costs.begin(), costs.end(), std::greater<>());
    std::int64_t widest = 0;
    for (std::size_t j = 0; j + 1 < costs.size(); j += static_cast<std::size_t>(s.dp)) {
      widest = std::max(widest, costs[j] - costs[j + static_cast<std::size_t>(s.dp) - 1]);
    }
    REQUIRE(widest >= detail::stage2::state::offset_bound);
    const auto nano = settle_start_of(packs, s);
    std::int64_t work_micro = 0;
    std::int64_t work_nano = 0;
    const std::int64_t in_micro = settled(micro, s, micro.allowance, work_micro);
    const std::int64_t in_nano = settled(nano, s, nano.allowance, work_nano);
    INFO("seed=" << seed << " renamed " << nano.before << " settled in us " << in_micro << " in ns "
                 << in_nano);
    CHECK(100 * in_nano < 51 * nano.before);
    CHECK(in_nano == in_micro);
    CHECK(work_nano == work_micro);
  }
}

TEST_CASE("with few levels the settle reads its compensating pairs from the rows too") {
  // The workload preset high-res (documents: one image of 48 to 64 patches a side per sample, 15%
  // text only) on ranks of 64 levels at eps = 0, settled from stage 1 renamed within the
  // fallback's allowance. The rows find a pair that fits where the home rank's items, weighed in
  // order, held none within a visit's eight: on 256 ranks 0.45-0.50 of the renamed stage 1's
  // bytes, against 0.59-0.66; beyond 65,536 packs too, from 32 levels (2,048 ranks, 131,072
  // packs: 0.53, against 0.73-0.74, both spending the allowance). With 16 levels, beyond 65,536
  // packs, the items are read as before (see bring_home_phase::run).
  struct settle_case {
    shape s;
    int seeds;
    std::int64_t most_percent; // of the renamed stage 1's bytes
  };
  const settle_case cases[] = {
      {{256, 64, 1}, 3, 51},
#ifndef PACKSWAP_TEST_SANITIZED // 131,072 packs: too slow under the sanitizers
      {{2048, 64, 1}, 2, 60},
#endif
  };
  for (const auto& c : cases) {
    for (int seed = 1; seed <= c.seeds; ++seed) {
      const auto a =
          settle_start_of(preset_batch("high-res", c.s, static_cast<std::uint64_t>(seed)), c.s);
      std::int64_t work = 0;
      const std::int64_t after = settled(a, c.s, a.allowance, work);
      INFO("dp=" << c.s.dp << " seed=" << seed << " moved " << a.before << " -> " << after << " in "
                 << work << " units");
      CHECK(100 * after < c.most_percent * a.before);
    }
  }
}

TEST_CASE("at eps = 0 a search moving over half of stage 1's bytes goes on from a looser limit") {
  // `high-res` batches on 64 ranks of 16 levels, at eps = 0: where the search succeeds moving
  // more than half of stage 1's bytes, rounds that bring packs home under a limit 0.1% looser and
  // repair back to it (home_first::loosen_and_repair) keep every rank within the limit and A
  // exact, and the answer moves no more than the best of them. On these batches the first round
  // already moves fewer bytes.
  const shape s{64, 16, 1};
  int tried = 0;
  int fewer = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const auto packs = preset_batch("high-res", s, seed);
    const auto in = stage2_input_for(packs, s, 0, false);
    const std::int64_t stage1 =
        measure_movement(packs, balance(test::costs_of(packs), s), s).moved_bytes;
    auto engine = engine_for(packs, s, 0, false);
    const std::int64_t bound = detail::stage2_search_bound(s.packs());
    engine.limit_work(bound);
    const detail::home_first::tuning wide;
    if (!engine.run(wide) || 2 * engine.weighted_moved() <= stage1) {
      continue;
    }
    ++tried;
    const std::int64_t searched = engine.weighted_moved();
    std::int64_t best = searched;
    engine.limit_work(std::min(bound, engine.work() * (1 + detail::loosened_work)));
    for (std::int32_t round = 0;
         round < detail::loosened_rounds &&
         engine.loosen_and_repair(wide, detail::relax(in.limit, detail::loosened_ppm));
         ++round) {
      const auto m = balance_of(packs, s, engine);
      INFO("seed=" << seed << " round " << round);
      CHECK(m.a == m.lb_a);
      CHECK(m.b <= in.limit);
      if (engine.weighted_moved() >= best) {
        break;
      }
      best = engine.weighted_moved();
    }
    const auto sol = solve(packs, s, solve_options{});
    INFO("seed=" << seed << " searched " << searched << " best round " << best << " answer "
                 << sol.movement.moved_bytes);
    check_keeps_stage1(packs, s, solve_options{}, sol);
    CHECK(sol.movement.moved_bytes <= best);
    fewer += best < searched ? 1 : 0;
  }
  INFO("tried " << tried << " fewer " << fewer);
  CHECK(tried > 0);
  CHECK(fewer == tried);
}

TEST_CASE("plan_rounds: which successful searches go on from a looser limit, and how") {
  using detail::plan_rounds;
  const std::int64_t eps0 = detail::eps_ppm(0.0);
  const std::int64_t eps1 = detail::eps_ppm(0.01);
  // eps = 0: above half of stage 1's bytes, more than two ranks, at most 8,192 packs.
  const auto tight = plan_rounds(eps0, 4096, 64, 501, 1000);
  CHECK(tight.rounds == detail::loosened_rounds);
  CHECK(tight.looser_ppm == detail::loosened_ppm);
  CHECK_FALSE(tight.light);
  CHECK(plan_rounds(eps0, 4096, 64, 500, 1000).rounds == 0); // exactly half
  CHECK(plan_rounds(eps0, 4096, 2, 900, 1000).rounds == 0);  // two ranks: two_ranks instead
  CHECK(plan_rounds(eps0, 16384, 1024, 900, 1000).rounds == 0);
  // eps = 1%: above two fifths, one light round, up to 16,384 packs.
  const auto roomy = plan_rounds(eps1, 16384, 1024, 401, 1000);
  CHECK(roomy.rounds == 1);
  CHECK(roomy.light);
  CHECK(roomy.looser_ppm == detail::roomy_round_ppm);
  CHECK(plan_rounds(eps1, 16384, 1024, 400, 1000).rounds == 0);
  CHECK(plan_rounds(eps1, 32768, 2048, 900, 1000).rounds == 0);
  CHECK(plan_rounds(detail::eps_ppm(0.001), 4096, 4, 450, 1000).rounds == 0); // half below 1%
  CHECK(plan_rounds(detail::eps_ppm(0.001), 4096, 4, 501, 1000).rounds == 1);
  // Byte counts as large as stage 2 takes (stage2_fits: up to int64 max / 4): the shares are
  // compared exactly, without overflow.
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 4;
  CHECK(plan_rounds(eps1, 4096, 4, huge / 5 * 2 + 1, huge).rounds == 1);
  CHECK(plan_rounds(eps1, 4096, 4, huge / 5 * 2 - 1, huge).rounds == 0);
  CHECK(plan_rounds(eps0, 4096, 4, huge / 2 + 1, huge).rounds == detail::loosened_rounds);
}

TEST_CASE("with room, a search moving over its share of stage 1's bytes goes on one round") {
  // At eps of 0.1% or more, a successful search that moves more than half of stage 1's bytes (two
  // fifths from eps = 1%) goes on with one round under a limit 0.2% looser, its repair lighter
  // (light_round_tuning). On these batches of 4,096 packs the round keeps A exact and every rank
  // within the limit, moves fewer bytes than the search, and the solve's answer is the round's.
  CHECK(detail::rounds_share(detail::eps_ppm(0.001)) == 500);
  CHECK(detail::rounds_share(detail::eps_ppm(0.009)) == 500);
  CHECK(detail::rounds_share(detail::eps_ppm(0.01)) == 400);
  CHECK(detail::rounds_share(detail::eps_ppm(0.05)) == 400);
  const detail::home_first::tuning wide;
  const auto light = detail::light_round_tuning(wide);
  CHECK(light.repair_picks < wide.repair_picks);
  CHECK(light.roomy_partners < wide.roomy_partners);
  CHECK(light.scan_limit < wide.scan_limit);
  struct example {
    test::stress::dist d;
    double eps;
    std::uint64_t seed;
  };
  const shape s{4, 1024, 1};
  for (const auto& e : {example{test::stress::dist::lognormal, 0.001, 2},
                        example{test::stress::dist::bimodal, 0.01, 1}}) {
    INFO(test::stress::name(e.d) << " eps=" << e.eps << " seed=" << e.seed);
    const auto packs = test::stress::batch(s, e.d, e.seed);
    const auto in = stage2_input_for(packs, s, e.eps, false);
    const std::int64_t stage1 =
        measure_movement(packs, balance(test::costs_of(packs), s), s).moved_bytes;
    auto engine = engine_for(packs, s, e.eps, false);
    const std::int64_t bound = detail::stage2_search_bound(s.packs());
    engine.limit_work(bound);
    REQUIRE(engine.run(wide));
    const std::int64_t searched = engine.weighted_moved();
    const std::int64_t ppm = detail::eps_ppm(e.eps);
    const auto plan = detail::plan_rounds(ppm, s.packs(), s.dp, searched, stage1);
    CHECK(plan.rounds == 1);
    CHECK(plan.light);
    CHECK(plan.looser_ppm == detail::roomy_round_ppm);
    engine.limit_work(std::min(bound, engine.work() * (1 + detail::loosened_work)));
    REQUIRE(engine.loosen_and_repair(light, detail::relax(in.limit, detail::roomy_round_ppm)));
    const auto m = balance_of(packs, s, engine);
    CHECK(m.a == m.lb_a);
    CHECK(m.b <= in.limit);
    const std::int64_t round = engine.weighted_moved();
    CHECK(round < searched);
    solve_options opt;
    opt.eps = e.eps;
    const auto sol = solve(packs, s, opt);
    check_keeps_stage1(packs, s, opt, sol);
    CHECK(sol.movement.moved_bytes == round);
  }
}

TEST_CASE("rounds from a looser limit with many levels keep A and the limit") {
  // With more than 64 levels the bring-home leaves the ranks' places behind (it reads the level
  // lists), and the repair back to the limit reads them: loosen_and_repair rebuilds them first.
  // Every round that succeeds keeps A exact and every rank within the limit, at eps = 0.
  const shape shapes[] = {{4, 1024, 1}, {16, 256, 1}};
  const test::stress::dist dists[] = {test::stress::dist::heavy_rank, test::stress::dist::bimodal,
                                      test::stress::dist::lognormal, test::stress::dist::multiples};
  int rounds = 0;
  for (const auto& s : shapes) {
    for (const auto d : dists) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        const auto packs = test::stress::batch(s, d, seed);
        const auto in = stage2_input_for(packs, s, 0, false);
        auto engine = engine_for(packs, s, 0, false);
        engine.limit_work(detail::stage2_search_bound(s.packs()));
        if (!engine.run(detail::home_first::tuning{})) {
          continue;
        }
        engine.limit_work(2 * detail::stage2_search_bound(s.packs()));
        for (int round = 0;
             round < 3 && engine.loosen_and_repair(detail::home_first::tuning{},
                                                   detail::relax(in.limit, detail::loosened_ppm));
             ++round) {
          ++rounds;
          const auto m = balance_of(packs, s, engine);
          INFO(test::stress::name(d)
               << " dp=" << s.dp << " ga=" << s.ga << " seed=" << seed << " round " << round);
          CHECK(m.a == m.lb_a);
          CHECK(m.b <= in.limit);
        }
      }
    }
  }
  CHECK(rounds > 0);
}
