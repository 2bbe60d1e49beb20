#pragma once

#include "packswap/detail/span.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace packswap::detail {

/// Ids `0..n-1` ordered by `key` descending, ties by id ascending. Keys must be >= 0.
///
/// An LSD radix sort on 11-bit digits that skips digits all keys share: costs rarely need more
/// than three passes, which is what makes sorting 262,144 packs take about a millisecond.
inline std::vector<std::int32_t> order_desc(span<const std::int64_t> key) {
  const std::size_t n = key.size();
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<std::int32_t>(i);
  }
  if (n < 256) {
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
      return key[static_cast<std::size_t>(a)] > key[static_cast<std::size_t>(b)];
    });
    return ids;
  }
  // Descending by key == ascending by (max - key); LSD passes are stable, so equal keys keep
  // ascending ids.
  std::uint64_t kmax = 0;
  for (const auto k : key) {
    kmax = std::max(kmax, static_cast<std::uint64_t>(k));
  }
  std::vector<std::uint64_t> inv(n);
  std::uint64_t all_or = 0;
  std::uint64_t all_and = ~std::uint64_t{0};
  for (std::size_t i = 0; i < n; ++i) {
    inv[i] = kmax - static_cast<std::uint64_t>(key[i]);
    all_or |= inv[i];
    all_and &= inv[i];
  }
  std::vector<std::int32_t> tmp(n);
  constexpr int bits = 11;
  constexpr std::uint64_t mask = (1u << bits) - 1;
  std::vector<std::uint32_t> count(std::size_t{1} << bits);
  for (int shift = 0; shift < 64; shift += bits) {
    if ((((all_or ^ all_and) >> shift) & mask) == 0) {
      continue; // every key has the same digit here
    }
    std::fill(count.begin(), count.end(), 0u);
    for (std::size_t i = 0; i < n; ++i) {
      ++count[(inv[static_cast<std::size_t>(ids[i])] >> shift) & mask];
    }
    std::uint32_t run = 0;
    for (auto& c : count) {
      const std::uint32_t x = c;
      c = run;
      run += x;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const auto id = ids[i];
      tmp[count[(inv[static_cast<std::size_t>(id)] >> shift) & mask]++] = id;
    }
    ids.swap(tmp);
  }
  return ids;
}

} // namespace packswap::detail
