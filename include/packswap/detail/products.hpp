#pragma once

#include <cstdint>

/// Exact products of 64-bit integers, for comparisons of ratios that every compiler must answer
/// alike (no floating point: its precision differs between platforms).

namespace packswap::detail {

/// `hi:lo` = a * b, the full 128-bit product, portably.
constexpr void mul_64x64(std::uint64_t a, std::uint64_t b, std::uint64_t& hi,
                         std::uint64_t& lo) noexcept {
  const std::uint64_t a_lo = a & 0xffffffffULL;
  const std::uint64_t a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xffffffffULL;
  const std::uint64_t b_hi = b >> 32;
  const std::uint64_t p0 = a_lo * b_lo;
  const std::uint64_t p1 = a_lo * b_hi;
  const std::uint64_t p2 = a_hi * b_lo;
  const std::uint64_t p3 = a_hi * b_hi;
  const std::uint64_t mid = (p0 >> 32) + (p1 & 0xffffffffULL) + (p2 & 0xffffffffULL);
  lo = (mid << 32) | (p0 & 0xffffffffULL);
  hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

/// Sign of a * b - c * d for non-negative operands, exactly, from 128-bit products built of
/// four 32-bit multiplications each: for any compiler.
constexpr int compare_products_portable(std::int64_t a, std::int64_t b, std::int64_t c,
                                        std::int64_t d) noexcept {
  std::uint64_t ab_hi = 0;
  std::uint64_t ab_lo = 0;
  std::uint64_t cd_hi = 0;
  std::uint64_t cd_lo = 0;
  mul_64x64(static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b), ab_hi, ab_lo);
  mul_64x64(static_cast<std::uint64_t>(c), static_cast<std::uint64_t>(d), cd_hi, cd_lo);
  if (ab_hi != cd_hi) {
    return ab_hi < cd_hi ? -1 : 1;
  }
  return ab_lo == cd_lo ? 0 : (ab_lo < cd_lo ? -1 : 1);
}

/// Sign of a * b - c * d for non-negative operands, exactly: with the compiler's 128-bit integer
/// where it has one (one multiplication each; the solver's repair orders swaps by such ratios),
/// else compare_products_portable. Both give the exact sign, so every build answers alike.
constexpr int compare_products(std::int64_t a, std::int64_t b, std::int64_t c,
                               std::int64_t d) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ using u128 = unsigned __int128;
  const u128 ab = static_cast<u128>(static_cast<std::uint64_t>(a)) * static_cast<std::uint64_t>(b);
  const u128 cd = static_cast<u128>(static_cast<std::uint64_t>(c)) * static_cast<std::uint64_t>(d);
  return ab == cd ? 0 : (ab < cd ? -1 : 1);
#else
  return compare_products_portable(a, b, c, d);
#endif
}

} // namespace packswap::detail
