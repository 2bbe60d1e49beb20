#pragma once

// The solver's stress set: seeded global batches whose cost and byte distributions stress
// different parts of the search (heavy tails, exact ties, near ties, exact zeros, one loaded
// rank), for any shape. Integer arithmetic only, drawn with packswap::prng, so every compiler
// and standard library sees the same batches (the golden digests rely on it). Used by the stress
// benchmark (bench/refine/stress.cpp) and the solver's tests.

#include <packswap/batch.hpp>
#include <packswap/detail/prng.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace packswap::test::stress {

/// Cost (and byte) distributions of the stress set. Costs are in microseconds of a default-like
/// cost model (60 ms per image-bearing pack plus 0.28 ms per image token); bytes are a pack's
/// text plus 4,704 bytes per image token, unless the distribution says otherwise.
enum class dist {
  lognormal,  ///< image tokens log-normal (median 1,000, sigma 1): a heavy tail
  pareto,     ///< image tokens Pareto (alpha 1.2, from 200), plus 3 giant packs of 2M tokens
  bimodal,    ///< 60% thumbnails (64-256 tokens), 35% long video clips (8k-16k), 5% text-only
              ///< (cost and image bytes exactly 0)
  ties,       ///< three discrete costs (1, 2, 3 million): most packs tie
  multiples,  ///< 0-14 images of 576 tokens each (a fixed-resolution encoder): costs are
              ///< multiples of one value, 15 distinct in all
  near_equal, ///< every cost within +-1% of one value
  heavy_rank, ///< log-normal, but rank 0 holds every heavy pack (20x-40x the median)
  bytes_tied, ///< log-normal costs, every pack exactly 8 MiB
  bytes_near, ///< near-equal costs (+-1%), bytes within +-0.1% of 8 MiB
  uniform,    ///< costs uniform from 0.1 s to 1 s to the microsecond, as a measured or fitted
              ///< cost model gives: no common step between costs, and few exact ties
  // Probes, beyond the stress set (`probe_dists`): inputs that found worst cases outside it.
  text_heavy,    ///< 90% text-only packs (cost and image bytes exactly 0), the rest log-normal
  geometric,     ///< costs 2^u microseconds, u uniform in 0..24: 1 us to 17 s, a tail heavier
                 ///< than any other
  graded,        ///< rank r's packs cost 1 s x (1 + r / dp), +-0.1%: a load gradient across the
                 ///< ranks, as shards sorted by length give
  sparse_giants, ///< one pack in 1,000 costs 1,000 s, the others 1-2 ms
};

inline const char* name(dist d) {
  switch (d) {
  case dist::lognormal:
    return "lognormal";
  case dist::pareto:
    return "pareto";
  case dist::bimodal:
    return "bimodal";
  case dist::ties:
    return "ties";
  case dist::multiples:
    return "multiples";
  case dist::near_equal:
    return "near_equal";
  case dist::heavy_rank:
    return "heavy_rank";
  case dist::bytes_tied:
    return "bytes_tied";
  case dist::bytes_near:
    return "bytes_near";
  case dist::uniform:
    return "uniform";
  case dist::text_heavy:
    return "text_heavy";
  case dist::geometric:
    return "geometric";
  case dist::graded:
    return "graded";
  case dist::sparse_giants:
    return "sparse_giants";
  }
  return "?";
}

inline const dist all_dists[] = {
    dist::lognormal,  dist::pareto,     dist::bimodal,    dist::ties,       dist::multiples,
    dist::near_equal, dist::heavy_rank, dist::bytes_tied, dist::bytes_near, dist::uniform};

/// Probes beyond the stress set: named by the benchmark's `--dists`, not part of `all`.
inline const dist probe_dists[] = {dist::text_heavy, dist::geometric, dist::graded,
                                   dist::sparse_giants};

/// The distribution named `text` (of the stress set or a probe); false when there is none.
inline bool parse(const std::string& text, dist& out) {
  const auto find = [&](const auto& list) {
    for (const auto d : list) {
      if (text == name(d)) {
        out = d;
        return true;
      }
    }
    return false;
  };
  return find(all_dists) || find(probe_dists);
}

namespace fixed {

// 2^(2^-i) in Q30, i = 1..16.
constexpr std::uint64_t root2[16] = {
    1518500250, 1276901417, 1170923762, 1121280436, 1097253708, 1085434106, 1079572136, 1076653033,
    1075196443, 1074468888, 1074105294, 1073923544, 1073832680, 1073787251, 1073764537, 1073753181};

/// round(m * 2^(e / 2^16)) for m >= 0, saturated at 2^62: integers only.
inline std::int64_t scale_pow2(std::int64_t m, std::int64_t e) {
  std::int64_t whole = e >> 16; // floor
  const auto frac = static_cast<std::uint64_t>(e - whole * 65536);
  std::uint64_t f = std::uint64_t{1} << 30; // 2^frac in Q30
  for (int i = 0; i < 16; ++i) {
    if (((frac >> (15 - i)) & 1U) != 0) {
      f = (f * root2[i]) >> 30;
    }
  }
  // m * f in Q30, then the whole part: shifts of an unsigned 128-bit-free product.
  constexpr std::int64_t most = std::int64_t{1} << 62;
  if (whole > 30) {
    return most;
  }
  std::uint64_t v = static_cast<std::uint64_t>(m) * (f >> 8); // Q22; m < 2^33 keeps it in range
  if (whole >= 0) {
    for (; whole > 0; --whole) {
      if (v > (std::uint64_t{1} << 62)) {
        return most;
      }
      v <<= 1;
    }
  } else {
    v = whole < -63 ? 0 : v >> (-whole);
  }
  return static_cast<std::int64_t>((v + (std::uint64_t{1} << 21)) >> 22);
}

/// About a standard normal deviate, in Q16: the sum of 12 uniforms less 6 (Irwin–Hall).
inline std::int64_t normal_q16(prng& rng) {
  std::int64_t sum = 0;
  for (int i = 0; i < 12; ++i) {
    sum += static_cast<std::int64_t>(rng.below(65536));
  }
  return sum - 6 * 65536;
}

/// -log2(u / 2^32) in Q16 for u in [1, 2^32]: >= 0.
inline std::int64_t neg_log2_q16(std::uint64_t u) {
  int msb = 0;
  while ((u >> (msb + 1)) != 0) {
    ++msb;
  }
  // y = u / 2^msb in Q30, in [1, 2); each squaring yields one bit of the fraction.
  std::uint64_t y = msb >= 30 ? u >> (msb - 30) : u << (30 - msb);
  std::int64_t frac = 0;
  for (int i = 0; i < 16; ++i) {
    y = (y * y) >> 30;
    frac <<= 1;
    if (y >= (std::uint64_t{2} << 30)) {
      y >>= 1;
      frac |= 1;
    }
  }
  return (std::int64_t{32} << 16) - ((static_cast<std::int64_t>(msb) << 16) + frac);
}

} // namespace fixed

/// One global batch of shape `s` from distribution `d`: rank r's loader produced packs [r * K,
/// (r + 1) * K) (K = ga * mbs), as with contiguous shards.
inline std::vector<pack_meta> batch(const shape& s, dist d, std::uint64_t seed) {
  prng rng(seed ^ (0x5bd1e995ULL * (static_cast<std::uint64_t>(d) + 1)));
  const auto n = static_cast<std::size_t>(s.packs());
  const auto per_rank = static_cast<std::size_t>(s.packs_per_rank());
  std::vector<pack_meta> packs(n);
  constexpr std::int64_t text_bytes = 32'768;
  constexpr std::int64_t token_bytes = 4'704;
  constexpr std::int64_t mib8 = 8 << 20;
  const auto priced = [](std::int64_t tokens) {
    return tokens == 0 ? 0 : 60'000 + 280 * tokens; // microseconds
  };
  // log2(e) in Q16, to turn a natural exponent into a power of two.
  constexpr std::int64_t log2e_q16 = 94'548;
  const auto lognormal_tokens = [&] {
    const std::int64_t e = fixed::normal_q16(rng) * log2e_q16 / 65'536; // sigma = 1
    const std::int64_t t = fixed::scale_pow2(1'000, e);
    return t < 1 ? 1 : (t > 2'000'000 ? 2'000'000 : t);
  };
  for (std::size_t p = 0; p < n; ++p) {
    std::int64_t tokens = 0;
    std::int64_t cost = 0;
    std::int64_t bytes = -1; // from the tokens unless set
    switch (d) {
    case dist::lognormal:
      tokens = lognormal_tokens();
      break;
    case dist::pareto: {
      // 200 * U^(-1 / 1.2) = 200 * 2^(-log2(U) * 5 / 6)
      const std::uint64_t u = rng.below(std::uint64_t{1} << 32) + 1;
      tokens = fixed::scale_pow2(200, fixed::neg_log2_q16(u) * 5 / 6);
      tokens = tokens > 2'000'000 ? 2'000'000 : tokens;
      break;
    }
    case dist::bimodal: {
      const auto u = rng.below(100);
      tokens = u < 5 ? 0 : u < 65 ? rng.uniform(64, 256) : rng.uniform(8'000, 16'000);
      break;
    }
    case dist::ties:
      cost = 1'000'000 * rng.uniform(1, 3);
      tokens = cost / 280;
      break;
    case dist::multiples: {
      const std::int64_t images = rng.uniform(0, 14);
      tokens = 576 * images;
      cost = images * (60'000 + 280 * 576); // a multiple of one value
      break;
    }
    case dist::near_equal:
      cost = rng.uniform(990'000, 1'010'000);
      tokens = cost / 280;
      break;
    case dist::heavy_rank:
      tokens = p < per_rank ? rng.uniform(20'000, 40'000) : lognormal_tokens();
      break;
    case dist::bytes_tied:
      tokens = lognormal_tokens();
      bytes = mib8;
      break;
    case dist::bytes_near:
      cost = rng.uniform(990'000, 1'010'000);
      bytes = rng.uniform(mib8 - mib8 / 1000, mib8 + mib8 / 1000);
      break;
    case dist::uniform:
      cost = rng.uniform(100'000, 1'000'000);
      tokens = cost / 280;
      break;
    case dist::text_heavy:
      tokens = rng.below(10) == 0 ? lognormal_tokens() : 0;
      break;
    case dist::geometric:
      cost = std::int64_t{1} << rng.uniform(0, 24);
      tokens = cost / 280;
      break;
    case dist::graded: {
      const auto r = static_cast<std::int64_t>(p / per_rank);
      const std::int64_t mean = 1'000'000 + 1'000'000 * r / s.dp;
      cost = rng.uniform(mean - mean / 1000, mean + mean / 1000);
      tokens = cost / 280;
      break;
    }
    case dist::sparse_giants:
      cost = rng.below(1000) == 0 ? 1'000'000'000 : rng.uniform(1'000, 2'000);
      tokens = cost / 280;
      break;
    }
    const bool priced_by_tokens = d == dist::lognormal || d == dist::pareto || d == dist::bimodal ||
                                  d == dist::heavy_rank || d == dist::bytes_tied ||
                                  d == dist::text_heavy;
    packs[p].cost = priced_by_tokens ? priced(tokens) : cost;
    packs[p].bytes = bytes >= 0 ? bytes : text_bytes + token_bytes * tokens;
    packs[p].source_rank = static_cast<std::int32_t>(p / per_rank);
  }
  if (d == dist::pareto) {
    // A few giant packs, wherever the draw puts them.
    for (int g = 0; g < 3 && n > 0; ++g) {
      auto& pk = packs[static_cast<std::size_t>(rng.below(n))];
      pk.cost = priced(2'000'000);
      pk.bytes = text_bytes + token_bytes * 2'000'000;
    }
  }
  return packs;
}

} // namespace packswap::test::stress
