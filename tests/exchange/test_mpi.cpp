// The MPI backend under mpirun: the transport contract, delivery on every shape of the matrix
// (the process count is dp; ctest runs it for 1, 2, 3, 4 and 8 processes), and fault injection
// across processes. Its own main: MPI must be initialized around doctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include "support.hpp"

#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/fault.hpp>
#include <packswap/mpi/transport.hpp>

#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using packswap::errc;
namespace mpi = packswap::mpi;
namespace pt = packswap::test;

static_assert(packswap::is_transport_v<mpi::transport>);

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::int64_t sum_over_ranks(std::int64_t v) {
  long long out = 0;
  long long in = v;
  MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

packswap::deadline in(std::chrono::milliseconds ms) {
  return packswap::exchange_clock::now() + ms;
}

} // namespace

TEST_CASE("mpi: all-gather puts rank r's block at offset r, and self-sends complete") {
  mpi::transport t(MPI_COMM_WORLD);
  const int n = t.size();
  std::vector<std::byte> mine(40, static_cast<std::byte>(t.rank() + 1));
  std::vector<std::byte> all(40 * static_cast<std::size_t>(n));
  mpi::transport::request req;
  t.start_all_gather(req, mine, all);
  REQUIRE(t.wait(req, in(std::chrono::seconds(30))));
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i] == static_cast<std::byte>(i / 40 + 1));
  }
  std::vector<char> src(100, 's'), dst(100);
  std::vector<packswap::send_op> sends{{t.rank(), src.data(), 100}, {t.rank(), nullptr, 0}};
  std::vector<packswap::recv_op> recvs{{t.rank(), dst.data(), 100, -1}, {t.rank(), nullptr, 0, -1}};
  t.start_exchange(req, packswap::span<const packswap::send_op>(sends), recvs);
  REQUIRE(t.wait(req, in(std::chrono::seconds(30))));
  CHECK(dst == src);
  CHECK(recvs[0].received == 100);
  CHECK(recvs[1].received == 0);
}

TEST_CASE("mpi: a ring of sends matches in order across differently grouped requests") {
  mpi::transport t(MPI_COMM_WORLD);
  const int n = t.size();
  const int next = (t.rank() + 1) % n;
  const int prev = (t.rank() + n - 1) % n;
  std::vector<int> a{t.rank(), 1}, b{t.rank(), 2};
  std::vector<int> x(2), y(2);
  mpi::transport::request g1, g2;
  std::vector<packswap::send_op> s1{{next, a.data(), 8}, {next, b.data(), 8}};
  std::vector<packswap::recv_op> r1{{prev, x.data(), 8, -1}};
  std::vector<packswap::recv_op> r2{{prev, y.data(), 8, -1}};
  t.start_exchange(g1, packswap::span<const packswap::send_op>(s1), r1);
  t.start_exchange(g2, {}, r2);
  REQUIRE(t.wait(g1, in(std::chrono::seconds(30))));
  REQUIRE(t.wait(g2, in(std::chrono::seconds(30))));
  CHECK(x == std::vector<int>{prev, 1});
  CHECK(y == std::vector<int>{prev, 2});
}

TEST_CASE("mpi: an abort reaches every other process with its code and message") {
  mpi::transport t(MPI_COMM_WORLD);
  if (t.size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  if (t.rank() == 0) {
    t.abort(errc::mismatch, "pack 3 is corrupted");
  } else {
    std::vector<char> buf(8);
    std::vector<packswap::recv_op> recvs{{0, buf.data(), 8, -1}};
    mpi::transport::request req;
    try {
      // The notice may already be here when the receive starts, or arrive while it waits.
      t.start_exchange(req, {}, recvs);
      (void)t.wait(req, in(std::chrono::seconds(30))); // throws
      FAIL("no error");
    } catch (const packswap::error& e) {
      CHECK(e.code() == errc::mismatch);
      CHECK(std::string(e.what()).find("rank 0 aborted the exchange: pack 3 is corrupted") !=
            std::string::npos);
    }
    t.cancel(req);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: a message longer than its receive is reported whole and written nowhere else") {
  mpi::transport t(MPI_COMM_WORLD);
  if (t.size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  // Ranks that disagree on the plan post receives of the wrong length. 1 MiB goes by Open MPI's
  // single-copy path, which writes a truncated receive's whole message past its buffer.
  constexpr std::int64_t sent = std::int64_t{1} << 20;
  mpi::transport::request req;
  if (t.rank() == 0) {
    std::vector<char> payload(static_cast<std::size_t>(sent), 'm');
    std::vector<packswap::send_op> sends{{1, payload.data(), sent}};
    t.start_exchange(req, packswap::span<const packswap::send_op>(sends), {});
    REQUIRE(t.wait(req, in(std::chrono::seconds(30))));
  } else if (t.rank() == 1) {
    std::vector<char> small(100, 's'); // a heap block of exactly 100 bytes: ASan sees past it
    std::vector<packswap::recv_op> recvs{{0, small.data(), 100, -1}};
    t.start_exchange(req, {}, recvs);
    REQUIRE(t.wait(req, in(std::chrono::seconds(30))));
    CHECK(recvs[0].received == sent); // the engine reports this as a mismatch
    CHECK(std::count(small.begin(), small.end(), 's') == 100);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: cancel of an unmatched send returns once the peer drained it, and not before") {
  mpi::transport t(MPI_COMM_WORLD);
  if (t.size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  // 4 MiB is far above any eager limit: the send completes only when rank 1 takes it.
  std::vector<char> payload(std::size_t{4} << 20, 'p');
  if (t.rank() == 0) {
    std::vector<packswap::send_op> sends{{1, payload.data(), std::int64_t{4} << 20}};
    mpi::transport::request req;
    t.start_exchange(req, packswap::span<const packswap::send_op>(sends), {});
    const auto t0 = std::chrono::steady_clock::now();
    t.cancel(req); // aborts: rank 1 never receives it, so it must drain it
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(t.stray_operations() == 0);
    CHECK(waited >= std::chrono::milliseconds(150)); // it waited for rank 1's drain
    std::fill(payload.begin(), payload.end(), 'x');  // allowed now
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The other ranks stop too, as their engines would on the notice: they drain.
    t.abort(errc::cancelled, "rank " + std::to_string(t.rank()) + " stops too");
    CHECK(t.stray_operations() == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: a peer that never drains leaves the send counted as stray at the deadline") {
  mpi::transport t(MPI_COMM_WORLD, std::chrono::milliseconds(300));
  if (t.size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  static std::vector<char> payload(std::size_t{4} << 20, 'p'); // MPI may read it until exit
  if (t.rank() == 0) {
    std::vector<packswap::send_op> sends{{1, payload.data(), std::int64_t{4} << 20}};
    mpi::transport::request req;
    t.start_exchange(req, packswap::span<const packswap::send_op>(sends), {});
    const auto t0 = std::chrono::steady_clock::now();
    t.cancel(req);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    CHECK(t.stray_operations() == 1);
  }
  MPI_Barrier(MPI_COMM_WORLD); // rank 1 never looked at the transport
}

TEST_CASE("mpi: every pack reaches its assigned cell exactly once and byte-identical") {
  const int dp = world_size();
  std::uint64_t seed = 500;
  for (std::int32_t ga : {1, 2, 4}) {
    for (std::int32_t mbs : {1, 2}) {
      mpi::transport t(MPI_COMM_WORLD);
      packswap::engine_options opt;
      opt.timeout = std::chrono::seconds(60);
      opt.prefetch_depth = 1 + static_cast<std::int32_t>(seed % 2);
      const packswap::shape s{dp, ga, mbs};
      const auto log = pt::drive(t, s, opt, 3, ++seed, 6000);
      std::int64_t ok = 0;
      for (const auto& d : log) {
        CAPTURE(world_rank());
        CAPTURE(ga);
        CAPTURE(mbs);
        CAPTURE(d.batch);
        CAPTURE(d.pack);
        CHECK(d.intact);
        CHECK(d.on_plan);
        CHECK(d.in_place);
        ok += d.intact && d.on_plan && d.in_place ? 1 : 0;
      }
      // Each rank got exactly its plan's cells (on_plan); together they hold every pack once.
      CHECK(sum_over_ranks(static_cast<std::int64_t>(log.size())) == 3 * s.packs());
      CHECK(sum_over_ranks(ok) == 3 * s.packs());
    }
  }
}

namespace {

using pt::outcome;

// Runs 3 batches with `f` injected on rank `bad`; small packs, so that MPI sends complete eagerly.
outcome run_fault(int bad, const packswap::fault& f) {
  mpi::transport inner(MPI_COMM_WORLD);
  using faulty = packswap::fault_injecting_transport<mpi::transport>;
  faulty t(inner, world_rank() == bad ? f : packswap::fault{});
  packswap::engine_options opt;
  opt.timeout = std::chrono::milliseconds(500);
  return pt::drive_until_error(t, {world_size(), 2, 2}, opt, 3, 77, 2000);
}

void check_fault(const outcome& o, errc expected) {
  CAPTURE(world_rank());
  CAPTURE(o.what);
  CHECK(o.failed);
  CHECK(o.code == expected);
  CHECK(o.what.find("rank " + std::to_string(world_rank())) != std::string::npos);
  CHECK(o.seconds < 20.0);
  CHECK_FALSE(o.worker_running);
  CHECK(o.buffer_bytes == 0);
  CHECK(o.wrong_packs == 0);
}

} // namespace

TEST_CASE("mpi: a process whose exchange fails ends every process in errc::transport") {
  if (world_size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  const auto o = run_fault(
      1, packswap::fault{packswap::fault_kind::fail, packswap::fault_target::exchange, 2});
  check_fault(o, errc::transport);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: a process that hangs ends every process in errc::timeout") {
  if (world_size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  const auto o = run_fault(
      0, packswap::fault{packswap::fault_kind::hang, packswap::fault_target::exchange, 1});
  check_fault(o, errc::timeout);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: corrupted data ends every process in errc::mismatch, nothing wrong handed out") {
  if (world_size() < 2) {
    MESSAGE("skipped: needs 2 processes");
    return;
  }
  const auto o = run_fault(world_size() - 1, packswap::fault{packswap::fault_kind::corrupt_data,
                                                             packswap::fault_target::exchange, 0});
  check_fault(o, errc::mismatch);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi: processes whose gathered metadata differ all end in errc::mismatch") {
  if (world_size() < 2) {
    MESSAGE("skipped: one process cannot disagree with itself");
    return;
  }
  const auto o = run_fault(0, packswap::fault{packswap::fault_kind::alter_metadata,
                                              packswap::fault_target::all_gather, 0});
  check_fault(o, errc::mismatch);
  CHECK(o.what.find("ranks disagree") != std::string::npos);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    doctest::Context context(argc, argv);
    rc = context.run();
  }
  // Every process must agree on the result, or mpirun reports the first failure only.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
