#pragma once

// Global batches for the benchmarks: real ones (a workload preset's samples packed into 8K packs,
// priced by the default cost and payload models) and the synthetic stress mixes of the tests.

#include <packswap/cost/pack_meta.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/packer.hpp>
#include <packswap/packing/workload.hpp>

#include "batches.hpp" // tests/support: synthetic mixes

#include <cstdint>
#include <string>
#include <vector>

namespace packswap::bench {

/// The first global batch of shape `s` cut from workload preset `preset`, packed 1D into 8,192-
/// token packs (buffer 1,000); rank r loaded packs [r * K, (r + 1) * K), as with contiguous
/// shards. Enough samples are generated to fill the batch.
inline std::vector<pack_meta> preset_batch(const std::string& preset, const shape& s,
                                           std::uint64_t seed) {
  const auto w = workload_preset(preset);
  std::int64_t samples = s.packs() * 4 + 1000;
  for (;;) {
    const auto set = generate(w, samples, seed);
    const auto packs = pack_samples(set, greedy_packer{});
    if (static_cast<std::int64_t>(packs.size()) >= s.packs()) {
      return make_pack_meta(set, packs, 0, s);
    }
    samples *= 2;
  }
}

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
