#pragma once

#include <cstdint>

namespace packswap::detail {

/// `keep ? v : 0` by masking. For sums over conditions that hold at random: g++ 12 compiles many
/// such conditional expressions to jumps, which then mispredict about half the time.
inline std::int64_t keep_if(bool keep, std::int64_t v) {
  return v & -static_cast<std::int64_t>(keep);
}

} // namespace packswap::detail
