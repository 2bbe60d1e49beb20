// packswap-sim: the straggler simulator. Packs a workload once (1D, and 2D with an image budget),
// then runs global batches of every GPU count through five methods -- the loader's placement,
// 2D packing, local reordering, packswap with a synchronous and with an overlapped exchange -- and
// reports packing efficiency, straggler waste, step time, throughput and bytes moved. See
// `--help`; the library side is include/packswap/simulate/.
//
// Exit status: 0 on success, 1 for bad input (an unreadable CSV, a stream too short), 2 for bad
// arguments.
#include "../common/cli.hpp"
#include "plot.hpp"

#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/sample_csv.hpp>
#include <packswap/packing/workload.hpp>
#include <packswap/simulate/simulator.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* usage = R"(usage: packswap-sim [options]

workload
  --workload NAME            preset: vlm-pretrain (default), captioning, high-res, text-only
  --samples FILE.csv         per-sample statistics instead (tokens,images,documents; see
                             read_sample_csv), in stream order
  --pool-samples N           samples drawn from a preset (default 1048576; doubled until the
                             pool holds two global batches of the largest dp)
  --capacity T               tokens per pack (default 8192)
  --buffer N                 packer candidate buffer (default 1000)
  --budget T                 2D image-token budget per pack (default: the mean image tokens
                             of a 1D pack)
run
  --dp LIST                  GPU counts (default 8,16,32,64,128,256,512,1024,2048,4096)
  --ga G                     micro-steps per step (default 16)
  --steps N                  global batches per dp (default: max(8, 2^19 / (dp * ga)))
  --seed S                   workload and batch positions (default 42)
  --sync MODE                per-micro-step (default: FSDP, expert parallel) or per-step (DDP)
  --eps E                    solver eps (default 0.01 per micro-step: it only loosens B, which
                             is not the step time there, for less movement and a faster solve;
                             0 per step)
  --prefetch-first           hide micro-step 0's exchange behind the previous step
  --no-guard                 always take the solver's assignment, even when it is slower
  --flat                     solve without the node map (every moved byte alike)
  --threads N                worker threads (default: the hardware's)
compute model (forward + backward of one pack)
  --vit-fixed-ms X           ViT, per pack with an image (default 180)
  --vit-ms-per-image-token X ViT, per image token (default 0.84)
  --vit-attention-ns X       ViT, per (image tokens)^2 (default 0)
  --llm-ms X                 LLM, per pack padded to the capacity (default 1000 * capacity/8192)
  --llm-ms-per-token X       LLM, per real token (default 0)
  --llm-attention-ns X       LLM, per (document length)^2 (default 0)
exchange
  --bytes-per-image-token B  payload (default 4704: a 28x28 RGB patch in bf16)
  --bytes-per-text-token B   payload (default 4)
  --intra-gbps X             GB/s within a node (default 150)
  --inter-gbps X             GB/s across nodes (default 40)
  --latency-us X             per message (default 20)
  --ranks-per-node K         GPUs per node (default 8)
output
  --json | --csv             machine-readable results instead of the table
  --plot FILE.svg            also write waste against GPU count as an SVG
)";

using packswap::cli::usage_error;

struct config {
  std::string workload = "vlm-pretrain";
  std::string samples_csv;
  std::int64_t pool_samples = std::int64_t{1} << 20;
  std::int64_t capacity = 8192;
  std::int64_t buffer = 1000;
  std::int64_t budget = -1; // -1: the mean of the 1D packs
  std::vector<std::int64_t> dps;
  std::int32_t ga = 16;
  std::int64_t steps = 0; // 0: automatic, per dp
  std::uint64_t seed = 42;
  std::int64_t threads = 1;
  packswap::compute_model compute;
  packswap::payload_model payload;
  packswap::simulation_options sim;
  bool json = false;
  bool csv = false;
  std::string plot;
};

std::int64_t fs(double value, double fs_per_unit) {
  return std::llround(value * fs_per_unit);
}

config parse(int argc, char** argv) {
  const packswap::cli::options opt(argc, argv,
                                   {"workload",
                                    "samples",
                                    "pool-samples",
                                    "capacity",
                                    "buffer",
                                    "budget",
                                    "dp",
                                    "ga",
                                    "steps",
                                    "seed",
                                    "sync",
                                    "eps",
                                    "threads",
                                    "vit-fixed-ms",
                                    "vit-ms-per-image-token",
                                    "vit-attention-ns",
                                    "llm-ms",
                                    "llm-ms-per-token",
                                    "llm-attention-ns",
                                    "bytes-per-image-token",
                                    "bytes-per-text-token",
                                    "intra-gbps",
                                    "inter-gbps",
                                    "latency-us",
                                    "ranks-per-node",
                                    "plot"},
                                   {"help", "prefetch-first", "no-guard", "flat", "json", "csv"});
  if (opt.flag("help")) {
    std::cout << usage;
    std::exit(0);
  }
  config c;
  if (opt.has("workload") && opt.has("samples")) {
    throw usage_error("--workload and --samples exclude each other");
  }
  c.workload = opt.text("workload", c.workload);
  const auto names = packswap::workload_preset_names();
  if (std::find(names.begin(), names.end(), c.workload) == names.end()) {
    std::string known;
    for (const auto& n : names) {
      known += (known.empty() ? "" : ", ") + n;
    }
    throw usage_error("unknown workload preset '" + c.workload + "' (known: " + known + ")");
  }
  c.samples_csv = opt.text("samples", "");
  c.pool_samples = opt.integer("pool-samples", c.pool_samples, 1, INT32_MAX);
  c.capacity = opt.integer("capacity", c.capacity, 1, std::int64_t{1} << 22);
  c.buffer = opt.integer("buffer", c.buffer, 1, INT32_MAX);
  c.budget = opt.integer("budget", -1, 0, INT32_MAX);
  c.dps = opt.integers("dp", {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}, 1, 1 << 20);
  c.ga = static_cast<std::int32_t>(opt.integer("ga", c.ga, 1, 1 << 20));
  c.steps = opt.integer("steps", 0, 1, INT32_MAX);
  c.seed = static_cast<std::uint64_t>(opt.integer("seed", 42, 0, INT64_MAX));
  const auto sync = opt.text("sync", "per-micro-step");
  if (sync == "per-step") {
    c.sim.sync = packswap::sync_mode::per_step;
  } else if (sync != "per-micro-step") {
    throw usage_error("--sync is '" + sync + "', expected per-micro-step or per-step");
  }
  // Meeting every micro-step, the step time is A, which stage 2 keeps exact whatever eps is; eps
  // only lets B (irrelevant there) grow, and buys less movement and a much faster solve.
  const double default_eps = c.sim.sync == packswap::sync_mode::per_micro_step ? 0.01 : 0.0;
  c.sim.eps = opt.real("eps", default_eps, 0.0, 1.0);
  c.sim.first = opt.flag("prefetch-first") ? packswap::first_exchange::prefetched
                                           : packswap::first_exchange::exposed;
  c.sim.guard = !opt.flag("no-guard");
  c.sim.topology_aware = !opt.flag("flat");
  const auto hw = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  c.threads = opt.integer("threads", std::max<std::int64_t>(hw, 1), 1, 256);

  // Natural units in, integer femtoseconds and microseconds inside (1 ms = 10^12 fs).
  auto& vit = c.compute.vit;
  vit.vit_fixed_fs = fs(opt.real("vit-fixed-ms", 180.0, 0.0, 1e6), 1e12);
  vit.vit_per_image_token_fs = fs(opt.real("vit-ms-per-image-token", 0.84, 0.0, 1e6), 1e12);
  vit.vit_attention_fs = fs(opt.real("vit-attention-ns", 0.0, 0.0, 1e9), 1e6);
  auto& llm = c.compute.llm;
  const double llm_default_ms = 1000.0 * static_cast<double>(c.capacity) / 8192.0;
  llm.pack_us = std::llround(opt.real("llm-ms", llm_default_ms, 0.0, 1e9) * 1000.0);
  llm.per_token_fs = fs(opt.real("llm-ms-per-token", 0.0, 0.0, 1e6), 1e12);
  llm.attention_fs = fs(opt.real("llm-attention-ns", 0.0, 0.0, 1e9), 1e6);
  c.payload.bytes_per_image_token = opt.integer("bytes-per-image-token", 4704, 0, 1 << 30);
  c.payload.bytes_per_text_token = opt.integer("bytes-per-text-token", 4, 0, 1 << 30);

  auto& net = c.sim.network;
  net.intra_node_bytes_per_s = std::llround(opt.real("intra-gbps", 150.0, 1e-6, 1e4) * 1e9);
  net.inter_node_bytes_per_s = std::llround(opt.real("inter-gbps", 40.0, 1e-6, 1e4) * 1e9);
  net.latency_ns = std::llround(opt.real("latency-us", 20.0, 0.0, 1e6) * 1000.0);
  net.ranks_per_node =
      static_cast<std::int32_t>(opt.integer("ranks-per-node", 8, 1, std::int64_t{1} << 20));

  c.json = opt.flag("json");
  c.csv = opt.flag("csv");
  if (c.json && c.csv) {
    throw usage_error("--json and --csv exclude each other");
  }
  c.plot = opt.text("plot", "");
  return c;
}

bool progress_on() {
  static const bool tty = isatty(STDERR_FILENO) != 0;
  return tty;
}

void progress(const std::string& line) {
  if (progress_on()) {
    std::cerr << "\r\033[K" << line << std::flush;
  }
}

// The workload packed both ways, priced, with what the report says about it.
struct streams {
  packswap::pack_stream one_d;
  packswap::pack_stream two_d;
  std::string source;
  std::int64_t samples = 0;
  packswap::packing_metrics m1;
  packswap::packing_metrics m2;
  std::int64_t budget = 0;
};

streams build(const config& c) {
  streams out;
  std::int64_t largest = 0;
  for (const auto dp : c.dps) {
    largest = std::max(largest, dp * c.ga);
  }
  packswap::sample_set set;
  packswap::pack_list one_d;
  const packswap::greedy_packer packer{c.capacity, c.buffer};
  if (!c.samples_csv.empty()) {
    std::ifstream file(c.samples_csv);
    if (!file) {
      throw std::runtime_error("cannot read '" + c.samples_csv + "'");
    }
    progress("packswap-sim: reading " + c.samples_csv);
    set = packswap::read_sample_csv(file);
    one_d = packer(set);
    out.source = c.samples_csv;
  } else {
    const auto w = packswap::workload_preset(c.workload);
    // Two global batches of the largest dp at least, so batches are not all one stretch.
    for (std::int64_t n = c.pool_samples;; n = std::min<std::int64_t>(2 * n, INT32_MAX)) {
      progress("packswap-sim: drawing and packing " + std::to_string(n) + " samples");
      set = packswap::generate(w, n, c.seed);
      one_d = packer(set);
      if (static_cast<std::int64_t>(one_d.size()) >= 2 * largest || n == INT32_MAX) {
        break;
      }
    }
    out.source = "workload " + c.workload;
  }
  if (static_cast<std::int64_t>(one_d.size()) < largest) {
    std::ostringstream os;
    os << out.source << ": " << set.size() << " samples make " << one_d.size()
       << " packs, a global batch of dp * ga = " << largest << " needs more";
    throw std::runtime_error(os.str());
  }
  out.samples = static_cast<std::int64_t>(set.size());
  out.budget = c.budget >= 0 ? c.budget : packswap::mean_image_tokens_per_pack(one_d);
  packswap::budgeted_packer two_d_packer{c.capacity, out.budget, c.buffer};
  two_d_packer.on_oversize = packswap::oversize_policy::skip;
  progress("packswap-sim: 2D packing");
  const auto two_d = two_d_packer(set);
  if (static_cast<std::int64_t>(two_d.size()) < largest) {
    throw std::runtime_error("the 2D packing makes " + std::to_string(two_d.size()) +
                             " packs, a global batch needs " + std::to_string(largest));
  }
  progress("packswap-sim: pricing packs");
  // Batches come from the packers' steady middle (see drop_ends), as far as the stream allows.
  const auto steady = [&](const packswap::pack_list& packs) {
    const auto n = static_cast<std::int64_t>(packs.size());
    const std::int64_t drop = std::min(2 * c.buffer, (n - largest) / 2);
    return packswap::drop_ends(packswap::make_pack_stream(set, packs, c.compute, c.payload),
                               static_cast<std::size_t>(drop));
  };
  out.one_d = steady(one_d);
  out.two_d = steady(two_d);
  out.m1 = packswap::measure_packing(one_d);
  out.m2 = packswap::measure_packing(two_d);
  return out;
}

std::int64_t steps_for(const config& c, std::int64_t dp) {
  if (c.steps > 0) {
    return c.steps;
  }
  // Enough packs for stable figures: many batches where a batch is small, at least 8.
  const std::int64_t target = std::int64_t{1} << 19;
  return std::max<std::int64_t>(8, (target + dp * c.ga - 1) / (dp * c.ga));
}

// One dp: global batches on `threads` threads, accumulated in order (the same figures on any
// number of threads).
std::array<packswap::method_summary, 5> run_dp(const config& c, const streams& st,
                                               std::int64_t dp) {
  const packswap::shape s{static_cast<std::int32_t>(dp), c.ga, 1};
  packswap::validate(s);
  const std::int64_t steps = steps_for(c, dp);
  std::vector<packswap::batch_result> results(static_cast<std::size_t>(steps));
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto work = [&](bool report) {
    try {
      for (;;) {
        const std::int64_t k = next++;
        if (k >= steps || failed) {
          return;
        }
        results[static_cast<std::size_t>(k)] =
            packswap::simulate_step(st.one_d, st.two_d, s, steps, k, c.seed, c.sim);
        const std::int64_t n = ++done;
        if (report) {
          progress("packswap-sim: dp " + std::to_string(dp) + ": " + std::to_string(n) + "/" +
                   std::to_string(steps) + " global batches");
        }
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) {
        error = std::current_exception();
      }
      failed = true;
    }
  };
  std::vector<std::thread> helpers;
  const std::int64_t extra = std::min(c.threads, steps) - 1;
  for (std::int64_t t = 0; t < extra; ++t) {
    helpers.emplace_back(work, false);
  }
  work(true);
  for (auto& t : helpers) {
    t.join();
  }
  if (error) {
    std::rethrow_exception(error);
  }
  packswap::run_totals totals{};
  for (const auto& r : results) {
    packswap::accumulate(totals, r);
  }
  return packswap::summarize(totals, s.dp, st.one_d.capacity);
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) {
    b /= 1000.0;
    ++u;
  }
  std::ostringstream os;
  os << std::fixed << std::setprecision(u == 0 ? 0 : 1) << b << " " << units[u];
  return os.str();
}

std::string percent(double x, int digits = 2) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << 100.0 * x << "%";
  return os.str();
}

void print_header(const config& c, const streams& st) {
  const auto& v = c.compute.vit;
  std::cout << "packswap-sim: " << st.source << ", " << st.samples << " samples\n"
            << "  1D packs: " << st.m1.packs << " packs of " << c.capacity << " tokens, "
            << percent(st.m1.efficiency()) << " full, image tokens per pack median "
            << st.m1.image_tokens_per_pack.median << ", p99 " << st.m1.image_tokens_per_pack.p99
            << "\n"
            << "  2D packs: image budget " << st.budget << ", " << st.m2.packs << " packs, "
            << percent(st.m2.efficiency()) << " full";
  if (st.m2.skipped > 0) {
    std::cout << ", " << st.m2.skipped << " samples over the budget left out";
  }
  std::cout << "\n  compute: ViT " << static_cast<double>(v.vit_fixed_fs) / 1e12 << " ms + "
            << static_cast<double>(v.vit_per_image_token_fs) / 1e12 << " ms/image token";
  if (v.vit_attention_fs > 0) {
    std::cout << " + " << static_cast<double>(v.vit_attention_fs) / 1e6 << " ns/token^2";
  }
  std::cout << ", LLM " << static_cast<double>(c.compute.llm.pack_us) / 1000.0 << " ms/pack";
  if (c.compute.llm.per_token_fs > 0) {
    std::cout << " + " << static_cast<double>(c.compute.llm.per_token_fs) / 1e12 << " ms/token";
  }
  if (c.compute.llm.attention_fs > 0) {
    std::cout << " + " << static_cast<double>(c.compute.llm.attention_fs) / 1e6
              << " ns/document token^2";
  }
  const auto& n = c.sim.network;
  std::cout << " (forward + backward)\n  ranks meet " << packswap::to_string(c.sim.sync) << ", ga "
            << c.ga << ", solver eps " << c.sim.eps
            << (c.sim.guard ? "" : ", no guard (always the solver's assignment)")
            << (c.sim.topology_aware ? "" : ", solved without the node map") << "\n  network "
            << static_cast<double>(n.intra_node_bytes_per_s) / 1e9 << " GB/s in a node, "
            << static_cast<double>(n.inter_node_bytes_per_s) / 1e9 << " GB/s across, "
            << static_cast<double>(n.latency_ns) / 1000.0 << " us/message, " << n.ranks_per_node
            << " GPUs/node; first exchange " << packswap::to_string(c.sim.first) << "\n\n";
}

void print_table(std::int64_t dp, std::int64_t steps, std::int32_t ga,
                 const std::array<packswap::method_summary, 5>& r) {
  std::cout << "dp " << dp << " (" << steps << " global batches of " << dp * ga << " packs)\n";
  std::cout << "  " << std::left << std::setw(19) << "method" << std::right << std::setw(11)
            << "efficiency" << std::setw(9) << "waste" << std::setw(11) << "step (s)"
            << std::setw(12) << "throughput" << std::setw(17) << "moved/rank/step" << std::setw(11)
            << "over best"
            << "\n";
  for (const auto& m : r) {
    std::ostringstream thr;
    thr << std::fixed << std::setprecision(3) << m.relative_throughput << "x";
    std::ostringstream step;
    step << std::fixed << std::setprecision(2) << m.step_time_ms / 1000.0;
    std::cout << "  " << std::left << std::setw(19) << packswap::to_string(m.method) << std::right
              << std::setw(11) << percent(m.efficiency) << std::setw(9) << percent(m.waste)
              << std::setw(11) << step.str() << std::setw(12) << thr.str() << std::setw(17)
              << bytes_text(m.bytes_moved_per_rank) << std::setw(11) << percent(m.over_best, 1)
              << "\n";
  }
  for (const auto& m : r) {
    if (m.fallbacks > 0) {
      std::cout << "  (" << packswap::to_string(m.method) << ": the guard kept the loader's "
                << "placement in " << m.fallbacks << " of " << m.steps << " global batches)\n";
    }
  }
  std::cout << "\n";
}

int run(int argc, char** argv) {
  const config c = parse(argc, argv);
  const auto t0 = std::chrono::steady_clock::now();
  const streams st = build(c);
  std::vector<packswap::cli::run_row> rows;
  if (!c.json && !c.csv) {
    progress("");
    print_header(c, st);
  }
  for (const auto dp : c.dps) {
    const auto r = run_dp(c, st, dp);
    progress("");
    if (!c.json && !c.csv) {
      print_table(dp, steps_for(c, dp), c.ga, r);
      std::cout << std::flush;
    }
    for (const auto& m : r) {
      rows.push_back({dp, c.ga, m});
    }
  }
  if (!c.json && !c.csv) {
    std::cout << "waste: GPU time spent waiting, against perfectly even load in every micro-step;"
                 " throughput: real\ntokens per second relative to baseline; over best: step "
                 "time above the best placement\nof the same packs (LB_A or LB_B, compute only).\n";
  }
  if (c.json) {
    std::cout << "{\"runs\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& m = rows[i].summary;
      std::cout << (i == 0 ? "\n  " : ",\n  ") << "{\"dp\": " << rows[i].dp
                << ", \"ga\": " << rows[i].ga
                << ", \"method\": " << packswap::cli::quote(packswap::to_string(m.method))
                << ", \"efficiency\": " << packswap::cli::number(m.efficiency)
                << ", \"waste\": " << packswap::cli::number(m.waste)
                << ", \"step_time_ms\": " << packswap::cli::number(m.step_time_ms)
                << ", \"relative_throughput\": " << packswap::cli::number(m.relative_throughput)
                << ", \"bytes_moved_per_rank\": " << packswap::cli::number(m.bytes_moved_per_rank)
                << "}";
    }
    std::cout << "\n]}\n";
  }
  if (c.csv) {
    std::cout << "dp,ga,method,efficiency,waste,step_time_ms,relative_throughput,"
                 "bytes_moved_per_rank\n";
    for (const auto& row : rows) {
      const auto& m = row.summary;
      std::cout << row.dp << "," << row.ga << "," << packswap::to_string(m.method) << ","
                << packswap::cli::number(m.efficiency) << "," << packswap::cli::number(m.waste)
                << "," << packswap::cli::number(m.step_time_ms) << ","
                << packswap::cli::number(m.relative_throughput) << ","
                << packswap::cli::number(m.bytes_moved_per_rank) << "\n";
    }
  }
  if (!c.plot.empty()) {
    std::ostringstream title;
    title << (c.samples_csv.empty() ? c.workload : c.samples_csv) << ", ga " << c.ga << ", "
          << c.capacity << "-token packs, ranks meet " << packswap::to_string(c.sim.sync);
    std::ofstream file(c.plot);
    packswap::cli::write_waste_plot(file, rows, title.str());
    file.close();
    if (!file) {
      throw std::runtime_error("cannot write '" + c.plot + "'");
    }
  }
  if (progress_on()) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "packswap-sim: done in " << std::fixed << std::setprecision(1) << s << " s\n";
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const usage_error& e) {
    std::cerr << "packswap-sim: " << e.what() << "\n(see packswap-sim --help)\n";
    return 2;
  } catch (const std::exception& e) {
    progress("");
    std::cerr << "packswap-sim: " << e.what() << "\n";
    return 1;
  }
}
