#include "support.hpp"

#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using packswap::engine;
namespace threads = packswap::threads;
using packswap::engine_options;
using packswap::errc;
namespace pt = packswap::test;

static_assert(packswap::is_transport_v<threads::transport>);
static_assert(!packswap::is_transport_v<int>);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
static_assert(packswap::transport_like<threads::transport>);
#endif

namespace {

// Runs `batches` global batches on `dp` thread ranks and checks each rank's packs arrive intact.
void run_ok(std::int32_t dp, std::int32_t ga, std::int32_t mbs, std::int64_t batches,
            const engine_options& opt) {
  threads::world world(dp);
  const packswap::shape s{dp, ga, mbs};
  pt::rethrow_first(pt::run_ranks(dp, [&](std::int32_t r) {
    threads::transport t(world, r);
    engine<threads::transport> e(t, s, opt);
    std::vector<pt::rank_batch> mine(static_cast<std::size_t>(batches));
    for (std::int64_t k = 0; k < batches; ++k) {
      pt::make_batch(mine[static_cast<std::size_t>(k)], 1, k, r, s.packs_per_rank(), 3000);
    }
    std::vector<unsigned char> expect;
    std::int64_t seen = 0;
    pt::train(e, mine, ga,
              [&](std::int64_t k, std::int32_t, const packswap::micro_batch& cell,
                  const packswap::pack_view& p) {
                REQUIRE(cell.batch == k);
                REQUIRE(cell.packs.size() == static_cast<std::size_t>(mbs));
                pt::fill_payload(expect, 1, k, p.source_rank, p.source_index, p.bytes);
                REQUIRE(p.bytes == static_cast<std::int64_t>(expect.size()));
                if (p.bytes > 0) {
                  REQUIRE(std::memcmp(p.data, expect.data(), expect.size()) == 0);
                }
                ++seen;
              });
    CHECK(seen == batches * ga * mbs);
  }));
}

} // namespace

TEST_CASE("one rank keeps every pack in place") {
  threads::world world(1);
  threads::transport t(world, 0);
  engine<threads::transport> e(t, {1, 2, 2});
  pt::rank_batch b;
  pt::make_batch(b, 3, 0, 0, 4, 100);
  e.submit(b.packs);
  for (std::int32_t m = 0; m < 2; ++m) {
    auto cell = e.acquire(m);
    for (const auto& p : cell.packs) {
      CHECK(p.kept);
      CHECK(p.data == b.packs[static_cast<std::size_t>(p.source_index)].data);
    }
    e.release(m);
  }
  const auto st = e.stats();
  CHECK(st.packs_kept == 4);
  CHECK(st.packs_received == 0);
  CHECK(st.bytes_received == 0);
}

TEST_CASE("packs arrive intact on a few shapes and prefetch depths") {
  for (std::int32_t depth : {1, 2, 3}) {
    for (bool across : {false, true}) {
      engine_options opt;
      opt.prefetch_depth = depth;
      opt.prefetch_across_batches = across;
      opt.timeout = std::chrono::seconds(20);
      CAPTURE(depth);
      CAPTURE(across);
      run_ok(2, 3, 2, 4, opt);
      run_ok(3, 1, 1, 3, opt);
    }
  }
}

TEST_CASE("kept packs routed through the transport arrive as copies") {
  engine_options opt;
  opt.exchange_kept_packs = true;
  threads::world world(1);
  threads::transport t(world, 0);
  engine<threads::transport> e(t, {1, 3, 2}, opt);
  pt::rank_batch b;
  pt::make_batch(b, 4, 0, 0, 6, 500);
  e.submit(b.packs);
  for (std::int32_t m = 0; m < 3; ++m) {
    auto cell = e.acquire(m);
    for (const auto& p : cell.packs) {
      CHECK_FALSE(p.kept);
      const auto& src = b.packs[static_cast<std::size_t>(p.source_index)];
      CHECK(p.bytes == src.bytes);
      if (p.bytes > 0) {
        CHECK(p.data != src.data);
        CHECK(std::memcmp(p.data, src.data, static_cast<std::size_t>(p.bytes)) == 0);
      }
    }
    e.release(m);
  }
}

TEST_CASE("the engine rejects calls out of order with a message naming the rank") {
  threads::world world(1);
  threads::transport t(world, 0);
  engine<threads::transport> e(t, {1, 2, 1});
  pt::rank_batch b;
  pt::make_batch(b, 5, 0, 0, 2, 10);
  const auto throws = [](auto&& f, const char* needle) {
    try {
      f();
      FAIL("no error");
    } catch (const packswap::error& err) {
      CHECK(err.code() == errc::invalid_argument);
      CHECK(std::string(err.what()).find(needle) != std::string::npos);
      CHECK(std::string(err.what()).find("rank 0") != std::string::npos);
    }
  };
  throws([&] { e.acquire(0); }, "not submitted");
  throws([&] { e.submit(packswap::span<const packswap::local_pack>(b.packs.data(), 1)); },
         "ga * mbs = 2");
  e.submit(b.packs);
  throws([&] { e.acquire(1); }, "next micro-step");
  throws([&] { e.release(0); }, "nothing is acquired");
  e.acquire(0);
  throws([&] { e.acquire(1); }, "is not released");
  e.release(0);
  e.submit(b.packs);
  throws([&] { e.submit(b.packs); }, "at most one batch ahead");
  // The engine still works after rejected calls.
  e.acquire(1);
  e.release(1);
  e.acquire(0);
  e.release(0);
}

TEST_CASE("the constructor refuses a shape that does not match the transport") {
  threads::world world(2);
  threads::transport t(world, 0);
  CHECK_THROWS_WITH_AS(engine<threads::transport>(t, {3, 1, 1}),
                       doctest::Contains("the transport has 2 ranks, the shape has dp = 3"),
                       packswap::error);
  engine_options opt;
  opt.prefetch_depth = 0;
  CHECK_THROWS_WITH_AS(engine<threads::transport>(t, {2, 1, 1}, opt),
                       doctest::Contains("prefetch_depth is 0"), packswap::error);
  // The solver's options are checked at construction too, not at the first batch's solve.
  engine_options bad_eps;
  bad_eps.solver.eps = 1.5;
  CHECK_THROWS_WITH_AS(engine<threads::transport>(t, {2, 1, 1}, bad_eps),
                       doctest::Contains("eps is 1.5"), packswap::error);
  engine_options bad_scale;
  bad_scale.solver.work_scale = 0.0;
  CHECK_THROWS_WITH_AS(engine<threads::transport>(t, {2, 1, 1}, bad_scale),
                       doctest::Contains("work_scale is 0"), packswap::error);
  engine_options bad_nodes;
  bad_nodes.solver.topology = packswap::topology::from_map({0});
  CHECK_THROWS_WITH_AS(engine<threads::transport>(t, {2, 1, 1}, bad_nodes),
                       doctest::Contains("the topology maps 1 ranks, dp is 2"), packswap::error);
}

TEST_CASE("destroying engines mid-flight is clean and leaves no thread behind") {
  const int before = pt::baseline_thread_count();
  for (int round = 0; round < 50; ++round) {
    threads::world world(2);
    pt::rethrow_first(pt::run_ranks(2, [&](std::int32_t r) {
      threads::transport t(world, r);
      engine_options opt;
      opt.timeout = std::chrono::seconds(30);
      engine<threads::transport> e(t, {2, 4, 1}, opt);
      pt::rank_batch b0;
      pt::rank_batch b1;
      pt::make_batch(b0, 6, 0, r, 4, 2000);
      pt::make_batch(b1, 6, 1, r, 4, 2000);
      e.submit(b0.packs);
      e.submit(b1.packs);
      // Stop at different points: exchanges, gathers and prefetches are in flight.
      const int stop_after = round % 5;
      for (int m = 0; m < stop_after && m < 4; ++m) {
        e.acquire(m);
        e.release(m);
      }
    }));
  }
  CHECK(pt::settled_thread_count() == before);
}

namespace {

// The threads backend, recording the order in which operations start and are cancelled; its
// exchanges never complete, so they are in flight when the engine is destroyed. Starts come
// from the caller's thread, waits and cancels from the worker: under a lock.
struct recording_transport : threads::transport {
  using threads::transport::transport;
  std::mutex mutex;
  std::vector<const request*> started;
  std::vector<const request*> exchanges;
  std::vector<const request*> cancelled;
  void start_all_gather(request& req, packswap::span<const std::byte> mine,
                        packswap::span<std::byte> all) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      started.push_back(&req);
    }
    threads::transport::start_all_gather(req, mine, all);
  }
  void start_exchange(request& req, packswap::span<const packswap::send_op> sends,
                      packswap::span<packswap::recv_op> recvs) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      started.push_back(&req);
      exchanges.push_back(&req);
    }
    threads::transport::start_exchange(req, sends, recvs);
  }
  bool wait(request& req, packswap::deadline until) {
    bool exchange = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      exchange = std::find(exchanges.begin(), exchanges.end(), &req) != exchanges.end();
    }
    if (exchange) {
      std::this_thread::sleep_until(
          std::min(until, packswap::exchange_clock::now() + std::chrono::milliseconds(1)));
      return false;
    }
    return threads::transport::wait(req, until);
  }
  void cancel(request& req) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex);
      cancelled.push_back(&req);
    }
    threads::transport::cancel(req);
  }
};

} // namespace

TEST_CASE("destruction cancels the operations in flight newest first") {
  // The threads transport matches each link's messages in the order they were posted: were an
  // older operation's sends withdrawn before a newer one's, a peer still waiting on the older
  // receive could take the newer send in its place (the randomized stress test saw a pack of the
  // wrong size so, with every rank stopping at the same call). One rank, four micro-steps,
  // prefetch depth 3: the first exchange blocks the worker, three more and the next batch's
  // gather are queued behind it when the engine goes.
  threads::world world(1);
  recording_transport t(world, 0);
  {
    engine_options opt;
    opt.prefetch_depth = 3;
    opt.timeout = std::chrono::seconds(60);
    engine<recording_transport> e(t, {1, 4, 1}, opt);
    pt::rank_batch b0;
    pt::rank_batch b1;
    pt::make_batch(b0, 9, 0, 0, 4, 2000);
    pt::make_batch(b1, 9, 1, 0, 4, 2000);
    e.submit(b0.packs);
    e.submit(b1.packs);
  }
  // The start index of each cancelled operation. The engine reuses a finished operation's
  // request for a later start (the batch's gather and digest check finish while exchanges start,
  // on a timing of their own), so a request's last start is the one that was in flight: nothing
  // starts once destruction begins.
  std::vector<std::ptrdiff_t> order;
  for (const auto* req : t.cancelled) {
    const auto at = std::find(t.started.rbegin(), t.started.rend(), req);
    REQUIRE(at != t.started.rend());
    order.push_back(t.started.rend() - at - 1);
  }
  CAPTURE(order.size());
  CHECK(order.size() >= 4);
  for (std::size_t i = 1; i < order.size(); ++i) {
    CAPTURE(i);
    CHECK(order[i] < order[i - 1]);
  }
}

TEST_CASE("an engine whose peer never comes fails with a timeout naming the micro-step") {
  threads::world world(2);
  threads::transport t(world, 0);
  engine_options opt;
  opt.timeout = std::chrono::milliseconds(200);
  engine<threads::transport> e(t, {2, 2, 1}, opt);
  pt::rank_batch b;
  pt::make_batch(b, 7, 0, 0, 2, 10);
  const auto start = std::chrono::steady_clock::now();
  try {
    e.submit(b.packs);
    e.acquire(0);
    FAIL("no error");
  } catch (const packswap::error& err) {
    CHECK(err.code() == errc::timeout);
    CHECK(std::string(err.what()).find("rank 0, batch 0, metadata all-gather") !=
          std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK_FALSE(e.stats().worker_running);
  CHECK(e.stats().buffer_bytes == 0);
  // Every later call reports the same error.
  CHECK_THROWS_AS(e.release(0), packswap::error);
}

TEST_CASE("engine::abort fails this rank with errc::cancelled and the others promptly") {
  threads::world world(3);
  std::vector<std::string> what(3);
  std::vector<errc> code(3, errc::internal);
  const auto t0 = std::chrono::steady_clock::now();
  pt::rethrow_first(pt::run_ranks(3, [&](std::int32_t r) {
    threads::transport t(world, r);
    engine_options opt;
    opt.timeout = std::chrono::seconds(60); // long: only the abort can end this quickly
    engine<threads::transport> e(t, {3, 2, 1}, opt);
    pt::rank_batch b;
    pt::make_batch(b, 8, 0, r, 2, 100);
    try {
      e.submit(b.packs);
      if (r == 1) {
        e.abort("the training step threw");
      }
      for (int k = 0; k < 100; ++k) {
        e.acquire(0);
        e.release(0);
        e.acquire(1);
        e.release(1);
        e.submit(b.packs);
      }
    } catch (const packswap::error& err) {
      what[static_cast<std::size_t>(r)] = err.what();
      code[static_cast<std::size_t>(r)] = err.code();
    }
  }));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(what[r]);
    CHECK(code[r] == errc::cancelled);
    CHECK(what[r].find("rank 1 gave up: the training step threw") != std::string::npos);
  }
}

namespace {
// A transport whose cancel may throw does not model the concept: the engine cancels from
// destructors and error paths.
struct throwing_cancel : packswap::threads::transport {
  using packswap::threads::transport::transport;
  void cancel(request&) {}
};
} // namespace
static_assert(!packswap::is_transport_v<throwing_cancel>);

namespace {

// A backend's own error type, derived from packswap::error with a field of its own (as
// nccl::nccl_error keeps its ncclResult_t).
class device_lost : public packswap::error {
 public:
  explicit device_lost(int gpu)
      : packswap::error(errc::transport, "GPU " + std::to_string(gpu) + " fell off the bus"),
        gpu_(gpu) {}
  int gpu() const noexcept { return gpu_; }

 private:
  int gpu_;
};

} // namespace

TEST_CASE("an error type thrown on the worker reaches the caller as that type, with context") {
  const auto caught = pt::fail_two_ranks([](pt::throwing_transport& t) {
    t.wait_at = 5;
    t.raise = [] { throw device_lost(3); };
  });
  REQUIRE(caught.first[1]);
  try {
    std::rethrow_exception(caught.first[1]);
  } catch (const device_lost& e) {
    CHECK(e.gpu() == 3);
    CHECK(e.code() == errc::transport);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.rfind("packswap [transport]: rank 1, batch ", 0) == 0);
    CHECK(what.find(": GPU 3 fell off the bus") != std::string::npos);
    CHECK(std::string(e.message()).rfind("rank 1, batch ", 0) == 0);
  } catch (...) {
    FAIL("not a device_lost: " << pt::what_of(caught.first[1]));
  }
  // Every later call throws it again, as the same type.
  CHECK_THROWS_AS(std::rethrow_exception(caught.later[1]), device_lost);
  // The other rank hears the code and the message.
  REQUIRE(caught.first[0]);
  const std::string other = pt::what_of(caught.first[0]);
  CHECK(other.find("rank 1 aborted the exchange: rank 1, batch ") != std::string::npos);
  CHECK(other.find("GPU 3 fell off the bus") != std::string::npos);
}

TEST_CASE("an exception that is not a packswap::error keeps its type too") {
  const auto caught = pt::fail_two_ranks([](pt::throwing_transport& t) {
    t.start_at = 2; // on the caller's thread, in release()
    t.raise = [] { throw std::length_error("staging buffer too small"); };
  });
  REQUIRE(caught.first[1]);
  CHECK_THROWS_AS(std::rethrow_exception(caught.first[1]), std::length_error);
  CHECK_THROWS_AS(std::rethrow_exception(caught.later[1]), std::length_error);
  REQUIRE(caught.first[0]);
  try {
    std::rethrow_exception(caught.first[0]);
  } catch (const packswap::error& e) {
    CHECK(e.code() == errc::internal);
    CHECK(std::string(e.what()).find("rank 1 aborted the exchange: staging buffer too small") !=
          std::string::npos);
  }
}
