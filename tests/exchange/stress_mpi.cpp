// The randomized engine stress test on the MPI transport (see stress.hpp): each process is one
// rank; configuration i runs on the first dp processes (a communicator split from the world), the
// others wait for the next one. Another process's reads are invisible to the sanitizers here, so
// what this run checks is the protocol: no hang, every rank fails after an abort, nothing wrong
// handed out, and no payload read after it was overwritten (that would arrive as a checksum
// mismatch or a wrong pack).
//
//   mpirun -np 6 --oversubscribe packswap_exchange_stress_mpi --seconds 600   a long local run
#include "stress.hpp"

#include <packswap/mpi/transport.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

namespace ps = packswap::stress;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ps::options o = ps::parse(argc, argv, "packswap_exchange_stress_mpi");
  // Rank 0's seed (from its clock unless given) and clock decide for everyone.
  unsigned long long seed = o.seed;
  MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  o.seed = seed;
  const std::int32_t max_dp = std::min(o.max_dp, size);
  if (rank == 0) {
    std::printf("stress (mpi): seed %llu, %s, dp up to %d\n", seed,
                o.count >= 0 ? (std::to_string(o.count) + " configurations").c_str()
                             : (std::to_string(o.seconds) + " s").c_str(),
                max_dp);
    std::fflush(stdout);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::map<std::string, long long> events;
  long long configs = 0;
  long long failed_ranks = 0;
  long long packs = 0;
  int status = 0;
  for (std::int64_t i = o.first;; ++i) {
    int go = rank == 0 && (o.count >= 0 ? i < o.first + o.count : elapsed() < o.seconds);
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (go == 0) {
      break;
    }
    const ps::config c = ps::make_config(o.seed, i, max_dp);
    if (rank == 0) {
      std::printf("%s\n", c.describe().c_str());
      std::fflush(stdout);
    }
    const bool in = rank < c.s.dp;
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, rank, &sub);
    ps::rank_result result;
    if (in) {
      try {
        packswap::mpi::transport t(sub);
        result = ps::run_rank(c, t, rank);
      } catch (const std::exception& e) {
        result.violations.push_back("rank " + std::to_string(rank) + ": setup threw " + e.what());
      }
      MPI_Comm_free(&sub);
    }
    int fired = result.fault_fired ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &fired, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    std::vector<std::string> wrong;
    if (in) {
      wrong = ps::judge(c, {result}, {rank}, fired != 0);
      failed_ranks += result.failed ? 1 : 0;
      packs += result.packs;
      if (o.verbose) {
        std::printf("  rank %d: %s\n", rank, result.failed ? result.what.c_str() : "trained");
      }
    }
    int bad = wrong.empty() ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ++configs;
    ++events[ps::name(c.what)];
    if (bad != 0) {
      if (!wrong.empty()) {
        std::printf("FAILED %s\n", c.describe().c_str());
        for (const auto& w : wrong) {
          std::printf("  %s\n", w.c_str());
        }
      }
      if (rank == 0) {
        std::printf(
            "reproduce: mpirun -np %d packswap_exchange_stress_mpi --seed %llu --first %lld "
            "--count 1 --max-dp %d --verbose\n",
            size, seed, static_cast<long long>(i), o.max_dp);
      }
      status = 1;
      break;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed_ranks, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &packs, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && status == 0) {
    std::printf("stress (mpi): seed %llu: %lld configurations passed (%lld ranks ended in an error "
                "as expected, %lld packs checked) in %.1f s; events:",
                seed, configs, failed_ranks, packs, elapsed());
    for (const auto& [event, n] : events) {
      std::printf(" %s %lld", event.c_str(), n);
    }
    std::printf("\n");
  }
  MPI_Finalize();
  return status;
}
