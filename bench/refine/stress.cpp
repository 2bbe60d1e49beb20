// The solver's worst case: the full solve on the stress set (tests/support/stress.hpp) and the
// existing workloads, over shapes dp x ga at a fixed pack count, printing per shape and
// distribution the WORST over seeds and eps of every figure.
//
//   packswap-bench-refine-stress [--packs 16384] [--ga 1,4,16,64,256,1024] [--small-dp 1,2,4,8]
//       [--large 262144,1048576] [--dists all] [--eps 0,0.001,0.01] [--seeds 3] [--repeat 3]
//       [--json FILE] [--smoke]
//
// Sections: (1) `--packs` packs as dp x ga for every ga of `--ga`, and dp x 1,024 for every dp of
// `--small-dp`; (2) each pack count of `--large` at ga 16, 64 and 256 (ga 16 alone above 262,144
// packs). `--dists`: stress distributions (lognormal, pareto, bimodal, ties, multiples,
// near_equal, heavy_rank, bytes_tied, bytes_near) and workload presets (vlm-pretrain, captioning,
// high-res; not above 262,144 packs), or `all`. Every batch is solved `--repeat` times through
// `packswap::solve` as the CLI calls it (every rank's plan, peers counted), single-threaded;
// its time is the median. The reference is the benchmark's batch (vlm-pretrain, dp 1,024 x
// ga 16, seed 42, as bench/balance/solve.cpp), solved between the cells of the same run: its
// median over the run divides every time ("x ref").
//
// Columns: worst solve ms, x ref, A / LB_A, B / B_KK (B_KK: stage 1's Karmarkar–Karp B; at
// eps > 0, B / (B_KK (1 + eps)) is shown if above 1), moved bytes / Karmarkar–Karp's (the
// kk-per-step baseline of side_by_side) at each eps, and the batches whose search hit the work
// bound. `--smoke` runs a tiny grid (the ctest smoke run); `--json FILE` also writes one record per
// batch (every seed and eps) to FILE.
#include "../../examples/common/cli.hpp"

#include <packswap/solve.hpp>
#include <packswap/version.hpp>

#include "baselines.hpp"
#include "stress.hpp"
#include "workloads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

using packswap::pack_meta;
using packswap::shape;
namespace stress = packswap::test::stress;

const char* const presets[] = {"vlm-pretrain", "captioning", "high-res"};

bool is_preset(const std::string& name) {
  return std::find(std::begin(presets), std::end(presets), name) != std::end(presets);
}

std::vector<pack_meta> make_batch(const std::string& dist, const shape& s, std::uint64_t seed) {
  stress::dist d{};
  if (stress::parse(dist, d)) {
    return stress::batch(s, d, seed);
  }
  return packswap::bench::preset_batch(dist, s, seed);
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
  std::int32_t dp, ga;
  double eps;
  std::uint64_t seed;
  double ms;
  double a_ratio;  // A / LB_A
  double b_kk;     // B / B_KK
  double b_limit;  // B / relax(B_KK, eps): at most 1 when the limit holds
  double moved_kk; // moved bytes / Karmarkar–Karp's
  bool bound_hit;  // the search stopped at its work bound
};

double timed_solve(const std::vector<pack_meta>& packs, const shape& s,
                   const packswap::solve_options& opt, packswap::solution& out) {
  const auto t0 = std::chrono::steady_clock::now();
  out = packswap::solve(packs, s, opt);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

constexpr const char* usage =
    "usage: packswap-bench-refine-stress [--packs 16384] [--ga 1,4,16,64,256,1024]\n"
    "    [--small-dp 1,2,4,8] [--large 262144,1048576|none] [--dists all|a,b,...]\n"
    "    [--eps 0,0.001,0.01] [--seeds 3] [--repeat 3] [--json FILE] [--smoke]\n";

struct section {
  std::string name;
  std::vector<shape> shapes;
};

int run(int argc, char** argv) {
  const packswap::cli::options opt(
      argc, argv, {"packs", "ga", "small-dp", "large", "dists", "eps", "seeds", "repeat", "json"},
      {"smoke", "help"});
  if (opt.flag("help")) {
    std::cout << usage;
    return 0;
  }
  const bool smoke = opt.flag("smoke");
  const std::string json = opt.text("json", "");
  const auto packs_n = opt.integer("packs", smoke ? 1024 : 16384, 1, 1 << 26);
  const auto gas = opt.integers("ga",
                                smoke ? std::vector<std::int64_t>{1, 16, 256}
                                      : std::vector<std::int64_t>{1, 4, 16, 64, 256, 1024},
                                1, 1 << 20);
  const auto small_dp = opt.integers(
      "small-dp", smoke ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{1, 2, 4, 8}, 0,
      1 << 20);
  std::vector<std::int64_t> large;
  if (opt.text("large", smoke ? "none" : "") != "none") {
    large = opt.integers("large", {262144, 1048576}, 16, 1 << 26);
  }
  std::vector<std::string> dists;
  const auto dist_text = opt.text("dists", "all");
  if (dist_text == "all") {
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
      if (!stress::parse(d, parsed) && !is_preset(d)) {
        throw packswap::cli::usage_error("--dists has '" + d + "', not a distribution");
      }
    }
  }
  const auto eps_list = opt.reals("eps", smoke ? "0,0.01" : "0,0.001,0.01", 0, 1);
  const auto seeds = opt.integer("seeds", smoke ? 1 : 3, 1, 1000);
  const auto repeat = static_cast<int>(opt.integer("repeat", smoke ? 1 : 3, 1, 1000));

  std::vector<section> sections;
  {
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
  }
  for (const auto n : large) {
    section sec{std::to_string(n) + " packs", {}};
    for (const std::int64_t ga : {16, 64, 256}) {
      if (n % ga == 0 && (ga == 16 || n <= 262144)) {
        sec.shapes.push_back({static_cast<std::int32_t>(n / ga), static_cast<std::int32_t>(ga), 1});
      }
    }
    sections.push_back(sec);
  }

  // The reference batch, solved between cells.
  const shape ref_shape = smoke ? shape{64, 16, 1} : shape{1024, 16, 1};
  const auto ref_batch = packswap::bench::preset_batch("vlm-pretrain", ref_shape, 42);
  std::vector<double> ref_ms;
  packswap::solution sol;
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
        for (std::int64_t seed = 1; seed <= seeds; ++seed) {
          const auto packs = make_batch(dist, s, static_cast<std::uint64_t>(seed));
          const auto kk = packswap::bench::karmarkar_karp_per_step(packs, s);
          const auto kk_bytes = packswap::measure_movement(packs, kk, s).moved_bytes;
          for (const double e : eps_list) {
            packswap::solve_options so;
            so.eps = e;
            std::vector<double> times;
            for (int r = 0; r < repeat; ++r) {
              times.push_back(timed_solve(packs, s, so, sol));
              if (times.back() > 1000.0) {
                break; // a second is enough to know
              }
            }
            const auto& b = sol.balance;
            const auto ratio = [](std::int64_t x, std::int64_t lb) {
              return lb == 0 ? (x == 0 ? 1.0 : 0.0)
                             : static_cast<double>(x) / static_cast<double>(lb);
            };
            const std::int64_t limit =
                packswap::detail::relax(sol.stage1_b, packswap::detail::eps_ppm(e));
            records.push_back({sec.name, dist, s.dp, s.ga, e, static_cast<std::uint64_t>(seed),
                               median(times), ratio(b.a, b.lb_a), ratio(b.b, sol.stage1_b),
                               ratio(b.b, limit),
                               kk_bytes == 0 ? (sol.movement.moved_bytes == 0 ? 0.0 : 1.0)
                                             : static_cast<double>(sol.movement.moved_bytes) /
                                                   static_cast<double>(kk_bytes),
                               false});
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
        << ", \"reference_ms\": " << packswap::cli::number(ref) << ", \"batches\": [";
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      out << (i == 0 ? "\n  " : ",\n  ") << "{\"section\": " << packswap::cli::quote(r.section)
          << ", \"dist\": " << packswap::cli::quote(r.dist) << ", \"dp\": " << r.dp
          << ", \"ga\": " << r.ga << ", \"eps\": " << packswap::cli::number(r.eps)
          << ", \"seed\": " << r.seed << ", \"ms\": " << packswap::cli::number(r.ms)
          << ", \"x_ref\": " << packswap::cli::number(r.ms / ref)
          << ", \"a_over_lb_a\": " << packswap::cli::number(r.a_ratio)
          << ", \"b_over_b_kk\": " << packswap::cli::number(r.b_kk)
          << ", \"b_over_limit\": " << packswap::cli::number(r.b_limit)
          << ", \"moved_bytes_vs_kk\": " << packswap::cli::number(r.moved_kk)
          << ", \"bound_hit\": " << (r.bound_hit ? "true" : "false") << "}";
    }
    out << "\n]}\n";
  }

  std::printf("packswap %s, %s, one thread; full solve as packswap-plan calls it\n",
              packswap::version_string, cpu_model().c_str());
  std::printf("reference: vlm-pretrain dp %d x ga %d, median %.3f ms over %zu solves in this run\n",
              ref_shape.dp, ref_shape.ga, ref, ref_ms.size());
  std::printf("worst over %lld seeds and eps {%s}\n", static_cast<long long>(seeds),
              opt.text("eps", smoke ? "0,0.01" : "0,0.001,0.01").c_str());
  struct worst {
    double ms = 0, a = 0, b = 0, limit = 0;
    std::vector<double> moved;
    int hits = 0, batches = 0;
  };
  const auto eps_index = [&](double e) {
    return static_cast<std::size_t>(std::find(eps_list.begin(), eps_list.end(), e) -
                                    eps_list.begin());
  };
  for (const auto& sec : sections) {
    std::printf("\n%s\n  %-12s %6s %5s %10s %7s %8s %8s", sec.name.c_str(), "dist", "dp", "ga",
                "worst ms", "x ref", "A/LB_A", "B/B_KK");
    for (const double e : eps_list) {
      std::printf("  mv@%-5g", e);
    }
    std::printf(" %7s\n", "bound");
    worst all;
    all.moved.assign(eps_list.size(), 0);
    for (const auto& dist : dists) {
      for (const auto& s : sec.shapes) {
        worst w;
        w.moved.assign(eps_list.size(), 0);
        for (const auto& r : records) {
          if (r.section != sec.name || r.dist != dist || r.dp != s.dp || r.ga != s.ga) {
            continue;
          }
          for (worst* t : {&w, &all}) {
            t->ms = std::max(t->ms, r.ms);
            t->a = std::max(t->a, r.a_ratio);
            t->limit = std::max(t->limit, r.b_limit);
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
        std::printf("  %-12s %6d %5d %10.3f %7.2f %8.4f %8.4f", dist.c_str(), s.dp, s.ga, w.ms,
                    w.ms / ref, w.a, w.b);
        for (const double m : w.moved) {
          std::printf("  %8.3f", m);
        }
        std::printf(" %3d/%-3d%s\n", w.hits, w.batches, w.limit > 1.0 ? "  B ABOVE LIMIT" : "");
      }
    }
    std::printf("  %-12s %6s %5s %10.3f %7.2f %8.4f %8.4f", "worst", "", "", all.ms, all.ms / ref,
                all.a, all.b);
    for (const double m : all.moved) {
      std::printf("  %8.3f", m);
    }
    std::printf(" %3d/%-3d\n", all.hits, all.batches);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return packswap::cli::guarded_main("stress", usage, run, argc, argv);
}
