#include <solve_worker.hpp>

#include <doctest/doctest.h>

#include "batches.hpp"

#include <packswap/plan/plan.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using namespace packswap;
using packswap::python::solve_worker;
using namespace std::chrono_literals;

namespace {

struct job {
  std::vector<pack_meta> packs;
  shape s;
  solve_options opt;
};

job random_job(prng& rng) {
  job j;
  j.s = test::random_shape(rng, 16, 8, 2);
  j.packs = test::random_batch(j.s, rng(), test::all_mixes[rng.below(7)]);
  j.opt.mode = rng.chance(1, 2) ? sync_mode::per_step : sync_mode::per_micro_step;
  j.opt.eps = rng.chance(1, 2) ? 0.0 : 0.01;
  j.opt.plan_rank = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(j.s.dp)));
  return j;
}

} // namespace

TEST_CASE("the solve worker returns what packswap::solve returns, batch by batch") {
  prng rng(7);
  solve_worker w;
  std::vector<job> jobs;
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 60; ++i) {
    jobs.push_back(random_job(rng));
    tickets.push_back(w.submit(jobs.back().packs, jobs.back().s, jobs.back().opt));
    // Take every other batch right away and leave the rest queued, so results are taken both
    // before and after later submissions.
    if (i % 2 == 1) {
      for (int k = i - 1; k <= i; ++k) {
        const auto got = w.take(tickets[static_cast<std::size_t>(k)], 60s);
        REQUIRE(got != nullptr);
        const auto& j = jobs[static_cast<std::size_t>(k)];
        const auto want = solve(j.packs, j.s, j.opt);
        CHECK(digest(got->sol.cells) == digest(want.cells));
        CHECK(got->sol.plan.digest() == want.plan.digest());
        CHECK(got->plan_rank == j.opt.plan_rank);
        CHECK(got->shape.packs() == j.s.packs());
      }
    }
  }
  CHECK(w.pending() == 0);
}

TEST_CASE("the solve worker hands a bad batch's exception to whoever takes it") {
  solve_worker w;
  std::vector<pack_meta> packs(8, pack_meta{1, 1, 0});
  packs[3].cost = -5;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    packs[p].source_rank = static_cast<std::int32_t>(p / 4);
  }
  const auto bad = w.submit(packs, shape{2, 4, 1}, {});
  packs[3].cost = 5;
  const auto good = w.submit(packs, shape{2, 4, 1}, {});
  CHECK_THROWS_WITH_AS(w.take(bad, 10s),
                       "packswap [invalid_argument]: pack 3 has cost -5, must be >= 0",
                       packswap::error);
  CHECK(w.take(good, 10s) != nullptr);
  CHECK_THROWS_AS(w.take(good, 10s), packswap::error); // already taken
  CHECK_THROWS_AS(w.take(12345, 10s), packswap::error);
}

TEST_CASE("the solve worker's take times out without losing the batch") {
  solve_worker w;
  // The worker solves in order: while it works on a large batch, the small one queued behind it
  // is certainly not solved.
  const shape big{1024, 64, 1};
  const auto blocker = w.submit(test::random_batch(big, 11, test::mix::vlm), big, {});
  const shape small{2, 2, 1};
  const auto t = w.submit(test::random_batch(small, 12, test::mix::vlm), small, {});
  CHECK(w.take(t, 0ns) == nullptr);
  CHECK(w.take(t, 300s) != nullptr);
  CHECK(w.take(blocker, 300s) != nullptr);
}

TEST_CASE("closing the solve worker joins it, cancels queued batches, and is idempotent") {
  prng rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    solve_worker w;
    std::vector<std::uint64_t> tickets;
    for (int i = 0; i < 6; ++i) {
      const auto j = random_job(rng);
      tickets.push_back(w.submit(j.packs, j.s, j.opt));
    }
    std::atomic<int> solved{0}, cancelled{0};
    // One thread waits on the last batch while another closes the worker.
    std::thread waiter([&] {
      try {
        if (w.take(tickets.back(), 60s) != nullptr) {
          ++solved;
        }
      } catch (const packswap::error& e) {
        CHECK(e.code() == errc::cancelled);
        ++cancelled;
      }
    });
    std::thread closer([&] { w.close(); });
    closer.join();
    waiter.join();
    CHECK(solved + cancelled == 1);
    w.close();
    CHECK(w.closed());
    CHECK_THROWS_AS(w.submit({}, shape{1, 1, 1}, {}), packswap::error);
  }
}

TEST_CASE("the solve worker refuses more than max_pending batches not taken") {
  solve_worker w;
  std::vector<pack_meta> packs{pack_meta{1, 1, 0}};
  for (std::size_t i = 0; i < solve_worker::max_pending; ++i) {
    w.submit(packs, shape{1, 1, 1}, {});
  }
  CHECK_THROWS_AS(w.submit(packs, shape{1, 1, 1}, {}), packswap::error);
}
