#pragma once

#include "packswap/error.hpp"

#include <cstdint>
#include <limits>

namespace packswap::detail {

/// `a + b`, or false when the sum leaves `std::int64_t`.
inline bool add_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_add_overflow(a, b, &out);
#else
  if ((b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) ||
      (b < 0 && a < std::numeric_limits<std::int64_t>::min() - b)) {
    return true;
  }
  out = a + b;
  return false;
#endif
}

/// `a * b`, or false when the product leaves `std::int64_t`.
inline bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_mul_overflow(a, b, &out);
#else
  if (a != 0 && b != 0) {
    const auto max = std::numeric_limits<std::int64_t>::max();
    const auto min = std::numeric_limits<std::int64_t>::min();
    if ((a > 0 && b > 0 && a > max / b) || (a < 0 && b < 0 && a < max / b) ||
        (a > 0 && b < 0 && b < min / a) || (a < 0 && b > 0 && a < min / b)) {
      return true;
    }
  }
  out = a * b;
  return false;
#endif
}

/// `a + b`; throws `errc::overflow` naming `what` when the sum leaves `std::int64_t`.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  PACKSWAP_EXPECTS(!add_overflows(a, b, out), errc::overflow,
                   what << " overflows int64: " << a << " + " << b);
  return out;
}

/// `a * b`; throws `errc::overflow` naming `what` when the product leaves `std::int64_t`.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t out = 0;
  PACKSWAP_EXPECTS(!mul_overflows(a, b, out), errc::overflow,
                   what << " overflows int64: " << a << " * " << b);
  return out;
}

} // namespace packswap::detail
