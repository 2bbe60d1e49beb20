#pragma once

#include "packswap/balance/metrics.hpp"
#include "packswap/batch.hpp"
#include "packswap/detail/products.hpp"
#include "packswap/refine/detail/cell_swaps.hpp"
#include "packswap/refine/detail/home_first.hpp"
#include "packswap/refine/detail/two_ranks.hpp"
#include "packswap/refine/relabel.hpp"
#include "packswap/refine/topology.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

namespace packswap {

/// What stage 2 may trade and what it minimises.
struct refine_options {
  /// The sync mode stage 1 balanced for.
  sync_mode mode = sync_mode::per_micro_step;
  /// Balance that may be given up for less movement: B may exceed stage 1's B by this fraction
  /// (and, in `per_step` mode, A may exceed stage 1's A by it). In [0, 1]; resolved to parts per
  /// million, so every rank derives the same integer limits.
  double eps = 0.0;
  /// Node map and inter-node weight: stage 2 minimises the weighted moved bytes.
  packswap::topology topology{};
  /// Scales the work stage 2's searches may do (mbs = 1): their deterministic work bound, the
  /// fallback's allowance and the review's threshold are multiplied by it. Below 1 the solve's
  /// worst case is faster and searches that need more work give way to the fallback, which moves
  /// more bytes; above 1 the reverse. A and B hold at any value. In [0.001, 64]; resolved to parts
  /// per thousand, so every rank derives the same integer bounds. See docs/solver-worst-case.md.
  double work_scale = 1.0;
};

namespace detail {

// eps in parts per million; throws on values outside [0, 1] (NaN included).
inline std::int64_t eps_ppm(double eps) {
  PACKSWAP_EXPECTS(eps >= 0.0 && eps <= 1.0, errc::invalid_argument,
                   "eps is " << eps << ", must be in [0, 1]");
  return static_cast<std::int64_t>(std::llround(eps * 1e6));
}

// work_scale in parts per thousand; throws on values outside [0.001, 64] (NaN included).
inline std::int64_t work_permille(double scale) {
  PACKSWAP_EXPECTS(scale >= 0.001 && scale <= 64.0, errc::invalid_argument,
                   "work_scale is " << scale << ", must be in [0.001, 64]");
  return static_cast<std::int64_t>(std::llround(scale * 1000.0));
}

// Checks the options stage 2 reads (of `refine_options` or `solve_options`) for dp ranks: the
// topology covers them, eps and work_scale are in range; throws naming the offending value.
template <class Options>
void validate_stage2_options(const Options& opt, std::int32_t dp) {
  opt.topology.validate_for(dp);
  (void)eps_ppm(opt.eps);
  (void)work_permille(opt.work_scale);
}

// floor(w * permille / 1000) for w >= 0 and permille in [1, 64,000], without overflow for any
// work count up to int64 max / 64.
constexpr std::int64_t scale_work(std::int64_t w, std::int64_t permille) {
  return (w / 1000) * permille + (w % 1000) * permille / 1000;
}

// floor(x * (1 + ppm / 1e6)) for x >= 0 and ppm in [0, 1e6], saturated at the int64 maximum: a
// limit beyond it binds nothing (no load exceeds the batch's total cost).
inline std::int64_t relax(std::int64_t x, std::int64_t ppm) {
  const std::int64_t add = (x / 1000000) * ppm + (x % 1000000) * ppm / 1000000; // <= x
  return add > std::numeric_limits<std::int64_t>::max() - x
             ? std::numeric_limits<std::int64_t>::max()
             : x + add;
}

} // namespace detail

namespace detail {

// Each rank's packs, sorted by cost descending (ties by id), fill micro-steps 0, 1, ...
// `order` lists all pack ids in that order, so walking it deals every rank's packs sorted.
inline assignment deal_micro_steps(const shape& s, span<const std::int32_t> rank_of,
                                   span<const std::int32_t> order) {
  const auto mbs = static_cast<std::size_t>(s.mbs);
  std::vector<std::size_t> used(static_cast<std::size_t>(s.dp), 0);
  assignment out(order.size());
  for (const auto p : order) {
    const auto r = static_cast<std::size_t>(rank_of[static_cast<std::size_t>(p)]);
    out[static_cast<std::size_t>(p)] =
        cell{static_cast<std::int32_t>(r), static_cast<std::int32_t>(used[r]++ / mbs)};
  }
  return out;
}

// Whether stage 2's integer arithmetic fits int64 for this batch: it adds loads, limits and a
// rank's worth of level quantiles or mean costs (at most (ga + 2) times the total cost), and
// weighted byte changes of a few packs (at most 4 times the weighted byte total).
inline bool stage2_fits(std::int64_t total_cost, const shape& s, std::int64_t total_bytes,
                        const topology& topo) {
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  return total_cost <= most / (2 * (static_cast<std::int64_t>(s.ga) + 2)) &&
         total_bytes <= most / 4 / topo.inter_node_weight();
}

// Work the searches of stage 2 may do (up to 16,384 packs the fallback's bring-home included, see
// stage2_search_bound): per pack of the batch, plus a constant that lets small batches run the
// chained repairs their hardest cases need (see `refine_sorted`). Per unit of work, time grows with
// the batch (its records leave the caches), so the share per pack is small: normal batches use 2-25
// per pack.
inline constexpr std::int64_t stage2_work_per_pack = 32;
inline constexpr std::int64_t stage2_work_constant = std::int64_t{1} << 19;
// The fallback's bring-home's allowance: up to 16,384 packs kept back from the search's, above
// it on top (see stage2_search_bound).
inline constexpr std::int64_t fallback_work_per_pack = 8;
inline constexpr std::int64_t fallback_work_constant = std::int64_t{1} << 16;
// The search's review (see refine_sorted): once its work reaches review_work_per_pack per pack
// plus review_work_constant, it ends, and stage 1 renamed is the answer, where that moves at most
// (review_slack_den + 1) / review_slack_den of a floor on the bytes any answer moves
// (stage2::moved_floor) and the floor is at least half of stage 1's bytes.
inline constexpr std::int64_t review_work_per_pack = 8;
inline constexpr std::int64_t review_work_constant = std::int64_t{1} << 17;
inline constexpr std::int64_t review_slack_den = 32;
// A successful search that moves a pack holding more than 1 / heavy_share of the batch's bytes
// is weighed against the fallback (see refine_sorted).
inline constexpr std::int64_t heavy_share = 64;
// How a successful search goes on from a looser limit (see refine_sorted): `rounds` rounds of
// home_first::loosen_and_repair under a limit `looser_ppm` (parts per million) above the batch's,
// each repair with the search's tuning or, where `light`, with light_round_tuning's. No rounds:
// the search's answer stands.
struct rounds_plan {
  std::int32_t rounds = 0;
  std::int64_t looser_ppm = 0;
  bool light = false;
};

// Where the answer moves more than rounds_share(eps) of stage 1's bytes, with more than two
// ranks: under a limit with less room than loosened_ppm (eps = 0), up to loosened_rounds rounds
// at loosened_ppm looser, up to loosened_up_to packs; with more room, one light round at
// roomy_round_ppm looser, up to roomy_round_up_to packs; either within (1 + loosened_work) times
// the work done before them.
inline constexpr std::int64_t loosened_ppm = 1000;
inline constexpr std::int32_t loosened_rounds = 8;
inline constexpr std::int64_t loosened_work = 3;
inline constexpr std::int64_t loosened_up_to = 8192;
inline constexpr std::int64_t roomy_round_ppm = 2000;
inline constexpr std::int64_t roomy_round_up_to = 16384;
inline constexpr std::int64_t roomy_share_ppm = 10000;

// The share of stage 1's bytes, in per mille, above which a successful search's answer goes on
// from a looser limit: two fifths from eps = 1% (roomy_share_ppm), half below it.
inline std::int64_t rounds_share(std::int64_t ppm) {
  return ppm >= roomy_share_ppm ? 400 : 500;
}

// Whether and how a successful search on `dp` ranks and `n` packs, at eps `ppm`, whose answer
// moves `moved` weighted bytes against stage 1's `stage1_bytes`, goes on (see refine_sorted).
// Exact for any byte counts (the share is compared as a 128-bit product). O(1).
inline rounds_plan plan_rounds(std::int64_t ppm, std::int64_t n, std::size_t dp, std::int64_t moved,
                               std::int64_t stage1_bytes) {
  if (dp <= 2 || compare_products(moved, 1000, stage1_bytes, rounds_share(ppm)) <= 0) {
    return {};
  }
  if (ppm < loosened_ppm) {
    return n <= loosened_up_to ? rounds_plan{loosened_rounds, loosened_ppm, false} : rounds_plan{};
  }
  return n <= roomy_round_up_to ? rounds_plan{1, roomy_round_ppm, true} : rounds_plan{};
}

// The light rounds' repair: half the picks, partners and scan of the search's, which takes the
// round's work to about 0.6 of what the search's tuning does (`bimodal` 1,024 x 16 at eps = 0.01,
// seed 2: 0.13 million units instead of 0.22 million, moving 0.395 of Karmarkar-Karp's bytes
// instead of 0.393).
inline home_first::tuning light_round_tuning(home_first::tuning t) {
  t.repair_picks /= 2;
  t.roomy_partners /= 2;
  t.scan_limit /= 2;
  return t;
}

// The work stage 2's searches may do for n packs: 32 n + 2^19, the fallback's included up to
// shared_bound_up_to packs (see stage2_search_bound); every bound below is scaled by the options'
// work_scale, in parts per thousand (`permille`, 1,000 unless given).
constexpr std::int64_t stage2_bound(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(stage2_work_per_pack * n + stage2_work_constant, permille);
}

// The fallback's allowance for n packs: 8 n + 2^16.
constexpr std::int64_t fallback_allowance(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(fallback_work_per_pack * n + fallback_work_constant, permille);
}

// The work after which the search's review is due for n packs: 8 n + 2^17.
constexpr std::int64_t review_work(std::int64_t n, std::int64_t permille = 1000) {
  return scale_work(review_work_per_pack * n + review_work_constant, permille);
}

// Batches up to which the fallback's allowance is kept back from the bound (see
// stage2_search_bound).
inline constexpr std::int64_t shared_bound_up_to = 16384;

// The work the search (every attempt together) may do for n packs, before the fallback. Up to
// shared_bound_up_to packs, the bound less the fallback's allowance (24 n + 458,752), so that a
// search that ends at it and the fallback after it stay within the bound together, and a solve's
// time within the bound's (with stage 1 and the phases before the repair, which count none).
// Where the allowance came on top of a search that could spend the whole bound, the slowest
// batches of the stress set were such searches: over seeds 1-12 at 16,384 packs up to 1.13 M units
// (`bimodal` 1,024 x 16 at eps = 0.001, seed 5; 15 ms, 5.2 times the benchmark batch's solve), now
// at most 1.06 M. The repair's pace is still judged against the whole bound
// (repair_pace::judged_limit), so a search runs as before until it reaches this one. Searches that
// succeeded past it now end there and take the fallback (or, where only their bring-home passed
// it, keep their answer with the trades made): over those 4,680 batches two move more (`pareto` 4
// x 1,024 at eps = 0, seed 6: 0.447 of Karmarkar-Karp's bytes instead of 0.393; `bimodal` 256 x
// 64 at eps = 0.001, seed 9, 0.561 instead of 0.523), three fewer; none of the benchmark
// workloads' 3,600 batches changes. In larger batches the search keeps the whole bound and the
// fallback's allowance comes on top: there a search that succeeds late can move far fewer bytes
// than the fallback (`multiples` 1,024 x 256 at 262,144 packs, eps = 0, seed 2: 0.079 of
// Karmarkar-Karp's bytes after 8.7 M units; ended at the search's part, the fallback's 0.897).
constexpr std::int64_t stage2_search_bound(std::int64_t n, std::int64_t permille = 1000) {
  return n <= shared_bound_up_to ? stage2_bound(n, permille) - fallback_allowance(n, permille)
                                 : stage2_bound(n, permille);
}

// The most work stage 2's searches do for n packs in ga micro-steps: the search's bound and the
// fallback's allowance (each with a constant for small batches: the bound, up to
// shared_bound_up_to packs), plus what may be charged past a check: the step or visit under way
// (the level tables of the roomiest ranks, O(ga), and a bounded number of candidates) and the
// indexes a phase builds before its first check (a repair run's first step and the level lists,
// n + dp units each, the rows at most n / 16 + dp), each at most once after the search's limit and
// once after the fallback's: five of n + dp units at most, dp = n / ga, which a bound scaled far
// down (work_scale) reaches. With two ranks, the knapsack's work (exact, not scaled by
// work_scale). O(n) (O(n log n) with two ranks), as ga <= n.
constexpr std::int64_t stage2_work_bound(std::int64_t n, std::int64_t ga,
                                         std::int64_t permille = 1000) {
  return stage2_search_bound(n, permille) + fallback_allowance(n, permille) + 5 * (n + n / ga) +
         16 * ga + 16384 + (n == 2 * ga ? two_ranks::work_bound(n) : 0);
}

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

} // namespace detail

/// The default stage-2 policy: see `refine()`.
///
/// For mbs = 1 it runs the home-first search (`detail::home_first`): A stays within stage 1's
/// micro-step maxima (so A == LB_A stays exact in `per_micro_step` mode), B within (1 + eps) *
/// stage 1's B, and in `per_step` mode every micro-step cap may also grow by eps. Its searches
/// count their work and stop at a bound proportional to the pack count
/// (`detail::stage2_work_per_pack` per pack, plus a constant, times `refine_options::work_scale`),
/// so its time is bounded on any input and every rank stops at the same point. Should the search
/// fail to meet the limits (it tries the wide band, then the wide and a narrow band with a repair
/// that may also chain two swaps), run out of work, or move more than stage 1, the answer is stage
/// 1 with its ranks renamed to keep the most bytes home (`relabel_ranks`), then packs brought home
/// by trades within its balance, which never moves more than stage 1. Where the search's answer
/// moves a pack holding more than 1/64 of the batch's bytes, that fallback is computed too and the
/// one moving fewer weighted bytes kept. Else, where it moves more than half of stage 1's bytes at
/// eps < 0.001 (more than two ranks, at most 8,192 packs), the search goes on in rounds that bring
/// packs home under a limit 0.1% looser and repair back to the limit, within three times the work
/// done before them, while they move fewer weighted bytes; at eps >= 0.001 (at most 16,384 packs)
/// with one lighter round under a limit 0.2% looser, where it moves more than half (two fifths from
/// eps = 0.01). With two ranks (dp = 2), every answer that keeps A is a choice after each run of
/// equal costs that ends at an odd sorted position, and the choices that move the fewest bytes are
/// found exactly (`detail::two_ranks`): where they keep B within the limit, or flips of them that
/// cost no bytes do, they are the answer; else walks from them towards the limit (one back from its
/// far side too) give a second answer, kept where it moves fewer weighted bytes than the search's.
/// For mbs > 1 it is that renaming followed by swaps that bring packs home while every cell stays
/// within its micro-step's stage-1 maximum and every rank within the B limit. The search and the
/// swaps add costs and weighted bytes in int64: for batches whose total cost exceeds int64 max / (2
/// (ga + 2)) they run on the costs divided by their greatest common divisor (exact: the same limits
/// hold) where that brings the total within it; otherwise, and where the byte total exceeds int64
/// max / (4 * inter-node weight), they stand down, and the answer is the renaming alone.
class refiner {
 public:
  /// The stage-2 assignment for `packs` given stage 1's `stage1`; validates its inputs.
  [[nodiscard]] assignment operator()(span<const pack_meta> packs, const shape& s,
                                      const assignment& stage1, const refine_options& opt) const {
    validate_batch(packs, s);
    validate_assignment(stage1, s);
    detail::validate_stage2_options(opt, s.dp);
    std::vector<std::int64_t> costs(packs.size());
    for (std::size_t p = 0; p < packs.size(); ++p) {
      costs[p] = packs[p].cost;
    }
    const auto order = detail::order_desc(costs);
    detail::load_profile loads;
    std::vector<std::int64_t> table;
    detail::profile_loads(costs, stage1, s, loads, table);
    return detail::refine_sorted(packs, order, s, stage1, loads, opt);
  }
};

/// Whether `P` is a stage-2 policy: callable as `assignment(span<const pack_meta>, const shape&,
/// const assignment& stage1, const refine_options&)`.
template <class P, class = void>
struct is_refiner : std::false_type {};
template <class P>
struct is_refiner<P,
                  std::void_t<decltype(std::declval<const P&>()(
                      std::declval<span<const pack_meta>>(), std::declval<const shape&>(),
                      std::declval<const assignment&>(), std::declval<const refine_options&>()))>>
    : std::is_same<assignment,
                   decltype(std::declval<const P&>()(
                       std::declval<span<const pack_meta>>(), std::declval<const shape&>(),
                       std::declval<const assignment&>(), std::declval<const refine_options&>()))> {
};
/// `is_refiner<P>::value`.
template <class P>
inline constexpr bool is_refiner_v = is_refiner<P>::value;

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The C++20 spelling of `is_refiner_v`.
template <class P>
concept refiner_like = is_refiner_v<P>;
#endif

/// Stage 2 with policy `P` (default: `refiner`): among assignments as balanced as `stage1`
/// (within `opt.eps`), one that moves fewer weighted bytes.
template <class P = refiner>
[[nodiscard]] assignment refine(span<const pack_meta> packs, const shape& s,
                                const assignment& stage1, const refine_options& opt = {},
                                const P& policy = P{}) {
  static_assert(is_refiner_v<P>, "P must be callable as assignment(span<const pack_meta>, "
                                 "const shape&, const assignment&, const refine_options&)");
  return policy(packs, s, stage1, opt);
}

} // namespace packswap
