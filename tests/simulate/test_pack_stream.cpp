#include <packswap/cost/features.hpp>
#include <packswap/cost/payload.hpp>
#include <packswap/error.hpp>
#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/workload.hpp>
#include <packswap/simulate/pack_stream.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <set>

using packswap::pack_stream;
using packswap::shape;

TEST_CASE("a pack stream prices every pack once, in loader order") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 2'000, 3);
  const auto packs = packswap::greedy_packer{}(set);
  const auto stream = packswap::make_pack_stream(set, packs);
  REQUIRE(stream.size() == packs.size());
  CHECK(stream.capacity == 8192);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto f = packswap::features_of(set, packs.samples(p));
    CHECK(stream.compute_us[p] == packswap::compute_model{}(f));
    CHECK(stream.bytes[p] == packswap::payload_model{}(f));
    CHECK(stream.tokens[p] == packs.tokens(p));
  }
}

TEST_CASE("global batches are consecutive runs of the stream when it holds them all") {
  CHECK(packswap::batch_start(100, 10, 10, 0, 1) == 0);
  CHECK(packswap::batch_start(100, 10, 10, 9, 1) == 90);
  CHECK(packswap::batch_start(105, 10, 10, 3, 7) == 30);
}

TEST_CASE("past the end of the stream, batches start at seeded positions") {
  std::set<std::size_t> starts;
  for (std::int64_t k = 0; k < 200; ++k) {
    const auto at = packswap::batch_start(1000, 64, 200, k, 5);
    CHECK(at < 1000);
    CHECK(at == packswap::batch_start(1000, 64, 200, k, 5)); // deterministic
    starts.insert(at);
  }
  CHECK(starts.size() > 150); // spread over the stream
  CHECK(packswap::batch_start(1000, 64, 200, 0, 5) != packswap::batch_start(1000, 64, 200, 0, 6));
}

TEST_CASE("a batch that does not fit the stream is an error naming both sizes") {
  CHECK_THROWS_WITH_AS(packswap::batch_start(100, 128, 1, 0, 1),
                       doctest::Contains("128 packs does not fit a stream of 100 packs"),
                       packswap::error);
  CHECK_THROWS_AS(packswap::batch_start(100, 10, 5, 5, 1), packswap::error);
}

TEST_CASE("batch metadata wraps around the stream and deals contiguous shards") {
  pack_stream stream;
  stream.capacity = 10;
  for (std::int64_t p = 0; p < 6; ++p) {
    stream.compute_us.push_back(100 + p);
    stream.bytes.push_back(1000 + p);
    stream.tokens.push_back(p);
  }
  const auto meta = packswap::batch_meta(stream, 4, shape{2, 2});
  REQUIRE(meta.size() == 4);
  CHECK(meta[0].cost == 104);
  CHECK(meta[1].cost == 105);
  CHECK(meta[2].cost == 100);
  CHECK(meta[3].bytes == 1001);
  CHECK(meta[1].source_rank == 0);
  CHECK(meta[2].source_rank == 1);
  CHECK(packswap::batch_tokens(stream, 4, 4) == 4 + 5 + 0 + 1);
}

TEST_CASE("drop_ends keeps the steady middle of a stream") {
  pack_stream stream;
  stream.capacity = 10;
  for (std::int64_t p = 0; p < 10; ++p) {
    stream.compute_us.push_back(p);
    stream.bytes.push_back(2 * p);
    stream.tokens.push_back(3 * p);
  }
  const auto middle = packswap::drop_ends(stream, 3);
  REQUIRE(middle.size() == 4);
  CHECK(middle.capacity == 10);
  CHECK(middle.compute_us.front() == 3);
  CHECK(middle.bytes.back() == 12);
  CHECK(middle.tokens.back() == 18);
  CHECK(packswap::drop_ends(stream, 5).size() == 0);
  CHECK(packswap::drop_ends(stream, 0).size() == 10);
}

TEST_CASE("the 2D packer's first packs fill better than its steady state") {
  // Why drop_ends exists: a full buffer of candidates packs better than the stream sustains.
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 60'000, 8);
  const auto one_d = packswap::greedy_packer{}(set);
  packswap::budgeted_packer packer{8192, packswap::mean_image_tokens_per_pack(one_d)};
  packer.on_oversize = packswap::oversize_policy::skip;
  const auto stream = packswap::make_pack_stream(set, packer(set));
  const auto fill = [&](std::size_t first, std::size_t count) {
    return static_cast<double>(
               packswap::batch_tokens(stream, first, static_cast<std::int64_t>(count))) /
           (8192.0 * static_cast<double>(count));
  };
  CHECK(fill(0, 256) > fill(4000, 8000) + 0.03);
}
