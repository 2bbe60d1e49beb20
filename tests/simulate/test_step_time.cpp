#include <packswap/batch.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/error.hpp>
#include <packswap/simulate/step_time.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::exchange_mode;
using packswap::first_exchange;
using packswap::shape;
using packswap::step_time;
using packswap::sync_mode;
using packswap::timing_options;

namespace {

using times = std::vector<std::int64_t>;

constexpr timing_options a_sync{sync_mode::per_micro_step, exchange_mode::synchronous};
constexpr timing_options a_overlap{sync_mode::per_micro_step, exchange_mode::overlapped};
constexpr timing_options a_prefetch{sync_mode::per_micro_step, exchange_mode::overlapped,
                                    first_exchange::prefetched};
constexpr timing_options b_sync{sync_mode::per_step, exchange_mode::synchronous};
constexpr timing_options b_overlap{sync_mode::per_step, exchange_mode::overlapped};

} // namespace

TEST_CASE("without an exchange a step is A or B of the cell loads") {
  const shape s{2, 3};
  const times c = {5, 1, 4, /* rank 1: */ 2, 6, 3};
  const auto a = step_time(c, {}, s, a_sync);
  CHECK(a.step_us == 5 + 6 + 4);
  CHECK(a.compute_us == 15);
  CHECK(a.total_work_us == 21);
  CHECK(a.exposed_us() == 0);
  const auto b = step_time(c, {}, s, b_overlap);
  CHECK(b.step_us == 11);
  // Ideal: 21 / 2 per rank.
  CHECK(packswap::waste(a.total_work_us, 2, a.step_us) == doctest::Approx(1.0 - 21.0 / 30.0));
  CHECK(packswap::waste(b.total_work_us, 2, b.step_us) == doctest::Approx(1.0 - 21.0 / 22.0));
}

TEST_CASE("a synchronous exchange adds the slowest rank's exchange of every micro-step") {
  const shape s{2, 3};
  const times c = {5, 1, 4, 2, 6, 3};
  const times x = {1, 0, 2, 3, 0, 1}; // slowest per micro-step: 3, 0, 2
  CHECK(step_time(c, x, s, a_sync).step_us == 15 + 5);
  CHECK(step_time(c, x, s, a_sync).exposed_us() == 5);
  CHECK(step_time(c, x, s, b_sync).step_us == 11 + 5);
}

TEST_CASE("an overlapped exchange shows only what exceeds the concurrent micro-step") {
  // Both ranks compute 10 per micro-step; rank 1 needs 3 before micro-step 0 and 12 before 1.
  const shape s{2, 2};
  const times c = {10, 10, 10, 10};
  const times x = {0, 0, 3, 12};
  // Micro-step 0's exchange is exposed (3); micro-step 1's runs during micro-step 0 and shows
  // 12 - 10 = 2.
  const auto t = step_time(c, x, s, a_overlap);
  CHECK(t.compute_us == 20);
  CHECK(t.step_us == 25);
  CHECK(t.exposed_us() == 5);
  // Synchronously, all of it shows.
  CHECK(step_time(c, x, s, a_sync).step_us == 35);
}

TEST_CASE("a prefetched first exchange hides behind the previous step's last micro-step") {
  const shape s{2, 2};
  const times c = {10, 10, 10, 10};
  // 3 fits in the 10 of the previous last micro-step; 12 - 10 still shows at micro-step 1.
  CHECK(step_time(c, times{0, 0, 3, 12}, s, a_prefetch).step_us == 22);
  // 15 does not fit: 5 shows at the start.
  CHECK(step_time(c, times{0, 0, 15, 0}, s, a_prefetch).step_us == 25);
  CHECK(step_time(c, times{0, 0, 15, 0}, s, a_overlap).step_us == 35);
}

TEST_CASE("a rank's long exchange hides behind another rank's long compute") {
  // Ranks meet every micro-step: rank 1 waits for rank 0 anyway, and receives meanwhile.
  const shape s{2, 2};
  const times c = {10, 10, 4, 4};
  const times x = {0, 0, 3, 8};
  const auto t = step_time(c, x, s, a_overlap);
  CHECK(t.step_us == 20);
  CHECK(t.exposed_us() == 0);
}

TEST_CASE("with two buffers, micro-step m's exchange waits for micro-step m - 2") {
  const shape s{1, 3};
  const times c = {1, 1, 10};
  const times x = {0, 0, 3};
  // Micro-step 2's packs can only land once micro-step 0 freed its buffer (at 1): in at 4.
  CHECK(step_time(c, x, s, a_overlap).step_us == 14);
}

TEST_CASE("ranks that meet once per step hide their exchange behind their own compute") {
  const shape s{2, 2};
  // Rank 1 computes 4 per micro-step and receives 3, then 12: 3 + 4, then 12 more from 3.
  const times c = {5, 5, 4, 4};
  const times x = {0, 0, 3, 12};
  const auto t = step_time(c, x, s, b_overlap);
  CHECK(t.compute_us == 10);
  CHECK(t.step_us == 3 + 12 + 4);
  CHECK(step_time(c, x, s, b_sync).step_us == 10 + 3 + 12);
}

TEST_CASE("waste is zero for perfectly even loads and rejects impossible inputs") {
  const shape s{4, 2};
  const times c(8, 7);
  const auto t = step_time(c, {}, s, a_overlap);
  CHECK(packswap::waste(t.total_work_us, s.dp, t.step_us) == 0.0);
  CHECK(packswap::waste(0, 4, 0) == 0.0);
  CHECK_THROWS_AS(packswap::waste(100, 4, 20), packswap::error);
  CHECK_THROWS_AS(packswap::waste(-1, 4, 20), packswap::error);
}

TEST_CASE("step_time rejects arrays of the wrong size and negative times") {
  const shape s{2, 2};
  CHECK_THROWS_WITH_AS(step_time(times{1, 2, 3}, {}, s), doctest::Contains("needs 4"),
                       packswap::error);
  CHECK_THROWS_WITH_AS(step_time(times{1, 2, 3, 4}, times{0, 0, -1, 0}, s),
                       doctest::Contains("cell (rank 1, micro-step 0)"), packswap::error);
}

TEST_CASE("waste is never negative, and overlapping never loses to a synchronous exchange") {
  // Property over seeded random steps: every mode, with and without an exchange.
  const timing_options modes[] = {
      a_sync,     a_overlap,
      a_prefetch, b_sync,
      b_overlap,  {sync_mode::per_step, exchange_mode::overlapped, first_exchange::prefetched}};
  packswap::prng rng(2024);
  for (int trial = 0; trial < 3000; ++trial) {
    const shape s{static_cast<std::int32_t>(rng.uniform(1, 9)),
                  static_cast<std::int32_t>(rng.uniform(1, 9))};
    const auto n = static_cast<std::size_t>(s.cells());
    const std::int64_t top = rng.uniform(1, 1'000'000);
    times c(n);
    times x(n);
    for (std::size_t i = 0; i < n; ++i) {
      c[i] = rng.chance(1, 10) ? 0 : rng.uniform(0, top);
      x[i] = rng.chance(1, 3) ? 0 : rng.uniform(0, top);
    }
    for (const auto& opt : modes) {
      for (const bool with_exchange : {false, true}) {
        const auto t = step_time(c, with_exchange ? x : times{}, s, opt);
        CHECK(t.step_us >= t.compute_us);
        const double w = packswap::waste(t.total_work_us, s.dp, t.step_us);
        CHECK(w >= 0.0);
        CHECK(w < 1.0 + 1e-12);
      }
    }
    for (const auto sync : {sync_mode::per_micro_step, sync_mode::per_step}) {
      const auto sync_t = step_time(c, x, s, {sync, exchange_mode::synchronous});
      const auto overlap_t = step_time(c, x, s, {sync, exchange_mode::overlapped});
      const auto prefetch_t =
          step_time(c, x, s, {sync, exchange_mode::overlapped, first_exchange::prefetched});
      CHECK(overlap_t.step_us <= sync_t.step_us);
      CHECK(prefetch_t.step_us <= overlap_t.step_us);
    }
  }
}
