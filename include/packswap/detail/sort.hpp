#pragma once

#include "packswap/span.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace packswap::detail {

/// Working memory of `order_desc`, kept by callers that sort every step.
struct order_scratch {
  std::vector<std::uint64_t> word, tmp;
  std::vector<std::uint32_t> count;
};

/// Bits needed for `v` (0 for 0).
constexpr int bit_width_of(std::uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
  return v == 0 ? 0 : 64 - __builtin_clzll(v);
#else
  int bits = 0;
  while (bits < 64 && (v >> bits) != 0) {
    ++bits;
  }
  return bits;
#endif
}

/// Bits that ids `0..n-1` need (at least 1).
inline int id_bits_for(std::size_t n) {
  int bits = 1;
  while (bits < 63 && (std::uint64_t{1} << bits) < n) {
    ++bits;
  }
  return bits;
}

/// Ids `0..n-1` into `ids` ordered by `before(key[a], key[b])`, ties by id: the comparison-sort
/// fallback of `order_desc` and `order_asc`.
template <class Before>
void stable_order(span<const std::int64_t> key, std::vector<std::int32_t>& ids, Before before) {
  ids.resize(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    ids[i] = static_cast<std::int32_t>(i);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return before(key[static_cast<std::size_t>(a)], key[static_cast<std::size_t>(b)]);
  });
}

/// Ids `0..n-1` into `ids` by `rel(i)` ascending, ties by id, where every `rel(i)` (an unsigned
/// key, relative to the smallest) is below 2^key_bits and key_bits + id_bits_for(n) <= 64.
///
/// Each id and its key share one 64-bit word, radix-sorted (LSD) on the key bits alone: the
/// words start in id order and every pass is stable, so equal keys stay in id order without
/// passes over the id bits. Digits of 11 bits (8 below 1,024 words, where a pass over 2,048
/// counts costs more than the words; up to 16 for large inputs, fewer passes), skipping digits
/// all words share: keys rarely need more than two passes.
template <class Rel>
void radix_order(std::size_t n, int key_bits, Rel rel, std::vector<std::int32_t>& ids,
                 order_scratch& ws) {
  const int id_bits = id_bits_for(n);
  ids.resize(n);
  int bits = n < 1024 ? 8 : 11; // counts in L1; below 1,024 words fewer to clear and sum
  if (n >= 65536 && key_bits > 0) {
    const int wide = (key_bits + 15) / 16; // wider digits for large inputs save a pass
    bits = (key_bits + wide - 1) / wide;
  }
  const int passes = (key_bits + bits - 1) / bits;
  const std::size_t buckets = std::size_t{1} << bits;
  const std::uint64_t mask = buckets - 1;
  auto& word = ws.word;
  word.resize(n);
  std::uint64_t all_or = 0;
  std::uint64_t all_and = ~std::uint64_t{0};
  for (std::size_t i = 0; i < n; ++i) {
    word[i] = (rel(i) << id_bits) | static_cast<std::uint64_t>(i);
    all_or |= word[i];
    all_and &= word[i];
  }
  auto& tmp = ws.tmp;
  tmp.resize(n);
  auto& count = ws.count;
  count.resize(buckets);
  for (int d = 0; d < passes; ++d) {
    const int shift = id_bits + d * bits;
    if ((((all_or ^ all_and) >> shift) & mask) == 0) {
      continue; // every word has the same digit here
    }
    std::fill(count.begin(), count.end(), 0u);
    for (const auto w : word) {
      ++count[(w >> shift) & mask];
    }
    std::uint32_t run = 0;
    for (auto& c : count) {
      const std::uint32_t x = c;
      c = run;
      run += x;
    }
    for (const auto w : word) {
      tmp[count[(w >> shift) & mask]++] = w;
    }
    word.swap(tmp);
  }
  const std::uint64_t id_mask = (std::uint64_t{1} << id_bits) - 1;
  for (std::size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<std::int32_t>(word[i] & id_mask);
  }
}

/// Writes ids `0..n-1` into `ids`, ordered by `key` descending, ties by id ascending. Keys must
/// be >= 0. Reuses the memory of `ids` and `ws`.
///
/// `radix_order` on (largest key - key); a stable comparison sort below 256 keys or when key
/// and id do not fit one word together.
inline void order_desc(span<const std::int64_t> key, std::vector<std::int32_t>& ids,
                       order_scratch& ws) {
  const std::size_t n = key.size();
  std::int64_t kmax = 0;
  std::int64_t kmin = n == 0 ? 0 : key[0];
  for (const auto k : key) {
    kmax = std::max(kmax, k);
    kmin = std::min(kmin, k);
  }
  const int key_bits =
      bit_width_of(static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(kmin));
  if (n < 256 || key_bits + id_bits_for(n) > 64) {
    stable_order(key, ids, std::greater<>());
    return;
  }
  const auto top = static_cast<std::uint64_t>(kmax);
  radix_order(
      n, key_bits, [&](std::size_t i) { return top - static_cast<std::uint64_t>(key[i]); }, ids,
      ws);
}

/// Ids `0..n-1` ordered by `key` descending, ties by id ascending. Keys must be >= 0.
inline std::vector<std::int32_t> order_desc(span<const std::int64_t> key) {
  std::vector<std::int32_t> ids;
  order_scratch ws;
  order_desc(key, ids, ws);
  return ids;
}

} // namespace packswap::detail

namespace packswap::detail {

/// Stable insertion sort of `data[0..n)` by `key` descending that gives up after `budget` element
/// moves. Returns how far it got: `data[0..i)` is sorted and `data[i..n)` untouched, so any stable
/// sort can finish the job with the same result. Linear on input that is nearly sorted.
template <class T, class Key>
std::size_t insertion_sort_desc(T* data, std::size_t n, std::size_t budget, Key key) {
  for (std::size_t i = 1; i < n; ++i) {
    T v = data[i];
    const auto kv = key(v);
    std::size_t j = i;
    while (j > 0 && key(data[j - 1]) < kv) {
      if (budget == 0) {
        // Undo the partial shift: data[j..i) moved up by one, v still held here.
        std::copy(data + j + 1, data + i + 1, data + j);
        data[i] = v;
        return i;
      }
      --budget;
      data[j] = data[j - 1];
      --j;
    }
    data[j] = v;
  }
  return n;
}

// LSD radix passes of `stable_sort_desc` over the bits of (kmax - key) below `bits`, 8 at a
// time: sorts `data[0..n)` (all keys within 2^bits of kmax) stably, using `tmp`.
template <class T, class Key>
void radix_passes_desc(T* data, std::size_t n, T* tmp, Key& key, std::int64_t kmax, int bits) {
  T* from = data;
  T* to = tmp;
  std::uint32_t count[256];
  for (int shift = 0; shift < bits; shift += 8) {
    std::fill(count, count + 256, 0u);
    for (std::size_t i = 0; i < n; ++i) {
      ++count[((static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(key(from[i]))) >>
               shift) &
              0xff];
    }
    std::uint32_t run = 0;
    for (auto& c : count) {
      const std::uint32_t x = c;
      c = run;
      run += x;
    }
    for (std::size_t i = 0; i < n; ++i) {
      to[count[((static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(key(from[i]))) >>
                shift) &
               0xff]++] = from[i];
    }
    std::swap(from, to);
  }
  if (from != data) {
    std::copy(from, from + n, data);
  }
}

/// Sorts `data[0..n)` by `key(element)` descending, stably (equal keys keep their order), using
/// `scratch` (resized as needed). Keys may be any int64 values. One pass on the most significant
/// bits of (max key - key) spreads the elements over about 2n buckets (at most 2,048); one
/// insertion pass then finishes, or, when buckets hold many elements (clustered keys), each
/// bucket is finished on its own by insertion sort or LSD radix passes over the remaining bits.
/// Short ranges use insertion sort alone.
template <class T, class Key>
void stable_sort_desc(T* data, std::size_t n, std::vector<T>& scratch, Key key) {
  if (n < 48) {
    insertion_sort_desc(data, n, n * n, key);
    return;
  }
  std::int64_t kmax = key(data[0]);
  std::int64_t kmin = kmax;
  for (std::size_t i = 1; i < n; ++i) {
    const auto k = key(data[i]);
    kmax = std::max(kmax, k);
    kmin = std::min(kmin, k);
  }
  const auto range = static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(kmin);
  if (range == 0) {
    return;
  }
  int top = 0; // bits of the range
  while (top < 64 && (range >> top) != 0) {
    ++top;
  }
  int bits = 4; // bucket count 2^bits: about 2n (few shared buckets), at most 2^11
  while (bits < 11 && (std::size_t{1} << bits) < 2 * n) {
    ++bits;
  }
  bits = std::min(bits, top);
  const int shift = top - bits; // bits left below the bucket digit
  std::uint32_t start[(std::size_t{1} << 11) + 1];
  const std::size_t buckets = std::size_t{1} << bits;
  std::fill(start, start + buckets + 1, 0u);
  const auto digit = [&](const T& e) {
    return static_cast<std::size_t>(
        (static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(key(e))) >> shift);
  };
  for (std::size_t i = 0; i < n; ++i) {
    ++start[digit(data[i]) + 1];
  }
  for (std::size_t d = 0; d < buckets; ++d) {
    start[d + 1] += start[d];
  }
  scratch.resize(n);
  {
    std::uint32_t next[std::size_t{1} << 11];
    std::copy(start, start + buckets, next);
    for (std::size_t i = 0; i < n; ++i) {
      scratch[next[digit(data[i])]++] = data[i];
    }
  }
  // Out of order now only inside buckets: one insertion pass over everything finishes the job
  // while buckets are small; where it would be long (clustered keys), each bucket is sorted on
  // its own instead (the pass leaves a sorted prefix and an untouched rest, so that is exact).
  if (shift > 0 && insertion_sort_desc(scratch.data(), n, 2 * n, key) < n) {
    std::vector<T> tmp; // only for buckets of clustered keys
    for (std::size_t d = 0; d < buckets; ++d) {
      T* b = scratch.data() + start[d];
      const std::size_t size = start[d + 1] - start[d];
      if (size < 2) {
        continue;
      }
      if (size <= 32) {
        insertion_sort_desc(b, size, size * size, key);
      } else {
        tmp.resize(size);
        radix_passes_desc(b, size, tmp.data(), key, kmax, shift);
      }
    }
  }
  std::copy(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(n), data);
}

/// Writes ids `0..n-1` into `ids`, ordered by `key` ascending, ties by id ascending. Keys must
/// be >= 0. Reuses the memory of `ids` and `ws`.
///
/// Below 1,024 keys, each key (less the smallest) and its id share one word when they fit in 63
/// bits, so the words are distinct, need no tie-break and sort as plain integers
/// (`stable_sort_desc` on their negation: one bucket pass and an insertion pass, whose
/// mispredicted branches grow with the count, and with the distance of each word from its place);
/// from `scattered_from` keys, where more than one in `far_share` lies above the one `far_stride`
/// after it, `radix_order` instead (one pass to tell which: the re-deal's keys, a rank's load less
/// a pack's cost, lie near their place where the loads are close and far where they spread, as
/// with a few giant packs); more keys go through `radix_order` on (key - smallest key) too; keys
/// too wide for either, through a stable comparison sort.
inline constexpr std::size_t scattered_from = 128; // keys; see order_asc
inline constexpr std::size_t far_stride = 16;      // see order_asc
inline constexpr std::size_t far_share = 8;        // see order_asc
inline void order_asc(span<const std::int64_t> key, std::vector<std::int32_t>& ids,
                      order_scratch& ws) {
  const std::size_t n = key.size();
  ids.resize(n);
  if (n == 0) {
    return;
  }
  std::int64_t kmin = key[0];
  std::int64_t kmax = key[0];
  for (const auto k : key) {
    kmin = std::min(kmin, k);
    kmax = std::max(kmax, k);
  }
  const int id_bits = id_bits_for(n);
  const auto range = static_cast<std::uint64_t>(kmax) - static_cast<std::uint64_t>(kmin);
  const auto base = static_cast<std::uint64_t>(kmin);
  const auto rel = [&](std::size_t i) { return static_cast<std::uint64_t>(key[i]) - base; };
  if (n < 1024 && id_bits < 63 && (range >> (63 - id_bits)) == 0) {
    // Where many keys lie far from their place (above the one `far_stride` after it): radix.
    std::size_t far = 0;
    for (std::size_t i = 0; i + far_stride < n; ++i) {
      far += key[i] > key[i + far_stride] ? 1 : 0;
    }
    if (n >= scattered_from && far_share * far > n) {
      radix_order(n, bit_width_of(range), rel, ids, ws);
      return;
    }
    auto& word = ws.word;
    word.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      word[i] = (rel(i) << id_bits) | i;
    }
    // Ascending words: descending by their negation (words < 2^63).
    stable_sort_desc(word.data(), n, ws.tmp,
                     [](std::uint64_t w) { return -static_cast<std::int64_t>(w); });
    const std::uint64_t id_mask = (std::uint64_t{1} << id_bits) - 1;
    for (std::size_t i = 0; i < n; ++i) {
      ids[i] = static_cast<std::int32_t>(word[i] & id_mask);
    }
    return;
  }
  const int key_bits = bit_width_of(range);
  if (key_bits + id_bits > 64) {
    stable_order(key, ids, std::less<>());
    return;
  }
  radix_order(n, key_bits, rel, ids, ws);
}
} // namespace packswap::detail
