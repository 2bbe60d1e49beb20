#include <packswap/batch.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

using namespace packswap;

namespace {

// The message of the packswap::error `f` throws, and that it has code `code`.
template <class F>
std::string error_of(F&& f, errc code) {
  try {
    f();
  } catch (const error& e) {
    CHECK(e.code() == code);
    return e.what();
  } catch (...) {
    FAIL("threw something other than packswap::error");
  }
  FAIL("did not throw");
  return {};
}

std::vector<pack_meta> contiguous(const shape& s) {
  std::vector<pack_meta> packs(static_cast<std::size_t>(s.packs()));
  for (std::size_t p = 0; p < packs.size(); ++p) {
    packs[p] = {100, 1000,
                static_cast<std::int32_t>(p / static_cast<std::size_t>(s.packs_per_rank()))};
  }
  return packs;
}

} // namespace

TEST_CASE("a shape with a zero dimension is refused, naming it") {
  CHECK(error_of(
            [] {
              validate(shape{0, 4, 1});
            },
            errc::invalid_argument)
            .find("dp is 0") != std::string::npos);
  CHECK(error_of(
            [] {
              validate(shape{4, 0, 1});
            },
            errc::invalid_argument)
            .find("ga is 0") != std::string::npos);
  CHECK(error_of(
            [] {
              validate(shape{4, 4, -2});
            },
            errc::invalid_argument)
            .find("mbs is -2") != std::string::npos);
  CHECK(error_of(
            [] {
              validate(shape{1 << 16, 1 << 16, 1});
            },
            errc::invalid_argument)
            .find("exceeds") != std::string::npos);
}

TEST_CASE("a batch whose pack count does not fit the shape is refused with both numbers") {
  auto packs = contiguous({4, 2, 1});
  packs.pop_back();
  const auto msg = error_of([&] { validate_batch(packs, {4, 2, 1}); }, errc::invalid_argument);
  CHECK(msg.find("got 7 packs") != std::string::npos);
  CHECK(msg.find("needs 8") != std::string::npos);
}

TEST_CASE("a negative cost or byte count names the pack and the value") {
  auto packs = contiguous({2, 2, 1});
  packs[3].cost = -5;
  CHECK(error_of(
            [&] {
              validate_batch(packs, {2, 2, 1});
            },
            errc::invalid_argument)
            .find("pack 3 has cost -5") != std::string::npos);
  packs[3].cost = 1;
  packs[1].bytes = -1;
  CHECK(error_of(
            [&] {
              validate_batch(packs, {2, 2, 1});
            },
            errc::invalid_argument)
            .find("pack 1 has -1 bytes") != std::string::npos);
}

TEST_CASE("a cost sum beyond int64 is an overflow error, not undefined behaviour") {
  auto packs = contiguous({2, 1, 1});
  packs[0].cost = std::numeric_limits<std::int64_t>::max();
  packs[1].cost = 2;
  CHECK(error_of(
            [&] {
              validate_batch(packs, {2, 1, 1});
            },
            errc::overflow)
            .find("pack 1") != std::string::npos);
  std::vector<std::int64_t> costs{std::numeric_limits<std::int64_t>::max(), 1};
  CHECK(error_of(
            [&] {
              validate_costs(costs, {2, 1, 1});
            },
            errc::overflow)
            .find("pack 1") != std::string::npos);
}

TEST_CASE("source ranks must exist and each must own exactly ga * mbs packs") {
  auto packs = contiguous({3, 2, 1});
  packs[0].source_rank = 3;
  CHECK(error_of(
            [&] {
              validate_batch(packs, {3, 2, 1});
            },
            errc::invalid_argument)
            .find("pack 0 has source rank 3, dp is 3") != std::string::npos);
  packs[0].source_rank = 1; // rank 0 now owns 1 pack, rank 1 owns 3
  CHECK(error_of(
            [&] {
              validate_batch(packs, {3, 2, 1});
            },
            errc::invalid_argument)
            .find("source rank 0 owns 1 packs") != std::string::npos);
}

TEST_CASE("an assignment must fill every cell with exactly mbs packs") {
  const shape s{2, 2, 1};
  assignment a{{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  CHECK_NOTHROW(validate_assignment(a, s));
  a[3] = {1, 0};
  CHECK(error_of([&] { validate_assignment(a, s); }, errc::invalid_argument)
            .find("cell (rank 1, micro-step 0)") != std::string::npos);
  a[3] = {2, 0};
  CHECK(error_of([&] { validate_assignment(a, s); }, errc::invalid_argument)
            .find("pack 3 is assigned to (rank 2") != std::string::npos);
}
