#include <packswap/detail/prng.hpp>
#include <packswap/detail/sort.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

using namespace packswap;

namespace {

using item = std::pair<std::int64_t, std::int32_t>; // (key, position in the input)

// Keys of one shape: wide (the whole int64 range), loads (a narrow band above a large base),
// clustered (almost all in one tiny band, so one bucket holds most), few distinct values.
std::vector<item> make_items(prng& rng, std::size_t n, int shape) {
  std::vector<item> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t k = 0;
    switch (shape) {
    case 0:
      k = static_cast<std::int64_t>(rng());
      break;
    case 1:
      k = 1'000'000'000 + rng.uniform(0, (1 << 28) - 1);
      break;
    case 2:
      k = rng.chance(1, 50) ? rng.uniform(-(std::int64_t{1} << 40), std::int64_t{1} << 40)
                            : rng.uniform(0, 999);
      break;
    default:
      k = rng.uniform(-3, 3);
      break;
    }
    v[i] = {k, static_cast<std::int32_t>(i)};
  }
  return v;
}

std::vector<item> reference(std::vector<item> v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const item& a, const item& b) { return a.first > b.first; });
  return v;
}

} // namespace

TEST_CASE("stable_sort_desc equals std::stable_sort on every key shape and size") {
  prng rng(7);
  std::vector<item> scratch;
  for (const std::size_t n : {0, 1, 2, 47, 48, 49, 100, 370, 1000, 2047, 2048, 2049, 6000, 20000}) {
    for (int shape = 0; shape < 4; ++shape) {
      CAPTURE(n);
      CAPTURE(shape);
      auto v = make_items(rng, n, shape);
      const auto want = reference(v);
      detail::stable_sort_desc(v.data(), v.size(), scratch, [](const item& e) { return e.first; });
      CHECK(v == want);
    }
  }
}

TEST_CASE("stable_sort_desc handles the extreme keys and keys already in order") {
  std::vector<item> scratch;
  std::vector<item> v;
  for (std::int32_t i = 0; i < 300; ++i) {
    const std::int64_t k = i % 3 == 0   ? std::numeric_limits<std::int64_t>::max()
                           : i % 3 == 1 ? std::numeric_limits<std::int64_t>::min()
                                        : i;
    v.emplace_back(k, i);
  }
  for (int round = 0; round < 2; ++round) { // the second round sorts sorted input
    const auto want = reference(v);
    detail::stable_sort_desc(v.data(), v.size(), scratch, [](const item& e) { return e.first; });
    CHECK(v == want);
  }
}

TEST_CASE("insertion_sort_desc stops at its budget with a sorted prefix and an untouched rest") {
  prng rng(11);
  for (const std::size_t budget : {0, 1, 10, 100, 100000}) {
    CAPTURE(budget);
    const auto input = make_items(rng, 200, 1);
    auto v = input;
    const std::size_t done = detail::insertion_sort_desc(v.data(), v.size(), budget,
                                                         [](const item& e) { return e.first; });
    REQUIRE(done <= v.size());
    CHECK(std::equal(v.begin() + static_cast<std::ptrdiff_t>(done), v.end(),
                     input.begin() + static_cast<std::ptrdiff_t>(done)));
    const std::vector<item> head(input.begin(), input.begin() + static_cast<std::ptrdiff_t>(done));
    CHECK(std::equal(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(done),
                     reference(head).begin()));
    if (budget >= 100000) {
      CHECK(done == v.size());
    }
  }
}

TEST_CASE("order_desc lists ids by key descending, ties by id") {
  prng rng(3);
  // Key shapes: narrow (many ties), wide, far from zero (only the range matters), wide enough
  // that key and id share a word to the last bit, and too wide for one word (the fallback).
  enum shape { narrow, wide, offset, full_word, too_wide, equal };
  detail::order_scratch ws; // reused across calls, as the solver does
  std::vector<std::int32_t> got;
  for (const std::size_t n : {0, 5, 255, 256, 4000, 70000}) {
    for (const shape sh : {narrow, wide, offset, full_word, too_wide, equal}) {
      std::vector<std::int64_t> key(n);
      for (auto& k : key) {
        switch (sh) {
        case narrow:
          k = rng.uniform(0, n < 1000 ? 20 : 1'000'000);
          break;
        case wide:
          k = rng.uniform(0, std::int64_t{1} << 40);
          break;
        case offset:
          k = (std::int64_t{1} << 50) + rng.uniform(0, 5000);
          break;
        case full_word:
          k = rng.uniform(0, (std::int64_t{1} << (64 - 17)) - 1);
          break;
        case too_wide:
          k = rng.uniform(0, std::numeric_limits<std::int64_t>::max() - 1);
          break;
        case equal:
          k = 7;
          break;
        }
      }
      std::vector<std::int32_t> want(n);
      for (std::size_t i = 0; i < n; ++i) {
        want[i] = static_cast<std::int32_t>(i);
      }
      std::stable_sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
        return key[static_cast<std::size_t>(a)] > key[static_cast<std::size_t>(b)];
      });
      CAPTURE(n);
      CAPTURE(static_cast<int>(sh));
      CHECK(detail::order_desc(key) == want);
      detail::order_desc(key, got, ws);
      CHECK(got == want);
    }
  }
}

TEST_CASE("order_asc lists ids by key ascending, ties by id") {
  prng rng(4);
  // Key shapes: narrow (many ties), loads (a band above a large base), a range that fills the
  // 63-bit word with the id to the last bit, one more (the fallback), the whole range, equal,
  // and nearly in order (each key within a few places of its own: below 1,024 keys, sorted
  // without the radix passes that take the others from 128 keys).
  enum shape { narrow, loads, word_edge, past_edge, too_wide, equal, near };
  detail::order_scratch ws; // reused across calls, as the re-deal does
  std::vector<std::int32_t> got;
  for (const std::size_t n : {0, 1, 2, 47, 48, 127, 128, 370, 1023, 2049, 6000, 20000}) {
    int id_bits = 1;
    while ((std::size_t{1} << id_bits) < n) {
      ++id_bits;
    }
    for (const shape sh : {narrow, loads, word_edge, past_edge, too_wide, equal, near}) {
      std::vector<std::int64_t> key(n);
      for (std::size_t i = 0; i < n; ++i) {
        auto& k = key[i];
        switch (sh) {
        case narrow:
          k = rng.uniform(0, 20);
          break;
        case loads:
          k = 1'000'000'000 + rng.uniform(0, (1 << 22) - 1);
          break;
        case word_edge:
          k = 5 + rng.uniform(0, (std::int64_t{1} << (63 - id_bits)) - 1);
          break;
        case past_edge:
          k = 5 + rng.uniform(0, std::int64_t{1} << (63 - id_bits));
          break;
        case too_wide:
          k = rng.uniform(0, std::numeric_limits<std::int64_t>::max());
          break;
        case equal:
          k = 7;
          break;
        case near:
          k = 1000 * static_cast<std::int64_t>(i) + rng.uniform(0, 3000);
          break;
        }
      }
      if ((sh == word_edge || sh == past_edge) && n >= 2) {
        key[0] = 5; // the range's ends, so the width is exact
        key[n - 1] = 5 + (std::int64_t{1} << (63 - id_bits)) - (sh == word_edge ? 1 : 0);
      }
      std::vector<std::int32_t> want(n);
      for (std::size_t i = 0; i < n; ++i) {
        want[i] = static_cast<std::int32_t>(i);
      }
      std::stable_sort(want.begin(), want.end(), [&](std::int32_t a, std::int32_t b) {
        return key[static_cast<std::size_t>(a)] < key[static_cast<std::size_t>(b)];
      });
      CAPTURE(n);
      CAPTURE(static_cast<int>(sh));
      detail::order_asc(key, got, ws);
      CHECK(got == want);
    }
  }
}
