#pragma once

#include <cstdint>

namespace packswap::detail {

/// `keep ? v : 0` by masking. For sums over conditions that follow no pattern: g++ 12 compiles
/// some such conditional expressions to jumps, which then mispredict often.
inline std::int64_t keep_if(bool keep, std::int64_t v) {
  return v & -static_cast<std::int64_t>(keep);
}

} // namespace packswap::detail
