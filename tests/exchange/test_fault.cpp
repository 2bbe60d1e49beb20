// Fault injection: every fault must end, on every rank, in a clear packswap::error within the
// deadline; the worker is joined, the buffers are freed and no wrong pack is ever handed out.
#include "support.hpp"

#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/fault.hpp>
#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

using packswap::errc;
using packswap::fault;
using packswap::fault_kind;
using packswap::fault_target;
namespace pt = packswap::test;
using faulty = packswap::fault_injecting_transport<packswap::threads::transport>;

static_assert(packswap::is_transport_v<faulty>);

namespace {

using pt::outcome;

constexpr auto deadline_ms = std::chrono::milliseconds(300);

// Runs 3 global batches of shape `s` with `f` injected on rank `bad`; returns each rank's outcome.
std::vector<outcome> run_with(const packswap::shape& s, std::int32_t bad, const fault& f) {
  packswap::threads::world world(s.dp);
  std::vector<outcome> out(static_cast<std::size_t>(s.dp));
  pt::rethrow_first(pt::run_ranks(s.dp, [&](std::int32_t r) {
    packswap::threads::transport inner(world, r);
    faulty t(inner, r == bad ? f : fault{});
    packswap::engine_options opt;
    opt.timeout = deadline_ms;
    out[static_cast<std::size_t>(r)] = pt::drive_until_error(t, s, opt, 3, 11, 4000);
  }));
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What every fault must give on every rank, whatever the fault.
void check_clean_failure(const std::vector<outcome>& out, errc expected) {
  for (std::size_t r = 0; r < out.size(); ++r) {
    const auto& o = out[r];
    CAPTURE(r);
    CAPTURE(o.what);
    CHECK(o.failed);
    CHECK(o.code == expected);
    CHECK(contains(o.what, "rank " + std::to_string(r)));
    CHECK(o.seconds < 10.0); // the deadline is 0.3 s; generous for sanitizers on 2 cores
    CHECK_FALSE(o.worker_running);
    CHECK(o.buffer_bytes == 0);
    CHECK(o.wrong_packs == 0);
  }
}

} // namespace

TEST_CASE("a peer that returns an error fails every rank with errc::transport") {
  const int threads_before = pt::baseline_thread_count();
  const auto out = run_with({3, 4, 2}, 1, fault{fault_kind::fail, fault_target::exchange, 5});
  check_clean_failure(out, errc::transport);
  // The failing rank names its micro-step and peers; the others name the rank that failed.
  CHECK(contains(out[1].what, "rank 1, batch 1, micro-step 1, peers"));
  CHECK(contains(out[1].what, "injected failure"));
  CHECK(contains(out[0].what, "rank 1 aborted the exchange"));
  CHECK(contains(out[2].what, "micro-step"));
  CHECK(out[0].good_packs > 0);
  CHECK(pt::settled_thread_count() == threads_before);
}

TEST_CASE("a failing metadata all-gather fails every rank with errc::transport") {
  const auto out = run_with({2, 2, 1}, 0, fault{fault_kind::fail, fault_target::all_gather, 2});
  check_clean_failure(out, errc::transport);
  CHECK(contains(out[0].what, "metadata all-gather"));
}

TEST_CASE("a peer that hangs fails every rank with errc::timeout within the deadline") {
  const int threads_before = pt::baseline_thread_count();
  const auto out = run_with({3, 4, 1}, 2, fault{fault_kind::hang, fault_target::exchange, 3});
  check_clean_failure(out, errc::timeout);
  CHECK(contains(out[2].what, "did not complete within 300 ms"));
  CHECK(contains(out[2].what, "micro-step 3, peers"));
  CHECK(pt::settled_thread_count() == threads_before);
}

TEST_CASE("a peer that hangs in the metadata all-gather fails every rank with errc::timeout") {
  const auto out = run_with({4, 2, 1}, 3, fault{fault_kind::hang, fault_target::all_gather, 0});
  check_clean_failure(out, errc::timeout);
  CHECK(contains(out[3].what, "rank 3, batch 0, metadata all-gather"));
}

TEST_CASE("short data is caught before the pack is handed out") {
  const auto out = run_with({2, 4, 2}, 0, fault{fault_kind::short_data, fault_target::exchange, 2});
  check_clean_failure(out, errc::mismatch);
  CHECK(contains(out[0].what, "from rank 1 arrived with"));
  CHECK(contains(out[0].what, "micro-step"));
}

TEST_CASE("corrupted data is caught by its checksum before the pack is handed out") {
  const auto out =
      run_with({3, 2, 2}, 1, fault{fault_kind::corrupt_data, fault_target::exchange, 0});
  check_clean_failure(out, errc::mismatch);
  CHECK(contains(out[1].what, "is corrupted: checksum"));
  CHECK(contains(out[1].what, "rank 1, batch 0, micro-step"));
}

TEST_CASE("ranks whose gathered metadata differ all fail with errc::mismatch") {
  const auto out =
      run_with({4, 2, 1}, 2, fault{fault_kind::alter_metadata, fault_target::all_gather, 0});
  check_clean_failure(out, errc::mismatch);
  for (const auto& o : out) {
    CHECK(contains(o.what, "ranks disagree on the gathered metadata or the plan"));
    CHECK(o.good_packs == 0); // nothing of batch 0 is handed out
  }
  // Rank 2 differs from everyone; every other rank's message names it (as the rank whose digest
  // differs, or as the rank that aborted after seeing everyone else differ from it).
  for (const std::size_t r : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    CHECK(contains(out[r].what, "rank 2 "));
  }
}

TEST_CASE("a fault on one rank of a single-rank world still ends cleanly") {
  const auto out = run_with({1, 3, 1}, 0, fault{fault_kind::fail, fault_target::all_gather, 1});
  check_clean_failure(out, errc::transport);
}
