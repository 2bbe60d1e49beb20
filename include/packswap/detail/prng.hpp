#pragma once

#include "packswap/detail/products.hpp"

#include <cstdint>

namespace packswap::detail {

/// SplitMix64: expands one 64-bit seed into well-mixed state words.
constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

} // namespace packswap::detail

namespace packswap {

/// xoshiro256** with our own integer distributions, so that a seed gives the same stream on every
/// compiler and standard library (`std::uniform_int_distribution` differs between libstdc++ and
/// libc++). No floating point is involved anywhere.
///
/// ```
/// packswap::prng rng(42);
/// auto die = rng.uniform(1, 6); // in [1, 6]
/// ```
class prng {
 public:
  using result_type = std::uint64_t;

  constexpr explicit prng(std::uint64_t seed) noexcept {
    std::uint64_t sm = seed;
    for (auto& word : s_) {
      word = detail::splitmix64(sm);
    }
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return ~std::uint64_t{0}; }

  /// The next 64 random bits.
  constexpr result_type operator()() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in `[0, bound)`, unbiased (Lemire's multiply-and-reject); `bound` must be > 0.
  constexpr std::uint64_t below(std::uint64_t bound) noexcept {
    std::uint64_t hi = 0;
    std::uint64_t lo = 0;
    detail::mul_64x64((*this)(), bound, hi, lo);
    if (lo < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (lo < threshold) {
        detail::mul_64x64((*this)(), bound, hi, lo);
      }
    }
    return hi;
  }

  /// Uniform in `[lo, hi]` (both included); requires `lo <= hi`.
  constexpr std::int64_t uniform(std::int64_t lo, std::int64_t hi) noexcept {
    const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span == ~std::uint64_t{0}) {
      return static_cast<std::int64_t>((*this)());
    }
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + below(span + 1));
  }

  /// True with probability `num / den` (requires `0 <= num <= den`, `den > 0`).
  constexpr bool chance(std::uint64_t num, std::uint64_t den) noexcept { return below(den) < num; }

  /// A child generator with its own stream, derived from this one's next output and `salt`.
  constexpr prng fork(std::uint64_t salt) noexcept {
    return prng((*this)() ^ (salt * 0xd1342543de82ef95ULL));
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }

  std::uint64_t s_[4] = {};
};

} // namespace packswap
