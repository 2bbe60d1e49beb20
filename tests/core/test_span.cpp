#include <packswap/span.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

using packswap::span;

namespace {

std::int64_t sum(span<const std::int64_t> v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

constexpr int second_of(span<const int> v) {
  return v[1];
}
constexpr int digits[] = {7, 8, 9};

} // namespace

// Read-only views convert from anything; writable views only from writable storage.
static_assert(std::is_convertible_v<std::vector<int>&, span<int>>);
static_assert(std::is_convertible_v<std::vector<int>&, span<const int>>);
static_assert(std::is_convertible_v<const std::vector<int>&, span<const int>>);
static_assert(!std::is_convertible_v<const std::vector<int>&, span<int>>);
static_assert(std::is_convertible_v<span<int>, span<const int>>);
static_assert(!std::is_convertible_v<span<const int>, span<int>>);
static_assert(!std::is_convertible_v<std::vector<long>&, span<const int>>);
static_assert(std::is_same_v<span<const int>::value_type, int>);
static_assert(std::is_same_v<span<const int>::element_type, const int>);
static_assert(std::is_trivially_copyable_v<span<const int>>);
static_assert(second_of(span<const int>(digits, 3)) == 8, "usable in constant expressions");

TEST_CASE("a span from a vector views its elements without copying them") {
  std::vector<std::int64_t> v = {900, 200, 450, 300};
  const span<std::int64_t> s = v;
  CHECK(s.data() == v.data());
  CHECK(s.size() == 4);
  CHECK_FALSE(s.empty());
  CHECK(s.front() == 900);
  CHECK(s.back() == 300);
  s[1] = 250; // writes through to the vector
  CHECK(v[1] == 250);
  CHECK(sum(v) == 1900);
  CHECK(sum(s) == 1900); // span<T> -> span<const T>
}

TEST_CASE("a default span is empty and iterates over nothing") {
  const span<const int> s;
  CHECK(s.empty());
  CHECK(s.size() == 0);
  CHECK(s.data() == nullptr);
  CHECK(s.begin() == s.end());
}

TEST_CASE("subspan views the given window of the same storage") {
  std::vector<int> v(10);
  std::iota(v.begin(), v.end(), 0);
  const span<const int> all = v;
  for (std::size_t offset = 0; offset <= v.size(); ++offset) {
    for (std::size_t count = 0; offset + count <= v.size(); ++count) {
      const auto w = all.subspan(offset, count);
      REQUIRE(w.size() == count);
      CHECK(w.data() == v.data() + offset);
      CHECK(w.empty() == (count == 0));
      int expect = static_cast<int>(offset);
      for (const int x : w) {
        CHECK(x == expect++);
      }
    }
  }
}
