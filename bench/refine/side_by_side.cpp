// packswap against the public balancing methods, on the same global batches.
//
//   packswap-bench-refine-side_by_side [--workloads a,b,...] [--dp 64,256,1024] [--ga 16]
//       [--eps 0,0.01] [--repeat 5] [--seed 42] [--json]
//
// Workloads are preset names (vlm-pretrain, captioning, high-res) or synthetic:<mix> (vlm, ties,
// uniform, ...). For each workload and dp it prints, per method: A / LB_A, B / LB_B, the share of
// packs and of bytes moved, moved bytes relative to Karmarkar–Karp's, and the median solve time
// (single thread) over --repeat runs.
#include "../../examples/common/cli.hpp"

#include <packswap/balance/metrics.hpp>
#include <packswap/refine/movement.hpp>
#include <packswap/solve.hpp>

#include "baselines.hpp"
#include "workloads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>

namespace {

using packswap::assignment;
using packswap::pack_meta;
using packswap::shape;

struct method {
  std::string name;
  std::function<assignment(const std::vector<pack_meta>&, const shape&)> run;
};

struct row {
  std::string workload;
  std::int32_t dp, ga;
  std::string method;
  double a_ratio, b_ratio, moved, moved_bytes, vs_kk, ms;
};

int run(int argc, char** argv) {
  const packswap::cli::options opt(argc, argv, {"workloads", "dp", "ga", "eps", "repeat", "seed"},
                                   {"json", "help"});
  if (opt.flag("help")) {
    std::cout << "usage: side_by_side [--workloads a,b] [--dp 64,256,1024] [--ga 16] [--eps 0,0.01]"
                 " [--repeat 5] [--seed 42] [--json]\n";
    return 0;
  }
  const auto workloads =
      opt.texts("workloads",
                "vlm-pretrain,captioning,high-res,synthetic:vlm,synthetic:ties,synthetic:uniform");
  const auto dps = opt.integers("dp", {64, 256, 1024}, 1, 1 << 20);
  const auto ga = static_cast<std::int32_t>(opt.integer("ga", 16, 1, 1 << 16));
  const auto eps = opt.reals("eps", "0,0.01", 0, 1);
  const auto repeat = static_cast<int>(opt.integer("repeat", 5, 1, 1000));
  const auto seed = static_cast<std::uint64_t>(opt.integer("seed", 42, 0, INT64_MAX));
  const bool json = opt.flag("json");

  std::vector<method> methods = {
      {"identity", packswap::bench::identity},
      {"round-robin", packswap::bench::sorted_round_robin},
      {"snake", packswap::bench::snake},
      {"lpt-per-micro-step", packswap::bench::lpt_per_micro_step},
      {"kk-per-step", packswap::bench::karmarkar_karp_per_step},
  };
  for (const double e : eps) {
    std::ostringstream name;
    name << "packswap eps=" << e;
    methods.push_back({name.str(), [e](const std::vector<pack_meta>& p, const shape& s) {
                         packswap::solve_options o;
                         o.eps = e;
                         o.plan_rank = 0; // what one rank computes
                         o.count_peers = false;
                         return packswap::solve(p, s, o).cells;
                       }});
  }

  std::vector<row> rows;
  for (const auto& w : workloads) {
    for (const auto dp : dps) {
      const shape s{static_cast<std::int32_t>(dp), ga, 1};
      const auto packs = packswap::bench::named_batch(w, s, seed);
      std::vector<std::int64_t> costs(packs.size());
      std::int64_t total_bytes = 0;
      for (std::size_t p = 0; p < packs.size(); ++p) {
        costs[p] = packs[p].cost;
        total_bytes += packs[p].bytes;
      }
      double kk_bytes = 0;
      for (const auto& m : methods) {
        std::vector<double> times;
        assignment a;
        for (int r = 0; r < repeat; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          a = m.run(packs, s);
          times.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        std::sort(times.begin(), times.end());
        const auto b = packswap::measure_balance(costs, a, s);
        const auto mv = packswap::measure_movement(packs, a, s);
        if (m.name == "kk-per-step") {
          kk_bytes = static_cast<double>(mv.moved_bytes);
        }
        const auto ratio = [](std::int64_t x, std::int64_t lb) {
          return lb == 0 ? (x == 0 ? 1.0 : 0.0) : static_cast<double>(x) / static_cast<double>(lb);
        };
        rows.push_back({w, s.dp, s.ga, m.name, ratio(b.a, b.lb_a), ratio(b.b, b.lb_b),
                        static_cast<double>(mv.moved) / static_cast<double>(packs.size()),
                        total_bytes == 0 ? 0.0
                                         : static_cast<double>(mv.moved_bytes) /
                                               static_cast<double>(total_bytes),
                        kk_bytes == 0 ? 0.0 : static_cast<double>(mv.moved_bytes) / kk_bytes,
                        times[times.size() / 2]});
      }
    }
  }

  if (json) {
    std::cout << "{\"runs\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      std::cout << (i == 0 ? "\n  " : ",\n  ")
                << "{\"workload\": " << packswap::cli::quote(r.workload) << ", \"dp\": " << r.dp
                << ", \"ga\": " << r.ga << ", \"method\": " << packswap::cli::quote(r.method)
                << ", \"a_over_lb_a\": " << packswap::cli::number(r.a_ratio)
                << ", \"b_over_lb_b\": " << packswap::cli::number(r.b_ratio)
                << ", \"moved\": " << packswap::cli::number(r.moved)
                << ", \"moved_bytes\": " << packswap::cli::number(r.moved_bytes)
                << ", \"moved_bytes_vs_kk\": " << packswap::cli::number(r.vs_kk)
                << ", \"solve_ms\": " << packswap::cli::number(r.ms) << "}";
    }
    std::cout << "\n]}\n";
    return 0;
  }
  std::string last;
  for (const auto& r : rows) {
    const std::string group =
        r.workload + " dp=" + std::to_string(r.dp) + " ga=" + std::to_string(r.ga);
    if (group != last) {
      std::printf("\n%s\n  %-20s %9s %9s %7s %8s %8s %10s\n", group.c_str(), "method", "A/LB_A",
                  "B/LB_B", "moved", "bytes", "vs KK", "solve ms");
      last = group;
    }
    std::printf("  %-20s %9.4f %9.4f %6.1f%% %7.1f%% %8.3f %10.3f\n", r.method.c_str(), r.a_ratio,
                r.b_ratio, 100 * r.moved, 100 * r.moved_bytes, r.vs_kk, r.ms);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "side_by_side: " << e.what() << "\n";
    return 1;
  }
}
