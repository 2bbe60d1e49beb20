// The solver's worst case: the full solve on the stress set (tests/support/stress.hpp) and the
// existing workloads, over shapes dp x ga at a fixed pack count, printing per shape and
// distribution the WORST over seeds and eps of every figure.
//
//   packswap-bench-refine-stress [--packs 16384] [--ga 1,4,16,64,256,1024] [--small-dp 1,2,4,8]
//       [--large 262144,1048576|none] [--mbs 2,4|none] [--shapes DPxGA[xMBS],...]
//       [--dists all|a,b,...] [--eps 0,0.001,0.01] [--seeds 3] [--first-seed 1] [--repeat 3]
//       [--json FILE] [--write-batches DIR] [--kept] [--flow-work 33554432] [--cost-unit 1]
//       [--work-scale 1] [--ranks-per-node N] [--node-weight 4] [--smoke]
//
// Sections: (1) `--packs` packs as dp x ga for every ga of `--ga`, and dp x 1,024 for every dp
// of `--small-dp`; (2) each pack count of `--large` at ga 16, 64 and 256 (ga 16 alone above
// 262,144 packs); (3) `--packs` packs in cells of every mbs of `--mbs`, at ga 4, 16 and 64.
// `--shapes` replaces them all with its own list. `--dists`: stress distributions (lognormal,
// pareto, bimodal, ties, multiples, near_equal, heavy_rank, bytes_tied, bytes_near, uniform), the
// probes beyond the stress set (text_heavy, geometric, graded, sparse_giants), workload presets
// (vlm-pretrain, captioning, high-res; not above 262,144 packs) and the tests' mixes as
// synthetic:<mix>, or `all` (the stress distributions and the presets, not the probes). Every batch
// is solved `--repeat` times through `packswap::solve` as the CLI calls it (every rank's plan,
// peers counted), single-threaded; its time is the median. The reference is the benchmark's batch
// (vlm-pretrain, dp 1,024 x ga 16, seed 42, as bench/balance/solve.cpp), solved between the
// cells of the same run: its median over the run divides every time ("x ref"). `--kept` times
// every solve, the reference's too, through one `packswap::solver` kept across calls instead, as
// the engine and the Python `Solver` run it: its working memory is reused, so the page faults of
// fresh memory are not counted (a batch larger than any before it is solved once untimed first,
// which grows that memory; the median is of warm solves).
//
// Columns: worst solve ms, x ref; A / LB_A; for mbs > 1, A over the former bound max(sum of the
// sorted chunks' maxima, ceil(total / dp)); B / B_KK at eps = 0 (B_KK: stage 1's
// Karmarkar–Karp B; any B above (1 + eps) B_KK is flagged); moved bytes / Karmarkar–Karp's (the
// kk-per-step baseline of side_by_side) at each eps; "LB mv", for mbs = 1, a lower bound on
// moved bytes / Karmarkar–Karp's that every assignment with A = LB_A obeys: the fewest of any,
// exactly (tests/support/moved_flow.hpp), where its flow's work is at most `--flow-work` units
// (2^25, about a second, unless given), else the bound of tests/support/moved_bound.hpp; at dp 2,
// where the solver moves more than the fewest of any, the fewest of those within the limit on B,
// exactly, where its table has at most 2^30 entries; and the batches whose search stopped at the
// work bound. `--smoke` runs a tiny grid (the ctest smoke run); `--json FILE` also writes one
// record per batch (every seed and eps) to FILE, with the batch's limit on B and the bytes the
// answer and Karmarkar-Karp move as integers (weighted with `--ranks-per-node`);
// `--write-batches DIR` writes every batch (once per seed) to DIR as the CSV packswap-plan reads,
// named DIST-DPxGA[xMBS]-sSEED.csv (a ':' in DIST as '_'), for tools that weigh the answers
// against other bounds (scripts/fewest_within_limit.py).
// `--cost-unit U` multiplies every batch's costs by U (not the reference's), as a finer unit
// would give them (10^6: microseconds in picoseconds), where the total stays within int64.
// `--work-scale S` solves every batch with `solve_options::work_scale` S (not the reference, which
// keeps the default, so "x ref" reads alike at every S): the dial between time and moved bytes.
// `--ranks-per-node N` solves every batch (not the reference) with N ranks to a node, a byte that
// crosses nodes weighing `--node-weight` (topology::uniform): the moved bytes, the answer's and
// Karmarkar-Karp's, are then the weighted bytes the solver minimises, and "LB mv" the bound on
// plain bytes, which no weighted figure is below (every moved byte weighs at least 1).
#include "../../examples/common/cli.hpp"

#include <packswap/balance/batch_csv.hpp>
#include <packswap/solve.hpp>
#include <packswap/version.hpp>

#include "baselines.hpp"
#include "moved_bound.hpp"
#include "moved_flow.hpp"
#include "stress.hpp"
#include "workloads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using packswap::pack_meta;
using packswap::shape;
namespace stress = packswap::test::stress;

const char* const presets[] = {"vlm-pretrain", "captioning", "high-res"};

// The most entries the exact two-rank bound within the limit may fill for one batch
// (moved_two_ranks_within): up to about a second; larger tables keep the bound without the limit.
constexpr std::int64_t two_rank_table_cells = std::int64_t{1} << 30;

// The most work the exact fewest moved bytes of any assignment (moved_fewest_exact) may take for
// one batch, unless `--flow-work` says otherwise: up to about a second (about 20 ns a unit); past
// it, the matroid bound stands.
constexpr std::int64_t fewest_flow_work = std::int64_t{1} << 25;

bool is_preset(const std::string& name) {
  return std::find(std::begin(presets), std::end(presets), name) != std::end(presets);
}

bool is_synthetic(const std::string& name) {
  const std::string prefix = "synthetic:";
  if (name.rfind(prefix, 0) != 0) {
    return false;
  }
  for (const auto m : packswap::test::all_mixes) {
    if (name.substr(prefix.size()) == packswap::test::name(m)) {
      return true;
    }
  }
  return false;
}

std::vector<pack_meta> make_batch(const std::string& dist, const shape& s, std::uint64_t seed) {
  stress::dist d{};
  if (stress::parse(dist, d)) {
    return stress::batch(s, d, seed);
  }
  return packswap::bench::named_batch(dist, s, seed);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

struct record {
  std::string section, dist;
  shape s;
  double eps;
  std::uint64_t seed;
  double ms;
  double a_ratio;     // A / LB_A
  double a_ratio_old; // A / max(sum of chunk maxima, ceil(total / dp))
  double b_kk;        // B / B_KK
  double b_limit;     // B / relax(B_KK, eps): at most 1 when the limit holds
  double moved_kk;    // moved bytes / Karmarkar–Karp's
  double lb_kk;       // the lower bound on moved bytes / Karmarkar–Karp's (mbs = 1), else -1
  bool bound_hit;     // the search stopped at its work bound
  std::int64_t work;  // stage 2's work count (solution::stage2_work)
  std::int64_t limit; // relax(B_KK, eps), the limit on every rank's load
  std::int64_t moved_bytes;
  std::int64_t kk_moved_bytes;
};

// One solve, timed: through `packswap::solve` (fresh working memory, as the CLI), or through a
// kept `solver` (`--kept`, as the engine). A kept solver first solves a batch with more packs
// than any before it once, untimed: that solve grows its memory (page faults a trainer pays once,
// not every step), and at 1,048,576 packs took over a second, which ended the batch's repeats
// (see main) with that solve as its time.
struct solve_timer {
  bool kept = false;
  packswap::solver solver;
  std::size_t warmed = 0; // the most packs a kept solver has solved

  double operator()(const std::vector<pack_meta>& packs, const shape& s,
                    const packswap::solve_options& opt, packswap::solution& out) {
    if (kept && packs.size() > warmed) {
      solver.solve(packs, s, opt, out);
      warmed = packs.size();
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (kept) {
      solver.solve(packs, s, opt, out);
    } else {
      out = packswap::solve(packs, s, opt);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

double ratio(double x, double of) {
  return of == 0 ? (x == 0 ? 1.0 : 0.0) : x / of;
}

// Bytes moved over Karmarkar–Karp's: 0 where neither moves any (dp = 1).
double bytes_ratio(double x, double of) {
  return of == 0 ? (x == 0 ? 0.0 : 1.0) : x / of;
}

// The former LB_A: max(sum of the sorted chunks' maxima, ceil(total / dp)).
std::int64_t former_lb_a(const std::vector<pack_meta>& packs, const shape& s) {
  std::vector<std::int64_t> sorted(packs.size());
  std::int64_t total = 0;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    sorted[p] = packs[p].cost;
    total += packs[p].cost;
  }
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::int64_t maxima = 0;
  for (std::size_t i = 0; i < sorted.size(); i += static_cast<std::size_t>(s.dp * s.mbs)) {
    maxima += sorted[i];
  }
  return std::max(maxima, (total + s.dp - 1) / s.dp);
}

std::string shape_name(const shape& s) {
  return std::to_string(s.dp) + "x" + std::to_string(s.ga) +
         (s.mbs == 1 ? "" : "x" + std::to_string(s.mbs));
}

constexpr const char* usage =
    "usage: packswap-bench-refine-stress [--packs 16384] [--ga 1,4,16,64,256,1024]\n"
    "    [--small-dp 1,2,4,8] [--large 262144,1048576|none] [--mbs 2,4|none]\n"
    "    [--shapes DPxGA[xMBS],...] [--dists all|a,b,...] [--eps 0,0.001,0.01] [--seeds 3]\n"
    "    [--first-seed 1] [--repeat 3] [--json FILE] [--write-batches DIR] [--kept]\n"
    "    [--flow-work 33554432] [--cost-unit 1] [--work-scale 1] [--ranks-per-node N]\n"
    "    [--node-weight 4] [--smoke]\n";

// Multiplies every cost of `packs` by `unit` (--cost-unit); a usage error, naming the batch,
// where their total would leave int64.
void scale_costs(std::vector<pack_meta>& packs, std::int64_t unit, const std::string& dist,
                 const shape& s, std::int64_t seed) {
  if (unit == 1) {
    return;
  }
  std::int64_t total = 0;
  for (auto& p : packs) {
    if (p.cost > (INT64_MAX - total) / unit) {
      throw packswap::cli::usage_error("--cost-unit " + std::to_string(unit) +
                                       " takes the total cost of " + dist + " " +
                                       std::to_string(s.dp) + "x" + std::to_string(s.ga) +
                                       " seed " + std::to_string(seed) + " past int64");
    }
    p.cost *= unit;
    total += p.cost;
  }
}

// Writes `packs` to DIR/DIST-SHAPE-sSEED.csv (see the header comment).
void write_batch(const std::string& dir, std::string dist, const shape& s, std::int64_t seed,
                 const std::vector<pack_meta>& packs) {
  std::replace(dist.begin(), dist.end(), ':', '_');
  const auto path = std::filesystem::path(dir) /
                    (dist + "-" + shape_name(s) + "-s" + std::to_string(seed) + ".csv");
  std::ofstream out(path);
  packswap::write_batch_csv(out, packs);
  if (!out) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

struct section {
  std::string name;
  std::vector<shape> shapes;
};

shape parse_shape(const std::string& text) {
  std::vector<std::int64_t> parts;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto x = text.find('x', at);
    const auto piece = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    char* end = nullptr;
    const long long v = std::strtoll(piece.c_str(), &end, 10);
    if (piece.empty() || *end != '\0' || v < 1 || v > (1LL << 26)) {
      throw packswap::cli::usage_error("--shapes has '" + text + "', expected DPxGA or DPxGAxMBS");
    }
    parts.push_back(v);
    if (x == std::string::npos) {
      break;
    }
    at = x + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    throw packswap::cli::usage_error("--shapes has '" + text + "', expected DPxGA or DPxGAxMBS");
  }
  return {static_cast<std::int32_t>(parts[0]), static_cast<std::int32_t>(parts[1]),
          static_cast<std::int32_t>(parts.size() == 3 ? parts[2] : 1)};
}

std::vector<section> sections_of(const packswap::cli::options& opt, bool smoke) {
  std::vector<section> sections;
  if (opt.has("shapes")) {
    section own{"shapes", {}};
    for (const auto& t : opt.texts("shapes", "")) {
      own.shapes.push_back(parse_shape(t));
    }
    sections.push_back(own);
    return sections;
  }
  const auto packs_n = opt.integer("packs", smoke ? 1024 : 16384, 1, 1 << 26);
  const auto gas = opt.integers("ga",
                                smoke ? std::vector<std::int64_t>{1, 16, 256}
                                      : std::vector<std::int64_t>{1, 4, 16, 64, 256, 1024},
                                1, 1 << 20);
  const auto small_dp = opt.integers(
      "small-dp", smoke ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{1, 2, 4, 8}, 0,
      1 << 20);
  section main{std::to_string(packs_n) + " packs", {}};
  for (const auto ga : gas) {
    if (packs_n % ga == 0) {
      main.shapes.push_back(
          {static_cast<std::int32_t>(packs_n / ga), static_cast<std::int32_t>(ga), 1});
    }
  }
  for (const auto dp : small_dp) {
    if (dp > 0) {
      main.shapes.push_back({static_cast<std::int32_t>(dp), 1024, 1});
    }
  }
  sections.push_back(main);
  if (opt.text("large", smoke ? "none" : "") != "none") {
    for (const auto n : opt.integers("large", {262144, 1048576}, 16, 1 << 26)) {
      section sec{std::to_string(n) + " packs", {}};
      for (const std::int64_t ga : {16, 64, 256}) {
        if (n % ga == 0 && (ga == 16 || n <= 262144)) {
          sec.shapes.push_back(
              {static_cast<std::int32_t>(n / ga), static_cast<std::int32_t>(ga), 1});
        }
      }
      sections.push_back(sec);
    }
  }
  if (opt.text("mbs", smoke ? "none" : "") != "none") {
    section cells{std::to_string(packs_n) + " packs in cells of several", {}};
    for (const auto mbs : opt.integers("mbs", {2, 4}, 2, 1 << 10)) {
      for (const std::int64_t ga : {4, 16, 64}) {
        if (packs_n % (ga * mbs) == 0) {
          cells.shapes.push_back({static_cast<std::int32_t>(packs_n / (ga * mbs)),
                                  static_cast<std::int32_t>(ga), static_cast<std::int32_t>(mbs)});
        }
      }
    }
    sections.push_back(cells);
  }
  return sections;
}

int run(int argc, char** argv) {
  const packswap::cli::options opt(argc, argv,
                                   {"packs", "ga", "small-dp", "large", "mbs", "shapes", "dists",
                                    "eps", "seeds", "first-seed", "repeat", "json", "flow-work",
                                    "write-batches", "cost-unit", "work-scale", "ranks-per-node",
                                    "node-weight"},
                                   {"smoke", "kept", "help"});
  if (opt.flag("help")) {
    std::cout << usage;
    return 0;
  }
  const bool smoke = opt.flag("smoke");
  const std::string json = opt.text("json", "");
  const std::string batches_dir = opt.text("write-batches", "");
  if (!batches_dir.empty()) {
    std::filesystem::create_directories(batches_dir);
  }
  const auto sections = sections_of(opt, smoke);
  std::vector<std::string> dists;
  if (opt.text("dists", "all") == "all") {
    for (const auto d : stress::all_dists) {
      dists.emplace_back(stress::name(d));
    }
    if (!smoke) {
      dists.insert(dists.end(), std::begin(presets), std::end(presets));
    }
  } else {
    dists = opt.texts("dists", "all");
    for (const auto& d : dists) {
      stress::dist parsed{};
      if (!stress::parse(d, parsed) && !is_preset(d) && !is_synthetic(d)) {
        throw packswap::cli::usage_error("--dists has '" + d + "', not a distribution");
      }
    }
  }
  const auto eps_text = opt.text("eps", smoke ? "0,0.01" : "0,0.001,0.01");
  const auto eps_list = opt.reals("eps", eps_text, 0, 1);
  const auto seeds = opt.integer("seeds", smoke ? 1 : 3, 1, 100000);
  const auto first_seed = opt.integer("first-seed", 1, 0, INT64_MAX / 2);
  const auto repeat = static_cast<int>(opt.integer("repeat", smoke ? 1 : 3, 1, 1000));

  // The reference batch, solved between cells.
  const shape ref_shape = smoke ? shape{64, 16, 1} : shape{1024, 16, 1};
  const auto ref_batch = packswap::bench::preset_batch("vlm-pretrain", ref_shape, 42);
  std::vector<double> ref_ms;
  packswap::solution sol;
  solve_timer timed_solve;
  timed_solve.kept = opt.flag("kept");
  const auto flow_work = opt.integer("flow-work", fewest_flow_work, 0, INT64_MAX / 2);
  const auto cost_unit = opt.integer("cost-unit", 1, 1, INT64_MAX);
  const double work_scale = opt.real("work-scale", 1.0, 0.001, 64.0);
  // One node unless --ranks-per-node: then every weighted byte below is a plain one.
  const auto ranks_per_node = opt.integer("ranks-per-node", 0, 1, INT32_MAX);
  const auto node_weight = opt.integer("node-weight", 4, 1, INT64_MAX);
  if (opt.has("node-weight") && ranks_per_node == 0) {
    throw packswap::cli::usage_error("--node-weight needs --ranks-per-node");
  }
  const packswap::topology topo =
      ranks_per_node == 0
          ? packswap::topology{}
          : packswap::topology::uniform(static_cast<std::int32_t>(ranks_per_node), node_weight);
  const auto reference = [&](int times) {
    for (int i = 0; i < times; ++i) {
      ref_ms.push_back(timed_solve(ref_batch, ref_shape, {}, sol));
    }
  };
  reference(5);

  std::vector<record> records;
  for (const auto& sec : sections) {
    for (const auto& dist : dists) {
      for (const auto& s : sec.shapes) {
        if (is_preset(dist) && s.packs() > 262144) {
          continue;
        }
        for (std::int64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
          auto packs = make_batch(dist, s, static_cast<std::uint64_t>(seed));
          scale_costs(packs, cost_unit, dist, s, seed);
          if (!batches_dir.empty()) {
            write_batch(batches_dir, dist, s, seed, packs);
          }
          const auto kk = packswap::bench::karmarkar_karp_per_step(packs, s);
          const std::int64_t kk_moved =
              packswap::measure_movement(packs, kk, s, topo).weighted_bytes;
          const auto kk_bytes = static_cast<double>(kk_moved);
          std::int64_t lb = s.mbs == 1 ? packswap::test::moved_lower_bound(packs, s) : -1;
          if (s.mbs == 1 && s.dp > 2) { // at dp 2 the bound is exact already
            lb = packswap::test::moved_fewest_exact(packs, s, flow_work).value_or(lb);
          }
          const auto old_lb = static_cast<double>(former_lb_a(packs, s));
          for (const double e : eps_list) {
            packswap::solve_options so;
            so.eps = e;
            so.work_scale = work_scale;
            so.topology = topo;
            std::vector<double> times;
            for (int r = 0; r < repeat; ++r) {
              times.push_back(timed_solve(packs, s, so, sol));
              // A second is enough to know, but not from a kept solver's first solve of the
              // batch, which may still grow its memory (a path it had not taken before).
              if (times.back() > 1000.0 && (r > 0 || !timed_solve.kept)) {
                break;
              }
            }
            const auto& b = sol.balance;
            const std::int64_t limit =
                packswap::detail::relax(sol.stage1_b, packswap::detail::eps_ppm(e));
            // With two ranks, where the solver moves more than the fewest of any assignment, the
            // fewest of those within the limit (exact; skipped where its table is too large).
            std::int64_t lb_within = lb;
            const std::int64_t moved = sol.movement.weighted_bytes;
            if (s.dp == 2 && s.mbs == 1 && moved > lb) {
              const auto within =
                  packswap::test::moved_two_ranks_within(packs, limit, two_rank_table_cells);
              lb_within = within.value_or(lb);
            }
            const double lb_kk =
                lb < 0 ? -1 : bytes_ratio(static_cast<double>(lb_within), kk_bytes);
            records.push_back({sec.name, dist, s, e, static_cast<std::uint64_t>(seed),
                               median(times),
                               ratio(static_cast<double>(b.a), static_cast<double>(b.lb_a)),
                               ratio(static_cast<double>(b.a), old_lb),
                               ratio(static_cast<double>(b.b), static_cast<double>(sol.stage1_b)),
                               ratio(static_cast<double>(b.b), static_cast<double>(limit)),
                               bytes_ratio(static_cast<double>(moved), kk_bytes), lb_kk,
                               sol.stage2_bounded, sol.stage2_work, limit, moved, kk_moved});
          }
        }
        reference(1);
      }
    }
  }
  const double ref = median(ref_ms);

  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"cpu\": " << packswap::cli::quote(cpu_model())
        << ", \"reference_ms\": " << packswap::cli::number(ref)
        << ", \"solver\": " << packswap::cli::quote(timed_solve.kept ? "kept" : "fresh")
        << ", \"work_scale\": " << packswap::cli::number(work_scale)
        << ", \"ranks_per_node\": " << ranks_per_node
        << ", \"node_weight\": " << (ranks_per_node == 0 ? 1 : node_weight) << ", \"batches\": [";
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      out << (i == 0 ? "\n  " : ",\n  ") << "{\"section\": " << packswap::cli::quote(r.section)
          << ", \"dist\": " << packswap::cli::quote(r.dist) << ", \"dp\": " << r.s.dp
          << ", \"ga\": " << r.s.ga << ", \"mbs\": " << r.s.mbs
          << ", \"eps\": " << packswap::cli::number(r.eps) << ", \"seed\": " << r.seed
          << ", \"ms\": " << packswap::cli::number(r.ms)
          << ", \"x_ref\": " << packswap::cli::number(r.ms / ref)
          << ", \"a_over_lb_a\": " << packswap::cli::number(r.a_ratio)
          << ", \"a_over_former_lb_a\": " << packswap::cli::number(r.a_ratio_old)
          << ", \"b_over_b_kk\": " << packswap::cli::number(r.b_kk)
          << ", \"b_over_limit\": " << packswap::cli::number(r.b_limit)
          << ", \"moved_bytes_vs_kk\": " << packswap::cli::number(r.moved_kk)
          << ", \"moved_lower_bound_vs_kk\": " << packswap::cli::number(r.lb_kk)
          << ", \"bound_hit\": " << (r.bound_hit ? "true" : "false")
          << ", \"stage2_work\": " << r.work << ", \"limit\": " << r.limit
          << ", \"moved_bytes\": " << r.moved_bytes << ", \"kk_moved_bytes\": " << r.kk_moved_bytes
          << "}";
    }
    out << "\n]}\n";
  }

  std::printf("packswap %s, %s, one thread; full solve as packswap-plan calls it\n",
              packswap::version_string, cpu_model().c_str());
  std::printf("reference: vlm-pretrain dp %d x ga %d, median %.3f ms over %zu solves in this run\n",
              ref_shape.dp, ref_shape.ga, ref, ref_ms.size());
  std::printf("worst over %lld seeds (from %lld) and eps {%s}; repeat %d (median)%s\n",
              static_cast<long long>(seeds), static_cast<long long>(first_seed), eps_text.c_str(),
              repeat, timed_solve.kept ? "; one solver kept across calls" : "");
  if (work_scale != 1.0) {
    std::printf("work_scale %g for every batch but the reference\n", work_scale);
  }
  if (ranks_per_node != 0) {
    std::printf("%lld ranks to a node, a byte across nodes weighing %lld, for every batch but the "
                "reference; moved bytes weighted\n",
                static_cast<long long>(ranks_per_node), static_cast<long long>(node_weight));
  }
  struct worst {
    double ms = 0, a = 0, a_old = 0, b = -1, limit = 0, lb = -1; // b: -1 without eps = 0
    std::vector<double> moved;
    int hits = 0, batches = 0;
  };
  // B / B_KK is read at eps = 0 only: "-" where a cell has no batch there.
  const auto print_ratio = [](double v) {
    if (v >= 0) {
      std::printf(" %7.4f", v);
    } else {
      std::printf(" %7s", "-");
    }
  };
  const auto eps_index = [&](double e) {
    return static_cast<std::size_t>(std::find(eps_list.begin(), eps_list.end(), e) -
                                    eps_list.begin());
  };
  for (const auto& sec : sections) {
    std::printf("\n%s\n  %-22s %-12s %9s %6s %7s %7s %7s", sec.name.c_str(), "dist", "shape",
                "worst ms", "x ref", "A/LB_A", "A/LBold", "B/B_KK");
    for (const double e : eps_list) {
      std::printf(" mv@%-5g", e);
    }
    std::printf(" %6s %7s\n", "LB mv", "bound");
    worst all;
    all.moved.assign(eps_list.size(), 0);
    for (const auto& dist : dists) {
      for (const auto& s : sec.shapes) {
        worst w;
        w.moved.assign(eps_list.size(), 0);
        for (const auto& r : records) {
          if (r.section != sec.name || r.dist != dist || r.s.dp != s.dp || r.s.ga != s.ga ||
              r.s.mbs != s.mbs) {
            continue;
          }
          for (worst* t : {&w, &all}) {
            t->ms = std::max(t->ms, r.ms);
            t->a = std::max(t->a, r.a_ratio);
            t->a_old = std::max(t->a_old, r.a_ratio_old);
            t->limit = std::max(t->limit, r.b_limit);
            t->lb = std::max(t->lb, r.lb_kk);
            if (r.eps == 0) {
              t->b = std::max(t->b, r.b_kk);
            }
            auto& m = t->moved[eps_index(r.eps)];
            m = std::max(m, r.moved_kk);
            t->hits += r.bound_hit ? 1 : 0;
            ++t->batches;
          }
        }
        if (w.batches == 0) {
          continue;
        }
        std::printf("  %-22s %-12s %9.3f %6.2f %7.4f %7.4f", dist.c_str(), shape_name(s).c_str(),
                    w.ms, w.ms / ref, w.a, w.a_old);
        print_ratio(w.b);
        for (const double m : w.moved) {
          std::printf(" %8.3f", m);
        }
        if (w.lb >= 0) {
          std::printf(" %6.3f", w.lb);
        } else {
          std::printf(" %6s", "-");
        }
        std::printf(" %3d/%-3d%s\n", w.hits, w.batches, w.limit > 1.0 ? "  B ABOVE LIMIT" : "");
      }
    }
    std::printf("  %-22s %-12s %9.3f %6.2f %7.4f %7.4f", "worst", "", all.ms, all.ms / ref, all.a,
                all.a_old);
    print_ratio(all.b);
    for (const double m : all.moved) {
      std::printf(" %8.3f", m);
    }
    std::printf(" %6s %3d/%-3d\n", "", all.hits, all.batches);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return packswap::cli::guarded_main("stress", usage, run, argc, argv);
}
