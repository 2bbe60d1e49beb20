#pragma once

#include <cstddef>
#include <cstdint>

namespace packswap::detail {

/// FNV-1a over little-endian integer words: a digest that is the same on every compiler and
/// platform, used to compare plans and gathered metadata across ranks and in golden tests.
class digest {
 public:
  constexpr void bytes(const unsigned char* data, std::size_t size) noexcept {
    for (std::size_t i = 0; i < size; ++i) {
      h_ = (h_ ^ data[i]) * 0x100000001b3ULL;
    }
  }
  constexpr void u64(std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) {
      h_ = (h_ ^ static_cast<unsigned char>(v >> (8 * i))) * 0x100000001b3ULL;
    }
  }
  constexpr void i64(std::int64_t v) noexcept { u64(static_cast<std::uint64_t>(v)); }
  constexpr std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

} // namespace packswap::detail
