#include <packswap/exchange/cta.hpp>

#include <doctest/doctest.h>

using packswap::choose_ctas;
using packswap::cta_policy;

namespace {
constexpr std::int64_t mib = 1 << 20;
constexpr std::int64_t ten_ms = 10'000'000;
} // namespace

TEST_CASE("choose_ctas reproduces the H200 measurements behind 10 ms of GEMMs") {
  auto p = cta_policy::automatic();
  CHECK(choose_ctas(256 * mib, ten_ms, p) == 4);       // the floor: short exchanges hide best
  CHECK(choose_ctas(1024 * mib, ten_ms, p) == 4);      // 5.7 ms at 4 x 47 GB/s: fits 70% of 10 ms
  CHECK(choose_ctas(4 * 1024 * mib, ten_ms, p) == 13); // 4 GiB: more than the floor
  p.min_ctas = 1;                                      // the fewest that fit, floor lowered
  CHECK(choose_ctas(256 * mib, ten_ms, p) == 1);       // 5.6 ms at 48 GB/s: fits 70% of 10 ms
}

TEST_CASE("choose_ctas takes more CTAs for more bytes or less compute, within its limits") {
  const auto p = cta_policy::automatic();
  std::int32_t last = p.min_ctas;
  for (std::int64_t bytes = 0; bytes <= 64LL * 1024 * mib; bytes += 97 * mib) {
    const auto c = choose_ctas(bytes, ten_ms, p);
    CHECK(c >= last);
    CHECK(c >= p.min_ctas);
    CHECK(c <= p.max_ctas);
    last = c;
  }
  CHECK(last == p.max_ctas);
  last = p.max_ctas;
  for (std::int64_t ns = 1'000'000; ns <= 200'000'000; ns += 1'000'000) {
    const auto c = choose_ctas(512 * mib, ns, p);
    CHECK(c <= last);
    last = c;
  }
  CHECK(last == p.min_ctas);
}

TEST_CASE("choose_ctas keeps its starting count until compute time was measured") {
  auto p = cta_policy::automatic();
  p.ctas = 6;
  CHECK(choose_ctas(1024 * mib, 0, p) == 6);
  CHECK(choose_ctas(0, ten_ms, p) == p.min_ctas);
}

TEST_CASE("a cta_policy out of range is refused with the offending value") {
  auto p = cta_policy::fixed(0);
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("cta_policy::ctas is 0"), packswap::error);
  p = cta_policy::automatic();
  p.window_fraction = 1.5;
  CHECK_THROWS_WITH_AS(choose_ctas(1, 1, p), doctest::Contains("window_fraction is 1.5"),
                       packswap::error);
  p = cta_policy::automatic();
  p.max_ctas = 100;
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("max_ctas is 100"), packswap::error);
  p = cta_policy::automatic();
  p.min_ctas = 40;
  CHECK_THROWS_WITH_AS(p.validate(), doctest::Contains("min_ctas is 40"), packswap::error);
  CHECK_NOTHROW(cta_policy::nccl_default().validate());
}
