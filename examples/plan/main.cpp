// packswap-plan: one global batch as CSV in, the solver's assignment and metrics as JSON out.
//
//   packswap-plan --dp D --ga G [--mbs M] [--mode per-micro-step|per-step] [--eps E]
//                 [--ranks-per-node K] [--inter-node-weight W] [--work-scale S]
//                 < packs.csv > plan.json
//
// The CSV has the header `pack,source_rank,cost,bytes`, pack ids 0..N-1 in order, and every
// source rank owns exactly ga * mbs packs. Errors go to stderr with the offending line; the exit
// status is 1 for bad input, 2 for bad arguments.
#include "../common/cli.hpp"

#include <packswap/balance/batch_csv.hpp>
#include <packswap/solve.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

namespace {

constexpr const char* usage =
    "usage: packswap-plan --dp D --ga G [--mbs M] [--mode per-micro-step|per-step] [--eps E]\n"
    "                     [--ranks-per-node K] [--inter-node-weight W] [--work-scale S]\n"
    "                     < packs.csv > plan.json\n";

int run(int argc, char** argv) {
  const packswap::cli::options opt(
      argc, argv,
      {"dp", "ga", "mbs", "mode", "eps", "ranks-per-node", "inter-node-weight", "work-scale"},
      {"help"});
  if (opt.flag("help")) {
    std::cout << usage;
    return 0;
  }
  if (!opt.has("dp") || !opt.has("ga")) {
    throw packswap::cli::usage_error("--dp and --ga are required");
  }
  const packswap::shape shape{static_cast<std::int32_t>(opt.integer("dp", 0, 1, INT32_MAX)),
                              static_cast<std::int32_t>(opt.integer("ga", 0, 1, INT32_MAX)),
                              static_cast<std::int32_t>(opt.integer("mbs", 1, 1, INT32_MAX))};
  packswap::solve_options so;
  const auto mode = opt.text("mode", "per-micro-step");
  if (mode == "per-step") {
    so.mode = packswap::sync_mode::per_step;
  } else if (mode != "per-micro-step") {
    throw packswap::cli::usage_error("--mode is '" + mode +
                                     "', expected per-micro-step or per-step");
  }
  so.eps = opt.real("eps", 0.0, 0.0, 1.0);
  so.work_scale = opt.real("work-scale", 1.0, 0.001, 64.0);
  if (opt.has("ranks-per-node")) {
    so.topology = packswap::topology::uniform(
        static_cast<std::int32_t>(opt.integer("ranks-per-node", 1, 1, INT32_MAX)),
        opt.integer("inter-node-weight", 4, 1, 1 << 20));
  }
  const auto packs = packswap::read_batch_csv(std::cin);
  const auto t0 = std::chrono::steady_clock::now();
  const auto sol = packswap::solve(packs, shape, so);
  const auto solve_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();

  std::string out = "{\"assignment\": [";
  for (std::size_t p = 0; p < sol.cells.size(); ++p) {
    out += (p == 0 ? "[" : ", [") + std::to_string(sol.cells[p].rank) + ", " +
           std::to_string(sol.cells[p].micro_step) + "]";
  }
  const auto& b = sol.balance;
  const auto& m = sol.movement;
  out += "],\n \"metrics\": {\"A\": " + std::to_string(b.a) +
         ", \"LB_A\": " + std::to_string(b.lb_a) + ", \"B\": " + std::to_string(b.b) +
         ", \"LB_B\": " + std::to_string(b.lb_b) + ", \"moved\": " + std::to_string(m.moved) +
         ", \"moved_bytes\": " + std::to_string(m.moved_bytes) +
         ", \"weighted_bytes\": " + std::to_string(m.weighted_bytes) +
         ", \"inter_node_bytes\": " + std::to_string(m.inter_node_bytes) +
         ", \"max_peers\": " + std::to_string(m.max_peers) +
         ", \"solve_us\": " + packswap::cli::number(solve_us) + "}}\n";
  std::cout << out;
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return packswap::cli::guarded_main("packswap-plan", usage, run, argc, argv);
}
