#include <packswap/detail/digest.hpp>
#include <packswap/detail/prng.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using packswap::greedy_packer;
using packswap::oversize_policy;
using packswap::pack_list;
using packswap::sample_set;

namespace {

sample_set text_samples(const std::vector<std::int64_t>& tokens) {
  sample_set set;
  for (const auto t : tokens) {
    set.push_back(t);
  }
  return set;
}

std::vector<std::vector<std::int32_t>> ids(const pack_list& packs) {
  std::vector<std::vector<std::int32_t>> out;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    out.emplace_back(packs.samples(p).begin(), packs.samples(p).end());
  }
  return out;
}

using ids_t = std::vector<std::vector<std::int32_t>>;

} // namespace

TEST_CASE("the greedy packer opens each pack with the oldest sample, then takes the largest that "
          "fits") {
  const auto set = text_samples({3, 9, 1, 7, 6});
  const greedy_packer packer{10, 10, oversize_policy::reject, 0};
  CHECK(ids(packer(set)) == ids_t{{0, 3}, {1, 2}, {4}});
}

TEST_CASE("with lookahead the greedy packer prefers a pair that fills the pack over the largest "
          "fit") {
  const auto set = text_samples({2, 5, 4, 4});
  CHECK(ids(greedy_packer{10, 4, oversize_policy::reject, 0}(set)) == ids_t{{0, 1}, {2, 3}});
  CHECK(ids(greedy_packer{10, 4, oversize_policy::reject, 1}(set)) == ids_t{{0, 2, 3}, {1}});
}

TEST_CASE("among samples of equal size the greedy packer takes the oldest") {
  const auto set = text_samples({6, 4, 4, 4, 6});
  // Pack 0: the 6, then the oldest of the three 4s; pack 1 opens with the next 4 and takes the 6.
  CHECK(ids(greedy_packer{10, 5, oversize_policy::reject, 0}(set)) == ids_t{{0, 1}, {2, 4}, {3}});
}

TEST_CASE("the greedy packer ignores image tokens") {
  packswap::prng rng(11);
  sample_set with_images;
  sample_set without;
  for (int i = 0; i < 2000; ++i) {
    const auto t = rng.uniform(1, 8192);
    with_images.push_back(t, std::vector<std::int64_t>{rng.uniform(1, t)});
    without.push_back(t);
  }
  CHECK(ids(greedy_packer{}(with_images)) == ids(greedy_packer{}(without)));
}

TEST_CASE("a buffered sample waits at most `buffer` packs") {
  packswap::prng rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const auto capacity = rng.uniform(8, 300);
    const auto buffer = rng.uniform(1, 50);
    sample_set set;
    for (int i = 0; i < 400; ++i) {
      set.push_back(rng.chance(1, 3) ? rng.uniform(1, capacity) : rng.uniform(1, capacity / 4 + 1));
    }
    const auto packs = greedy_packer{capacity, buffer}(set);
    // placed[k]: the pack of the k-th placement; pack_of[s]: the pack of sample s.
    std::vector<std::size_t> placed;
    std::vector<std::size_t> pack_of(set.size());
    for (std::size_t p = 0; p < packs.size(); ++p) {
      for (const auto id : packs.samples(p)) {
        placed.push_back(p);
        pack_of[static_cast<std::size_t>(id)] = p;
      }
    }
    // Sample s >= buffer enters the buffer right after placement number s + 1 - buffer.
    for (std::size_t s = static_cast<std::size_t>(buffer); s < set.size(); ++s) {
      const std::size_t entered = placed[s - static_cast<std::size_t>(buffer)];
      CHECK(pack_of[s] <= entered + static_cast<std::size_t>(buffer));
    }
  }
}

TEST_CASE("the default preset packs at least 99% full at capacity 8192 with a buffer of 1000") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 50'000, 1);
  const auto m = packswap::measure_packing(greedy_packer{8192, 1000}(set));
  CHECK(m.samples == 50'000);
  CHECK(m.efficiency() >= 0.99);
  // A buffer of one is next fit in stream order: far from full.
  CHECK(packswap::measure_packing(greedy_packer{8192, 1}(set)).efficiency() < 0.9);
}

TEST_CASE("the greedy packer's packs of a fixed stream are the same on every compiler") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 20'000, 42);
  const auto packs = greedy_packer{}(set);
  packswap::detail::digest d;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    d.u64(packs.samples(p).size());
    for (const auto id : packs.samples(p)) {
      d.i64(id);
    }
  }
  MESSAGE("packs " << packs.size() << " digest " << d.value());
  CHECK(packs.size() == 5489);
  CHECK(d.value() == 6628439273649418117ULL);
}
