#pragma once

// Global batches for the benchmarks: real ones (a workload preset's samples packed into 8K packs,
// priced by the default cost and payload models) and the synthetic stress mixes of the tests.

#include <packswap/cost/pack_meta.hpp>

#include "batches.hpp" // tests/support: synthetic mixes
#include "presets.hpp" // tests/support: workload batches

#include <cstdint>
#include <string>
#include <vector>

namespace packswap::bench {

/// The first global batch of shape `s` cut from workload preset `preset`
/// (tests/support/presets.hpp, shared with the tests).
using test::preset_batch;

/// A named batch: a workload preset name, or `synthetic:<mix>` for one of the test mixes.
inline std::vector<pack_meta> named_batch(const std::string& name, const shape& s,
                                          std::uint64_t seed) {
  const std::string prefix = "synthetic:";
  if (name.rfind(prefix, 0) == 0) {
    for (const auto m : test::all_mixes) {
      if (name.substr(prefix.size()) == test::name(m)) {
        return test::random_batch(s, seed, m);
      }
    }
  }
  return preset_batch(name, s, seed);
}

} // namespace packswap::bench
