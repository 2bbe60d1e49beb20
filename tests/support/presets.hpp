#pragma once

// Global batches cut from the workload presets, as the benchmarks and the tests both use them: a
// preset's samples packed into 8,192-token packs and priced by the default cost and payload
// models.

#include <packswap/batch.hpp>
#include <packswap/cost/pack_meta.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/packer.hpp>
#include <packswap/packing/workload.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace packswap::test {

/// The first global batch of shape `s` cut from workload preset `preset`, packed 1D into 8,192-
/// token packs (buffer 1,000); rank r loaded packs [r * K, (r + 1) * K), as with contiguous
/// shards. Enough samples are generated to fill the batch: 4 a pack and 1,000 more, twice as many
/// until they do (captioning's short samples need more).
inline std::vector<pack_meta> preset_batch(const std::string& preset, const shape& s,
                                           std::uint64_t seed) {
  const auto w = workload_preset(preset);
  for (std::int64_t samples = s.packs() * 4 + 1000;; samples *= 2) {
    const auto set = generate(w, samples, seed);
    const auto packs = pack_samples(set, greedy_packer{});
    if (static_cast<std::int64_t>(packs.size()) >= s.packs()) {
      return make_pack_meta(set, packs, 0, s);
    }
  }
}

} // namespace packswap::test
