#include <packswap/detail/prng.hpp>
#include <packswap/detail/products.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using packswap::detail::compare_products;
using packswap::detail::compare_products_portable;

namespace {

// The sign of a * b - c * d for operands small enough that the products fit in 64 bits.
int small_sign(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  const std::int64_t ab = a * b;
  const std::int64_t cd = c * d;
  return ab == cd ? 0 : (ab < cd ? -1 : 1);
}

} // namespace

static_assert(compare_products(3, 4, 2, 6) == 0, "usable in constant expressions");
static_assert(compare_products_portable(3, 4, 2, 6) == 0, "usable in constant expressions");

TEST_CASE("compare_products gives the exact sign where the products fit in 64 bits") {
  packswap::prng rng(17);
  for (int i = 0; i < 20000; ++i) {
    const auto a = static_cast<std::int64_t>(rng.below(1u << 31));
    const auto b = static_cast<std::int64_t>(rng.below(1u << 31));
    const auto c = static_cast<std::int64_t>(rng.below(1u << 31));
    // Every fourth d makes the products equal where c divides a * b.
    const std::int64_t d = (i % 4 == 0 && c != 0 && (a * b) % c == 0)
                               ? (a * b) / c
                               : static_cast<std::int64_t>(rng.below(1u << 31));
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    CAPTURE(d);
    CHECK(compare_products(a, b, c, d) == small_sign(a, b, c, d));
    CHECK(compare_products_portable(a, b, c, d) == small_sign(a, b, c, d));
  }
}

TEST_CASE("compare_products and its portable form agree on 128-bit products") {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  // Products that differ only in their low 64 bits, only in their high bits, and not at all.
  CHECK(compare_products(max, max, max, max) == 0);
  CHECK(compare_products(max, max, max, max - 1) == 1);
  CHECK(compare_products(max - 1, max, max, max) == -1);
  CHECK(compare_products(std::int64_t{1} << 62, 4, std::int64_t{1} << 32, std::int64_t{1} << 32) ==
        0);
  CHECK(compare_products(std::int64_t{1} << 62, 4, (std::int64_t{1} << 32) + 1,
                         std::int64_t{1} << 32) == -1);
  CHECK(compare_products(0, max, 0, 0) == 0);
  packswap::prng rng(29);
  for (int i = 0; i < 20000; ++i) {
    // Operands of every width, from a few bits to 63.
    const auto draw = [&] {
      const auto bits = static_cast<int>(rng.below(63)) + 1;
      return static_cast<std::int64_t>(rng() >> (64 - bits));
    };
    const std::int64_t a = draw();
    const std::int64_t b = draw();
    const std::int64_t c = i % 3 == 0 ? b : draw();
    const std::int64_t d = i % 3 == 0 ? a : draw();
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    CAPTURE(d);
    CHECK(compare_products(a, b, c, d) == compare_products_portable(a, b, c, d));
    CHECK(compare_products(a, b, c, d) == -compare_products(c, d, a, b));
  }
}
