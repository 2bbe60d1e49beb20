// Soak: many micro-steps through the threads backend. After warm-up, resident memory grows by
// less than 1 MiB, the thread count stays constant, and the engine allocates no more buffers or
// requests: the leak DESIGN.md §1 describes would show here. ctest runs 20,000 micro-steps per
// rank by default; `PACKSWAP_SOAK_MICRO_STEPS=100000 ctest -L soak` runs the full soak (the
// sanitizer presets set it small).
#include "support.hpp"

#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PACKSWAP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PACKSWAP_TEST_SANITIZED 1
#endif
#endif

namespace pt = packswap::test;

namespace {

std::int64_t soak_micro_steps() {
  const char* env = std::getenv("PACKSWAP_SOAK_MICRO_STEPS");
  if (env != nullptr && *env != '\0') {
    return std::max<std::int64_t>(std::stoll(env), 8);
  }
  return 20'000;
}

} // namespace

TEST_CASE("soak: memory, threads and allocations stay flat over many micro-steps") {
  const packswap::shape s{2, 4, 2};
  const std::int64_t micro_steps = soak_micro_steps();
  const std::int64_t batches = micro_steps / s.ga;
  const std::int64_t warmup_batches = std::max<std::int64_t>(batches / 10, 50);
  REQUIRE(batches > warmup_batches);
  constexpr std::int64_t distinct = 16; // payload sets cycled through, made up front

  const int threads_base = pt::baseline_thread_count();
  packswap::threads::world world(s.dp);
  std::atomic<std::int64_t> rss_warm{0};
  std::atomic<std::int64_t> rss_end{0};
  std::atomic<int> threads_warm{0};
  std::atomic<int> threads_changed{0};
  std::atomic<std::int64_t> wrong{0};
  std::vector<packswap::engine_stats> warm(static_cast<std::size_t>(s.dp));
  std::vector<packswap::engine_stats> end(static_cast<std::size_t>(s.dp));
  const auto t0 = std::chrono::steady_clock::now();

  pt::rethrow_first(pt::run_ranks(s.dp, [&](std::int32_t r) {
    std::vector<pt::rank_batch> mine(static_cast<std::size_t>(distinct));
    for (std::int64_t k = 0; k < distinct; ++k) {
      pt::make_batch(mine[static_cast<std::size_t>(k)], 99, k, r, s.packs_per_rank(), 16 * 1024);
    }
    // Each rank's expected payloads of every (batch mod distinct, source rank, index).
    std::vector<std::vector<unsigned char>> expect(static_cast<std::size_t>(distinct * s.packs()));
    for (std::int64_t k = 0; k < distinct; ++k) {
      for (std::int32_t q = 0; q < s.dp; ++q) {
        pt::rank_batch other;
        pt::make_batch(other, 99, k, q, s.packs_per_rank(), 16 * 1024);
        for (std::int64_t i = 0; i < s.packs_per_rank(); ++i) {
          expect[static_cast<std::size_t>(k * s.packs() + q * s.packs_per_rank() + i)] =
              other.payloads[static_cast<std::size_t>(i)];
        }
      }
    }
    packswap::threads::transport t(world, r);
    packswap::engine_options opt;
    opt.timeout = std::chrono::seconds(120);
    opt.prefetch_depth = 2;
    packswap::engine<packswap::threads::transport> e(t, s, opt);
    e.submit(mine[0].packs);
    for (std::int64_t k = 0; k < batches; ++k) {
      if (k + 1 < batches) {
        e.submit(mine[static_cast<std::size_t>((k + 1) % distinct)].packs);
      }
      for (std::int32_t m = 0; m < s.ga; ++m) {
        const auto cell = e.acquire(m);
        for (const auto& p : cell.packs) {
          const auto& want = expect[static_cast<std::size_t>((k % distinct) * s.packs() + p.pack)];
          if (p.bytes != static_cast<std::int64_t>(want.size()) ||
              (p.bytes > 0 && std::memcmp(p.data, want.data(), want.size()) != 0)) {
            ++wrong;
          }
        }
        e.release(m);
      }
      if (k == warmup_batches) {
        warm[static_cast<std::size_t>(r)] = e.stats();
        if (r == 0) {
          rss_warm = pt::resident_bytes();
          threads_warm = pt::thread_count();
        }
      }
      if (r == 0 && k > warmup_batches && k % 500 == 0 && pt::thread_count() != threads_warm) {
        ++threads_changed;
      }
    }
    end[static_cast<std::size_t>(r)] = e.stats();
    if (r == 0) {
      rss_end = pt::resident_bytes();
    }
  }));

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::int64_t growth = rss_end - rss_warm;
  MESSAGE(micro_steps << " micro-steps per rank (" << batches << " global batches of dp=" << s.dp
                      << " ga=" << s.ga << " mbs=" << s.mbs << ") in " << seconds
                      << " s; RSS after warm-up " << rss_warm.load() / 1024 << " KiB, growth "
                      << growth / 1024 << " KiB; threads " << threads_warm.load()
                      << "; buffer allocations " << warm[0].buffer_allocations << " -> "
                      << end[0].buffer_allocations << ", requests " << warm[0].request_allocations
                      << " -> " << end[0].request_allocations);
  CHECK(wrong.load() == 0);
  CHECK(threads_changed.load() == 0);
  // Per rank: its own thread and its engine's one worker.
  CHECK(threads_warm.load() == threads_base + 2 * s.dp);
  for (std::int32_t r = 0; r < s.dp; ++r) {
    CAPTURE(r);
    CHECK(end[static_cast<std::size_t>(r)].buffer_allocations ==
          warm[static_cast<std::size_t>(r)].buffer_allocations);
    CHECK(end[static_cast<std::size_t>(r)].request_allocations ==
          warm[static_cast<std::size_t>(r)].request_allocations);
    CHECK(end[static_cast<std::size_t>(r)].micro_steps_released == batches * s.ga);
  }
#ifdef PACKSWAP_TEST_SANITIZED
  MESSAGE("resident memory is not checked under a sanitizer (its allocator quarantines memory)");
#else
  CHECK(growth < 1024 * 1024);
#endif
}
