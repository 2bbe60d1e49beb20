// The transport contract, written once and run over every host transport that runs in one
// process: the threads backend and the fault-injecting wrapper with no fault armed.
#include "support.hpp"

#include <packswap/exchange/fault.hpp>
#include <packswap/exchange/threads.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using packswap::deadline;
using packswap::errc;
using packswap::recv_op;
using packswap::send_op;
namespace pt = packswap::test;

namespace {

struct threads_harness {
  using transport = packswap::threads::transport;
  explicit threads_harness(std::int32_t n) : world(n) {
    for (std::int32_t r = 0; r < n; ++r) {
      ranks.push_back(std::make_unique<transport>(world, r));
    }
  }
  transport& at(std::int32_t r) { return *ranks[static_cast<std::size_t>(r)]; }
  packswap::threads::world world;
  std::vector<std::unique_ptr<transport>> ranks;
};

struct passthrough_harness {
  using transport = packswap::fault_injecting_transport<packswap::threads::transport>;
  explicit passthrough_harness(std::int32_t n) : inner(n) {
    for (std::int32_t r = 0; r < n; ++r) {
      ranks.push_back(std::make_unique<transport>(inner.at(r)));
    }
  }
  transport& at(std::int32_t r) { return *ranks[static_cast<std::size_t>(r)]; }
  threads_harness inner;
  std::vector<std::unique_ptr<transport>> ranks;
};

deadline in(std::chrono::milliseconds ms) {
  return packswap::exchange_clock::now() + ms;
}

template <class T>
packswap::span<const T> cspan(const std::vector<T>& v) {
  return packswap::span<const T>(v.data(), v.size());
}

} // namespace

TEST_CASE_TEMPLATE("the n-th send to a peer matches the n-th receive from it, across groups", H,
                   threads_harness, passthrough_harness) {
  H h(2);
  std::vector<int> a{1, 2, 3}, b{4, 5}, c{6};
  std::vector<int> x(3), y(2), z(1);
  pt::rethrow_first(pt::run_ranks(2, [&](std::int32_t r) {
    auto& t = h.at(r);
    if (r == 0) {
      // Two groups: {a, b}, then {c}.
      typename H::transport::request g1, g2;
      std::vector<send_op> s1{{1, a.data(), 12}, {1, b.data(), 8}};
      std::vector<send_op> s2{{1, c.data(), 4}};
      t.start_exchange(g1, cspan(s1), {});
      t.start_exchange(g2, cspan(s2), {});
      REQUIRE(t.wait(g1, in(std::chrono::seconds(10))));
      REQUIRE(t.wait(g2, in(std::chrono::seconds(10))));
    } else {
      // Grouped differently on this side: {x}, then {y, z}.
      typename H::transport::request g1, g2;
      std::vector<recv_op> r1{{0, x.data(), 12, -1}};
      std::vector<recv_op> r2{{0, y.data(), 8, -1}, {0, z.data(), 4, -1}};
      t.start_exchange(g1, {}, r1);
      t.start_exchange(g2, {}, r2);
      REQUIRE(t.wait(g1, in(std::chrono::seconds(10))));
      REQUIRE(t.wait(g2, in(std::chrono::seconds(10))));
      CHECK(r1[0].received == 12);
      CHECK(r2[0].received == 8);
      CHECK(r2[1].received == 4);
    }
  }));
  CHECK(x == a);
  CHECK(y == b);
  CHECK(z == c);
}

TEST_CASE_TEMPLATE("self-sends and empty messages complete", H, threads_harness,
                   passthrough_harness) {
  H h(1);
  auto& t = h.at(0);
  std::vector<char> src{'p', 'a', 'c', 'k'}, dst(4);
  typename H::transport::request req;
  std::vector<send_op> sends{{0, src.data(), 4}, {0, nullptr, 0}};
  std::vector<recv_op> recvs{{0, dst.data(), 4, -1}, {0, nullptr, 0, -1}};
  t.start_exchange(req, cspan(sends), recvs);
  REQUIRE(t.wait(req, in(std::chrono::seconds(10))));
  CHECK(dst == src);
  CHECK(recvs[1].received == 0);
  // A request is reusable once complete.
  t.start_exchange(req, cspan(sends), recvs);
  CHECK(t.wait(req, in(std::chrono::seconds(10))));
}

TEST_CASE_TEMPLATE("all-gather puts rank r's block at offset r", H, threads_harness,
                   passthrough_harness) {
  for (std::int32_t n = 1; n <= 5; ++n) {
    H h(n);
    std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(n));
    pt::rethrow_first(pt::run_ranks(n, [&](std::int32_t r) {
      auto& t = h.at(r);
      std::vector<std::byte> mine(24, static_cast<std::byte>(r + 1));
      auto& out = all[static_cast<std::size_t>(r)];
      out.assign(24 * static_cast<std::size_t>(n), std::byte{0});
      typename H::transport::request req;
      t.start_all_gather(req, cspan(mine), out);
      REQUIRE(t.wait(req, in(std::chrono::seconds(10))));
    }));
    for (std::int32_t r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < all[static_cast<std::size_t>(r)].size(); ++i) {
        CHECK(all[static_cast<std::size_t>(r)][i] == static_cast<std::byte>(i / 24 + 1));
      }
    }
  }
}

TEST_CASE_TEMPLATE("a receive reports what was sent, even when that is not what it expected", H,
                   threads_harness, passthrough_harness) {
  H h(1);
  auto& t = h.at(0);
  std::vector<char> src(10, 'x'), dst(16, '.');
  typename H::transport::request req;
  std::vector<send_op> sends{{0, src.data(), 10}};
  std::vector<recv_op> recvs{{0, dst.data(), 16, -1}};
  t.start_exchange(req, cspan(sends), recvs);
  REQUIRE(t.wait(req, in(std::chrono::seconds(10))));
  CHECK(recvs[0].received == 10);
}

TEST_CASE_TEMPLATE("a wait gives up at its deadline and a cancelled request touches nothing", H,
                   threads_harness, passthrough_harness) {
  H h(2);
  auto& t = h.at(0);
  auto dst = std::make_unique<std::vector<char>>(8, '.');
  typename H::transport::request req;
  std::vector<recv_op> recvs{{1, dst->data(), 8, -1}};
  t.start_exchange(req, {}, recvs);
  const auto t0 = packswap::exchange_clock::now();
  CHECK_FALSE(t.wait(req, in(std::chrono::milliseconds(50))));
  CHECK(packswap::exchange_clock::now() - t0 >= std::chrono::milliseconds(50));
  t.cancel(req);
  dst.reset(); // freed: a late send must not land here
  // Rank 1's unmatched send from a buffer freed after cancel is withdrawn, too.
  auto src = std::make_unique<std::vector<char>>(8, 's');
  typename H::transport::request sreq;
  std::vector<send_op> sends{{0, src->data(), 8}};
  h.at(1).start_exchange(sreq, cspan(sends), {});
  CHECK_FALSE(h.at(1).wait(sreq, in(std::chrono::milliseconds(10))));
  h.at(1).cancel(sreq);
  src.reset();
}

TEST_CASE_TEMPLATE("an abort fails the other ranks with the aborting rank's code and message", H,
                   threads_harness, passthrough_harness) {
  H h(3);
  std::vector<std::string> messages(3);
  std::vector<errc> codes(3, errc::internal);
  pt::rethrow_first(pt::run_ranks(3, [&](std::int32_t r) {
    auto& t = h.at(r);
    if (r == 2) {
      t.abort(errc::mismatch, "pack 7 is corrupted");
      return;
    }
    std::vector<char> buf(4);
    typename H::transport::request req;
    std::vector<recv_op> recvs{{2, buf.data(), 4, -1}};
    try {
      // The abort may come before the start: then the start fails the same way.
      t.start_exchange(req, {}, recvs);
      (void)t.wait(req, in(std::chrono::seconds(30))); // throws
    } catch (const packswap::error& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
      codes[static_cast<std::size_t>(r)] = e.code();
    }
    t.cancel(req);
  }));
  for (std::int32_t r = 0; r < 2; ++r) {
    CHECK(codes[static_cast<std::size_t>(r)] == errc::mismatch);
    CHECK(messages[static_cast<std::size_t>(r)].find(
              "rank 2 aborted the exchange: pack 7 is corrupted") != std::string::npos);
  }
  typename H::transport::request req;
  CHECK_THROWS_AS(h.at(0).start_exchange(req, {}, {}), packswap::error);
}

TEST_CASE("a threads::transport refuses a rank outside its world") {
  packswap::threads::world world(2);
  CHECK_THROWS_WITH_AS(packswap::threads::transport(world, 2),
                       doctest::Contains("rank 2 is outside a threads::world of 2 ranks"),
                       packswap::error);
  CHECK_THROWS_WITH_AS(packswap::threads::world(0), doctest::Contains("got 0"), packswap::error);
}
