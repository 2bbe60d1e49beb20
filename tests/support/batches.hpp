#pragma once

// Seeded random global batches for the solver's tests: pack metadata only, drawn with
// packswap::prng so every compiler sees the same batches.

#include <packswap/batch.hpp>
#include <packswap/detail/prng.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace packswap::test {

/// Cost/bytes shapes that stress different parts of the solver.
enum class mix {
  vlm,       ///< like real packs: ~25% text-only (cost 0), image tokens with a heavy tail
  uniform,   ///< costs uniform in a wide range
  ties,      ///< few distinct costs, so many packs tie
  all_equal, ///< every pack costs the same
  all_zero,  ///< every pack costs nothing
  one_giant, ///< one pack dwarfs all others
  zero_bytes ///< like vlm, but many packs carry no payload
};

inline const char* name(mix m) {
  switch (m) {
  case mix::vlm:
    return "vlm";
  case mix::uniform:
    return "uniform";
  case mix::ties:
    return "ties";
  case mix::all_equal:
    return "all_equal";
  case mix::all_zero:
    return "all_zero";
  case mix::one_giant:
    return "one_giant";
  case mix::zero_bytes:
    return "zero_bytes";
  }
  return "?";
}

inline const mix all_mixes[] = {mix::vlm,      mix::uniform,   mix::ties,      mix::all_equal,
                                mix::all_zero, mix::one_giant, mix::zero_bytes};

/// One global batch of shape `s`: rank r's loader produced packs [r * K, (r + 1) * K) (K = ga *
/// mbs), as with contiguous shards, unless `shuffle_sources` deals source ranks at random (still
/// K per rank).
inline std::vector<pack_meta> random_batch(const shape& s, std::uint64_t seed, mix m,
                                           bool shuffle_sources = false) {
  prng rng(seed);
  const auto n = static_cast<std::size_t>(s.packs());
  std::vector<pack_meta> packs(n);
  for (std::size_t p = 0; p < n; ++p) {
    std::int64_t image_tokens = 0;
    std::int64_t cost = 0;
    switch (m) {
    case mix::vlm:
    case mix::zero_bytes:
      for (int sample = 0; sample < 3; ++sample) {
        const auto u = rng.below(100);
        image_tokens += u < 25   ? 0
                        : u < 75 ? rng.uniform(256, 1280)
                        : u < 95 ? rng.uniform(1280, 2560)
                                 : rng.uniform(2560, 6000);
      }
      cost = image_tokens == 0 ? 0 : 180'000 + 840 * image_tokens;
      break;
    case mix::uniform:
      image_tokens = rng.uniform(0, 4000);
      cost = rng.uniform(0, 5'000'000);
      break;
    case mix::ties:
      image_tokens = 576 * rng.uniform(0, 4);
      cost = 1'000 * image_tokens;
      break;
    case mix::all_equal:
      image_tokens = 1000;
      cost = 777'000;
      break;
    case mix::all_zero:
      image_tokens = 0;
      cost = 0;
      break;
    case mix::one_giant:
      image_tokens = p == n / 2 ? 60'000 : rng.uniform(0, 500);
      cost = p == n / 2 ? 900'000'000 : rng.uniform(1'000, 10'000);
      break;
    }
    packs[p].cost = cost;
    packs[p].bytes = (m == mix::zero_bytes && rng.chance(1, 3)) ? 0 : 32'768 + 4'704 * image_tokens;
    packs[p].source_rank =
        static_cast<std::int32_t>(p / static_cast<std::size_t>(s.packs_per_rank()));
  }
  if (shuffle_sources) {
    for (std::size_t i = n; i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng.below(i));
      std::swap(packs[i - 1].source_rank, packs[j].source_rank);
    }
  }
  return packs;
}

/// Costs of a batch.
inline std::vector<std::int64_t> costs_of(const std::vector<pack_meta>& packs) {
  std::vector<std::int64_t> c(packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    c[p] = packs[p].cost;
  }
  return c;
}

/// A random shape with dp, ga in [1, max] and mbs in [1, max_mbs].
inline shape random_shape(prng& rng, std::int32_t max_dp, std::int32_t max_ga,
                          std::int32_t max_mbs) {
  return shape{static_cast<std::int32_t>(rng.uniform(1, max_dp)),
               static_cast<std::int32_t>(rng.uniform(1, max_ga)),
               static_cast<std::int32_t>(rng.uniform(1, max_mbs))};
}

} // namespace packswap::test
