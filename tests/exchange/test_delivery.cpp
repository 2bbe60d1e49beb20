// Every pack reaches its assigned (rank, micro-step) exactly once and byte-identical, on the
// threads backend, for dp in {1, 2, 3, 4, 8}, ga in {1, 2, 4}, random sizes with empty packs.
// (tests/exchange/test_mpi.cpp runs the same driver on the MPI backend.)
#include "support.hpp"

#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <map>
#include <tuple>
#include <vector>

namespace pt = packswap::test;

namespace {

void check_delivery(std::int32_t dp, std::int32_t ga, std::int32_t mbs,
                    const packswap::engine_options& opt, std::uint64_t seed) {
  constexpr std::int64_t batches = 3;
  packswap::threads::world world(dp);
  std::vector<std::vector<pt::delivery>> logs(static_cast<std::size_t>(dp));
  const packswap::shape s{dp, ga, mbs};
  pt::rethrow_first(pt::run_ranks(dp, [&](std::int32_t r) {
    packswap::threads::transport t(world, r);
    logs[static_cast<std::size_t>(r)] = pt::drive(t, s, opt, batches, seed, 5000);
  }));
  std::map<std::pair<std::int64_t, std::int32_t>, int> seen;
  for (const auto& log : logs) {
    for (const auto& d : log) {
      CAPTURE(d.batch);
      CAPTURE(d.pack);
      CAPTURE(d.rank);
      CAPTURE(d.micro_step);
      CHECK(d.intact);
      CHECK(d.on_plan);
      CHECK(d.in_place);
      ++seen[{d.batch, d.pack}];
    }
  }
  CHECK(seen.size() == static_cast<std::size_t>(batches * s.packs()));
  for (const auto& entry : seen) {
    CAPTURE(entry.first.first);
    CAPTURE(entry.first.second);
    CHECK(entry.second == 1);
  }
}

} // namespace

TEST_CASE("every pack reaches its assigned cell exactly once and byte-identical (threads)") {
  std::uint64_t seed = 100;
  for (std::int32_t dp : {1, 2, 3, 4, 8}) {
    for (std::int32_t ga : {1, 2, 4}) {
      for (std::int32_t mbs : {1, 2}) {
        packswap::engine_options opt;
        opt.timeout = std::chrono::seconds(60);
        opt.prefetch_depth = 1 + static_cast<std::int32_t>(seed % 2);
        opt.prefetch_across_batches = seed % 3 != 0;
        CAPTURE(dp);
        CAPTURE(ga);
        CAPTURE(mbs);
        CAPTURE(opt.prefetch_depth);
        check_delivery(dp, ga, mbs, opt, ++seed);
      }
    }
  }
}

TEST_CASE("delivery holds in both sync modes and with the location-blind solver") {
  packswap::engine_options opt;
  opt.timeout = std::chrono::seconds(60);
  opt.solver.mode = packswap::sync_mode::per_step;
  check_delivery(4, 4, 2, opt, 7);
  opt.solver.mode = packswap::sync_mode::per_micro_step;
  opt.solver.refine = false; // stage 1 only: many more packs move
  check_delivery(4, 4, 2, opt, 8);
}

TEST_CASE("delivery holds when kept packs are routed through the transport too") {
  packswap::engine_options opt;
  opt.timeout = std::chrono::seconds(60);
  opt.exchange_kept_packs = true;
  check_delivery(3, 2, 2, opt, 9);
}
