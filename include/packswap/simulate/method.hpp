#pragma once

#include "packswap/error.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace packswap {

/// The ways of running a global batch that the simulator compares (DESIGN.md §1).
enum class method {
  baseline,          ///< 1D packs where the loader put them (`loader_placement`)
  two_d,             ///< 2D budgeted packs where the loader put them; no rebalancing
  local,             ///< 1D packs, each rank reorders its own, heaviest first (`local_placement`)
  rebalance_sync,    ///< packswap's `solve`, the packs exchanged before each micro-step
  rebalance_overlap, ///< the same assignment, exchanged while the previous micro-step computes
};

/// Every method, in reporting order; `static_cast<std::size_t>(m)` is `m`'s index.
inline constexpr std::array<method, 5> all_methods = {method::baseline, method::two_d,
                                                      method::local, method::rebalance_sync,
                                                      method::rebalance_overlap};

/// The stable name of a method: `"baseline"`, `"2d"`, `"local"`, `"rebalance-sync"`,
/// `"rebalance-overlap"` (the names in `packswap-sim`'s JSON and CSV).
[[nodiscard]] constexpr const char* to_string(method m) noexcept {
  switch (m) {
  case method::baseline:
    return "baseline";
  case method::two_d:
    return "2d";
  case method::local:
    return "local";
  case method::rebalance_sync:
    return "rebalance-sync";
  case method::rebalance_overlap:
    return "rebalance-overlap";
  }
  return "unknown";
}

/// The method named `name` (see `to_string`). Throws `errc::invalid_argument` listing the known
/// names for any other.
///
/// ```
/// auto m = packswap::method_from_string("rebalance-overlap");
/// ```
[[nodiscard]] inline method method_from_string(std::string_view name) {
  std::string known;
  for (const auto m : all_methods) {
    if (name == to_string(m)) {
      return m;
    }
    known += (known.empty() ? "" : ", ") + std::string(to_string(m));
  }
  PACKSWAP_FAIL(errc::invalid_argument, "unknown method '" << name << "' (known: " << known << ")");
}

} // namespace packswap
