// The randomized engine stress test on the threads transport (see stress.hpp): ranks are threads
// of this process, so AddressSanitizer and ThreadSanitizer see every read of a payload.
//
//   packswap_exchange_stress_threads --seconds 600            a long local run, random seed
//   packswap_exchange_stress_threads --seed S --first I --count 1 --verbose   one configuration
#include "stress.hpp"

#include <packswap/exchange/threads.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace ps = packswap::stress;

int main(int argc, char** argv) {
  const ps::options o = ps::parse(argc, argv, "packswap_exchange_stress_threads");
  std::printf("stress (threads): seed %llu, %s, dp up to %d\n",
              static_cast<unsigned long long>(o.seed),
              o.count >= 0 ? (std::to_string(o.count) + " configurations").c_str()
                           : (std::to_string(o.seconds) + " s").c_str(),
              o.max_dp);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::map<std::string, std::int64_t> events;
  std::int64_t configs = 0;
  std::int64_t rank_runs = 0;
  std::int64_t failed_ranks = 0;
  std::int64_t packs = 0;
  for (std::int64_t i = o.first;; ++i) {
    if (o.count >= 0 ? i >= o.first + o.count : elapsed() >= o.seconds) {
      break;
    }
    const ps::config c = ps::make_config(o.seed, i, o.max_dp);
    // One line per configuration: a sanitizer's report ends the process, and the last line says
    // which configuration it came from.
    std::printf("%s\n", c.describe().c_str());
    std::fflush(stdout);
    packswap::threads::world world(c.s.dp);
    world.slow_copies(c.copy_pause);
    std::vector<ps::rank_result> results(static_cast<std::size_t>(c.s.dp));
    std::vector<std::int32_t> ranks;
    std::vector<std::thread> threads;
    for (std::int32_t r = 0; r < c.s.dp; ++r) {
      ranks.push_back(r);
      threads.emplace_back([&, r] {
        try {
          packswap::threads::transport t(world, r);
          results[static_cast<std::size_t>(r)] = ps::run_rank(c, t, r);
        } catch (const std::exception& e) {
          results[static_cast<std::size_t>(r)].violations.push_back("rank " + std::to_string(r) +
                                                                    ": setup threw " + e.what());
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    bool fired = false;
    for (const auto& r : results) {
      fired = fired || r.fault_fired;
      failed_ranks += r.failed ? 1 : 0;
      packs += r.packs;
      if (o.verbose) {
        std::printf("  %s\n", r.failed ? r.what.c_str() : "trained to the end");
      }
    }
    const auto wrong = ps::judge(c, results, ranks, fired);
    ++configs;
    rank_runs += c.s.dp;
    ++events[ps::name(c.what)];
    if (!wrong.empty()) {
      std::printf("FAILED %s\n", c.describe().c_str());
      for (const auto& w : wrong) {
        std::printf("  %s\n", w.c_str());
      }
      std::printf("reproduce: packswap_exchange_stress_threads --seed %llu --first %lld "
                  "--count 1 --max-dp %d --verbose\n",
                  static_cast<unsigned long long>(o.seed), static_cast<long long>(i), o.max_dp);
      return 1;
    }
  }
  std::printf("stress (threads): seed %llu: %lld configurations passed (%lld rank runs, %lld "
              "ranks ended in an error as expected, %lld packs checked) in %.1f s; events:",
              static_cast<unsigned long long>(o.seed), static_cast<long long>(configs),
              static_cast<long long>(rank_runs), static_cast<long long>(failed_ranks),
              static_cast<long long>(packs), elapsed());
  for (const auto& [event, n] : events) {
    std::printf(" %s %lld", event.c_str(), static_cast<long long>(n));
  }
  std::printf("\n");
  return 0;
}
