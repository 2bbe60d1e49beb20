#pragma once

#include "packswap/balance/metrics.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/cell_swaps.hpp"
#include "packswap/refine/detail/home_first.hpp"
#include "packswap/refine/detail/search_rounds.hpp"
#include "packswap/refine/detail/two_ranks.hpp"
#include "packswap/refine/detail/work_bound.hpp"
#include "packswap/refine/options.hpp"
#include "packswap/refine/relabel.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

/// Stage 2 as the solve runs it (`refine_sorted`): the two-rank solve, the home-first search's
/// attempts within the work bound, the review, the rounds after a success, the fallback, and the
/// answer weighed among them; for mbs > 1 the renaming and the cells' bring-home; costs too large
/// for int64 sums divided by their common factor.

namespace packswap::detail {

// Whether stage 2's integer arithmetic fits int64 for this batch: it adds loads, limits and a
// rank's worth of level quantiles or mean costs (at most (ga + 2) times the total cost), and
// weighted byte changes of a few packs (at most 4 times the weighted byte total).
inline bool stage2_fits(std::int64_t total_cost, const shape& s, std::int64_t total_bytes,
                        const topology& topo) {
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  return total_cost <= most / (2 * (static_cast<std::int64_t>(s.ga) + 2)) &&
         total_bytes <= most / 4 / topo.inter_node_weight();
}

// A successful search that moves a pack holding more than 1 / heavy_share of the batch's bytes
// is weighed against the fallback (see refine_sorted).
inline constexpr std::int64_t heavy_share = 64;

// Working memory of stage 2, kept by callers that refine every step; after each refine_sorted,
// the work its searches did and whether they stopped at the bound.
struct refine_scratch {
  home_first engine;
  two_ranks two;     // for dp = 2
  cell_places cells; // for mbs > 1
  std::vector<std::int64_t> caps;
  std::vector<std::size_t> used;
  rank_matching matching; // the renaming's working memory
  assignment searched;    // the search's answer, while the fallback is weighed against it
  // Where costs beyond the search's range share a factor: the batch with its costs divided by
  // it, and stage 1's load profile so divided (see refine_sorted).
  std::vector<pack_meta> reduced;
  load_profile reduced_loads;
  std::int64_t work = 0;
  bool bounded = false;
};

// The greatest common divisor of all costs (0 when every cost is 0). O(N): one remainder per
// cost, and Euclid's algorithm only where a cost is not a multiple of the divisor so far.
inline std::int64_t common_cost_factor(span<const pack_meta> packs) {
  std::int64_t g = 0;
  for (const auto& p : packs) {
    if (g == 0 ? p.cost != 0 : p.cost % g != 0) {
      g = std::gcd(g, p.cost);
      if (g == 1) {
        break;
      }
    }
  }
  return g;
}

// The weighted bytes stage 1 `a` moves with its ranks renamed by the renaming's matching
// (`matching`, which keeps the names): O(N + dp log dp).
inline std::int64_t renamed_weighted(span<const pack_meta> packs, const shape& s,
                                     const assignment& a, const topology& topo,
                                     rank_matching& matching) {
  const auto renamed =
      renamed_bytes(packs, a, topo, matching.run(packs, a, static_cast<std::size_t>(s.dp)));
  return topo.weighted(renamed.intra, renamed.inter);
}

// Stage 2 given `order` (pack ids by cost descending) and stage 1's load profile, into `a`,
// which holds stage 1 on entry. No validation.
inline void refine_sorted(span<const pack_meta> packs, span<const std::int32_t> order,
                          const shape& s, assignment& a, const load_profile& stage1_loads,
                          const refine_options& opt, refine_scratch& ws) {
  ws.work = 0;
  ws.bounded = false;
  const std::int64_t ppm = eps_ppm(opt.eps);
  const std::int64_t wpm = work_permille(opt.work_scale);
  const std::int64_t limit = relax(stage1_loads.b(), ppm);
  // Micro-step maxima of stage 1: keeping every cell under its micro-step's cap keeps A (in
  // per_step mode A may grow by eps too, so the caps do).
  auto& caps = ws.caps;
  caps.assign(stage1_loads.step_max.begin(), stage1_loads.step_max.end());
  std::int64_t total_cost = 0;
  for (const auto v : stage1_loads.rank_sum) {
    total_cost += v;
  }
  const byte_totals stage1 =
      bytes_of(packs, opt.topology, [&](std::size_t p) { return a[p].rank; });
  if (!stage2_fits(total_cost, s, stage1.all, opt.topology)) {
    // Costs so large that the search's sums could leave int64, where every cost shares a factor
    // g (costs in a fine unit, as nanoseconds or picoseconds give, or FLOPs with a factor of the
    // parameter count): stage 2 runs on the costs divided by g. The division is exact, so every
    // comparison of loads and costs reads as it does on the costs themselves, and so do the
    // limits: a load L / g of integers is at most floor(C / g) iff L <= C, and relax() commutes
    // with the division (floor(floor(x) / g) = floor(x / g)), so B and every micro-step cap
    // hold as on the costs given. The answer is the one the divided costs get, given as they are
    // (tests/refine/test_refine.cpp). O(N + ga + dp).
    const std::int64_t g = common_cost_factor(packs);
    if (g > 1 && stage2_fits(total_cost / g, s, stage1.all, opt.topology)) {
      ws.reduced.assign(packs.begin(), packs.end());
      for (auto& p : ws.reduced) {
        p.cost /= g;
      }
      ws.reduced_loads = stage1_loads;
      for (auto& v : ws.reduced_loads.step_max) {
        v /= g;
      }
      for (auto& v : ws.reduced_loads.rank_sum) {
        v /= g;
      }
      // In range now, so the call below does not come back here, nor touch `reduced`.
      refine_sorted(ws.reduced, order, s, a, ws.reduced_loads, opt, ws);
      return;
    }
    // Otherwise (or where the bytes are the ones too large): renaming stage 1's ranks alone,
    // which keeps its balance exactly and counts bytes without overflow.
    a = relabel_valid(packs, s, std::move(a), opt.topology, ws.matching);
    return;
  }
  if (opt.mode == sync_mode::per_step) {
    for (auto& c : caps) {
      c = relax(c, ppm);
    }
  }
  if (s.mbs != 1) {
    // Cells of several packs: rename ranks, then bring packs home under the cell caps.
    a = relabel_valid(packs, s, std::move(a), opt.topology, ws.matching);
    bring_home_cells(packs, s, opt.topology, caps, limit, a, 2, ws.cells);
    return;
  }
  // Stage 1 as it stands is always a valid answer: stage 2 must move fewer weighted bytes.
  const std::int64_t stage1_bytes = opt.topology.weighted(stage1.intra, stage1.inter);
  // Two ranks: the exact shape of the answers that keep A (detail/two_ranks.hpp). Where it finds
  // an answer within the limit that moves the fewest bytes of any, that is the answer, without
  // the search; else its answer is kept where it moves fewer weighted bytes than the search's
  // (on the stress set at dp 2, up to 0.49 of Karmarkar-Karp's bytes fewer, and never more).
  // O(n log n).
  const bool two = s.dp == 2 && ws.two.run(packs, order, limit, opt.topology, stage1_bytes);
  const std::int64_t two_work = s.dp == 2 ? ws.two.work() : 0;
  if (two && ws.two.fewest_of_any()) {
    ws.two.write(order, a);
    ws.work = two_work;
    return;
  }
  std::sort(caps.begin(), caps.end(), std::greater<>());
  home_first& engine = ws.engine;
  engine.prepare(packs, s, opt.topology, caps, limit, order);
  // The work bound: deterministic (every rank stops at the same point, whatever its speed),
  // proportional to the pack count. Past it no attempt starts and the answer is the fallback
  // below, which keeps stage 1's balance. A repair that, at the pace it goes, could not end
  // within it gives up the rest at once, with the same answer (see stage2::repair_phase).
  const auto n = static_cast<std::int64_t>(packs.size());
  engine.limit_work(stage2_search_bound(n, wpm),
                    stage2_bound(n, wpm) - stage2_search_bound(n, wpm));
  home_first::tuning wide;
  // Where the wide pinning band fails (a limit so tight that single swaps cannot reach it, as
  // at eps = 0 on some batches), again with a repair that may also chain two swaps (a wider
  // search, so only then), and with a narrow band (either alone still fails on some batches).
  home_first::tuning wide_chained = wide;
  wide_chained.chains = true;
  home_first::tuning narrow_chained = wide_chained;
  narrow_chained.band_low_permille = 350;
  narrow_chained.band_high_permille = 650;
  // The review: a search still running after review_work_per_pack units of work per pack (plus
  // a constant) is abandoned where stage 1 renamed, which the fallback starts from, already
  // moves at most 1/review_slack_den more weighted bytes than stage2::moved_floor, the fewest
  // any answer could move: the search could save little, and such searches are the long ones.
  // The answer is then stage 1 renamed, without the fallback's bring-home. Only where that floor
  // is at least half of stage 1's bytes (loads that follow the home ranks, as costs graded
  // across the ranks give, shards sorted by length: at 16,384 packs such a search ran 0.9 M
  // units, 16 ms); elsewhere the renaming's matching (0.1-0.5 ms at 16,384 packs, 4-6 ms at
  // 262,144) would cost every long search, most of which it would not end. O(n) for the floor,
  // once per search that runs so long, and O(n + dp log dp) for the renaming past that test,
  // whose names (and bytes) the fallback and the weighing after a search then reuse.
  std::int64_t renamed_moved = -1; // stage 1 renamed's weighted bytes, once computed
  const auto renamed = [&] {
    if (renamed_moved < 0) {
      renamed_moved = renamed_weighted(packs, s, a, opt.topology, ws.matching);
    }
    return renamed_moved;
  };
  const auto review = [&] {
    const std::int64_t floor = engine.moved_floor();
    if (compare_products(floor, 2, stage1_bytes, 1) < 0) {
      return false; // see above
    }
    return compare_products(renamed(), review_slack_den, floor, review_slack_den + 1) <= 0;
  };
  // The fallback below: stage 1 with its ranks renamed to keep the most bytes home, which keeps
  // its balance exactly, then brought home by trades that keep it (within a work allowance of
  // its own), into `a`, which holds stage 1.
  const auto fallback = [&] {
    engine.end_review();
    a = renamed_moved >= 0 ? rename_valid(packs, std::move(a), opt.topology, ws.matching.names())
                           : relabel_valid(packs, s, std::move(a), opt.topology, ws.matching);
    engine.limit_work(engine.work() + fallback_allowance(n, wpm));
    engine.settle(a, 2);
  };
  // The two-rank answer in place of `a`, which moves `moved`, where it moves fewer.
  const auto keep_two = [&](std::int64_t moved) {
    if (two && ws.two.weighted_moved() < moved) {
      ws.two.write(order, a);
    }
  };
  engine.review_at(review_work(n, wpm), stage2::review_hook(review));
  for (const auto& t : {wide, wide_chained, narrow_chained}) {
    if (engine.run(t)) {
      engine.end_review();
      const auto searched = engine.movement();
      if (searched.weighted < stage1_bytes) {
        ws.bounded = engine.out_of_work();
        // A pack holding more than 1/64 of the batch's bytes moved. The pin gives up such a pack
        // when its rank could not then be completed within the limit with the band's cheap
        // packs of its other levels (a giant leaves room for only the very cheapest), and the
        // fill deals it elsewhere (rarely, a repair step trades it away), while the renaming
        // gives the column of stage 1 that holds it to its home rank (its bytes outweigh the
        // rest of the column): the fallback is computed too and the one moving fewer weighted
        // bytes kept (on the stress set, Pareto costs with three giant packs: 0.53 of
        // Karmarkar-Karp's bytes against 0.24). O(n) to tell, on every success. So is it where
        // the search moves more than half of stage 1's bytes and stage 1 renamed alone moves
        // fewer: giant packs each under 1/64 of the bytes but heavy together (the probe
        // `sparse_giants`, one pack in 1,000 costing 1,000 s: at 262,144 packs the search moves
        // 0.76-0.99 of Karmarkar-Karp's bytes, the fallback 0.001-0.11; no batch of the stress
        // set is weighed so). O(n + dp log dp) more to tell, on those successes only.
        if (searched.largest_away > stage1.all / heavy_share ||
            (2 * searched.weighted > stage1_bytes && renamed() < searched.weighted)) {
          engine.cells(ws.searched, ws.used);
          fallback();
          if (engine.weighted_moved() < searched.weighted) {
            engine.cells(a, ws.used);
            keep_two(engine.weighted_moved());
          } else {
            a.swap(ws.searched);
            keep_two(searched.weighted);
          }
        } else if (const rounds_plan go_on =
                       plan_rounds(ppm, n, s.dp, searched.weighted, stage1_bytes);
                   go_on.rounds > 0) {
          // Otherwise, where the answer moves more than half of stage 1's bytes under a limit with
          // almost no room (eps = 0), the search goes on past its local optimum: rounds that bring
          // packs home under a limit 0.1% looser, then repair back to the limit and bring home
          // again (home_first::loosen_and_repair), each kept while it moves fewer weighted bytes
          // than the best before it, at most `loosened_rounds` of them, with up to `loosened_work`
          // times the work done before the first, within the bound (stage2_bound: no fallback
          // follows them, so the fallback's allowance is theirs too; the bound is read for the
          // first answer: the rounds end at their own allowance, or give up at their pace, with the
          // best answer still standing). On the benchmark workloads at eps = 0 (`high-res` at dp 64
          // and 256, 1,024 and 4,096 packs) every one of the 47 batches above half of
          // Karmarkar-Karp's bytes it runs on moves fewer, and all but one within half, for 1.9-3.3
          // times their solve's time. Not with two ranks, whose exact answer (two_ranks) is weighed
          // instead; and not from 16,384 packs, where on the stress set and the workloads it moved
          // at most 0.002 of Karmarkar-Karp's bytes fewer, for up to 3.3 ms more (one light round
          // 0.03% looser brings the workloads' two batches there within half, `high-res` 1,024 x
          // 16 seeds 18 and 35, but takes the first from 11 ms to 14.5). O(n) per round plus the
          // searches' work, on those successes only.
          //
          // With more room (eps of 0.1% or more), where the answer moves more than half of stage
          // 1's bytes (two fifths from eps = 1%), one round under a limit 0.2% looser, with a
          // repair that weighs fewer candidates per step (light_round_tuning): there the first
          // round's repair meets a few hundred ranks above the limit, each step weighing about 700
          // units with the search's tuning, and the rounds after it move little more. On the
          // stress set at eps = 0.01 (seeds 1-10) it brings two of the three batches above two
          // fifths of Karmarkar-Karp's bytes that could come within it (`bimodal` 1,024 x 16 seeds
          // 2 and 10: 0.410 and 0.408 to 0.395 and 0.398) for 1.3 times their solve's time; the
          // third, `heavy_rank` 256 x 64 seed 7, from 0.404 to 0.4006 (its bound: 0.392). Not from
          // 32,768 packs, whose time targets it was not measured against.
          const home_first::tuning round_tuning = go_on.light ? light_round_tuning(t) : t;
          const std::int64_t looser = relax(limit, go_on.looser_ppm);
          engine.cells(ws.searched, ws.used);
          std::int64_t best = searched.weighted;
          engine.limit_work(std::min(stage2_bound(n, wpm), engine.work() * (1 + loosened_work)));
          for (std::int32_t round = 0;
               round < go_on.rounds && engine.loosen_and_repair(round_tuning, looser); ++round) {
            const std::int64_t moved = engine.weighted_moved();
            if (moved >= best) {
              break;
            }
            best = moved;
            engine.cells(ws.searched, ws.used);
          }
          a.swap(ws.searched);
          keep_two(best);
        } else {
          engine.cells(a, ws.used);
          keep_two(searched.weighted);
        }
        ws.work = two_work + engine.work();
        return;
      }
      break;
    }
  }
  // Only when the search fails (or runs out of work, or moves no fewer bytes than stage 1, or
  // its review abandons it).
  ws.bounded = engine.out_of_work() && !engine.abandoned();
  if (engine.abandoned()) {
    // Stage 1 renamed moves at most 1/review_slack_den more than any answer could: it stands,
    // without the fallback's bring-home (at 262,144 packs its allowance alone is 2.2 M units).
    engine.end_review();
    // The renaming stands where it moves fewer weighted bytes than stage 1 as it is.
    a = rename_valid(packs, std::move(a), opt.topology, ws.matching.names());
    keep_two(std::min(renamed_moved, stage1_bytes));
    ws.work = two_work + engine.work();
    return;
  }
  fallback();
  engine.cells(a, ws.used);
  keep_two(engine.weighted_moved());
  ws.work = two_work + engine.work();
  ws.bounded = ws.bounded || engine.out_of_work();
}

// Stage 2 given `order` and stage 1's load profile, allocating its result and working memory.
inline assignment refine_sorted(span<const pack_meta> packs, span<const std::int32_t> order,
                                const shape& s, const assignment& stage1,
                                const load_profile& stage1_loads, const refine_options& opt) {
  assignment a = stage1;
  refine_scratch ws;
  refine_sorted(packs, order, s, a, stage1_loads, opt, ws);
  return a;
}

} // namespace packswap::detail
