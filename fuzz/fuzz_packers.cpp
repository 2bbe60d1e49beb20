// Bytes -> packer parameters and a stream of samples. Both packers must place every sample in
// exactly one pack (or list it as skipped, under the skip policy), never exceed the capacity or
// the image budget, never split a sample, and give the same packs twice.
#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>

#include "fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos = 0;
  std::uint32_t next(std::uint32_t bound) { // in [0, bound)
    std::uint32_t v = 0;
    for (int i = 0; i < 3 && pos < size; ++i) {
      v = (v << 8) | data[pos++];
    }
    return bound == 0 ? 0 : v % bound;
  }
  bool done() const { return pos >= size; }
};

template <class Packer>
void check(const packswap::sample_set& set, const Packer& packer, std::int64_t budget) {
  packswap::pack_list packs;
  try {
    packs = packer(set);
  } catch (const packswap::error& e) {
    // Only the reject policy may refuse, and only for an oversized sample.
    PACKSWAP_FUZZ_CHECK(packer.on_oversize == packswap::oversize_policy::reject);
    PACKSWAP_FUZZ_CHECK(e.code() == packswap::errc::invalid_argument);
    return;
  }
  std::vector<int> seen(set.size(), 0);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    std::int64_t tokens = 0;
    std::int64_t image = 0;
    for (const auto id : packs.samples(p)) {
      PACKSWAP_FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < set.size());
      ++seen[static_cast<std::size_t>(id)];
      tokens += set.tokens(static_cast<std::size_t>(id));
      image += set.image_tokens(static_cast<std::size_t>(id));
    }
    PACKSWAP_FUZZ_CHECK(tokens == packs.tokens(p) && image == packs.image_tokens(p));
    PACKSWAP_FUZZ_CHECK(tokens <= packer.capacity && image <= budget);
    PACKSWAP_FUZZ_CHECK(!packs.samples(p).empty());
  }
  for (const auto id : packs.skipped()) {
    ++seen[static_cast<std::size_t>(id)];
  }
  for (const auto n : seen) {
    PACKSWAP_FUZZ_CHECK(n == 1);
  }
  const auto again = packer(set);
  PACKSWAP_FUZZ_CHECK(again.size() == packs.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader r{data, size};
  const std::int64_t capacity = 1 + r.next(4096);
  const std::int64_t buffer = 1 + r.next(64);
  const std::int64_t budget = r.next(4096);
  const bool skip = r.next(2) == 1;
  packswap::sample_set set;
  std::vector<std::int64_t> images;
  while (!r.done() && set.size() < 2000) {
    images.clear();
    const auto n_images = r.next(4);
    std::int64_t image_sum = 0;
    for (std::uint32_t i = 0; i < n_images; ++i) {
      images.push_back(1 + r.next(1500));
      image_sum += images.back();
    }
    const std::int64_t tokens = image_sum + 1 + r.next(5000);
    set.push_back(tokens, images);
  }
  const auto policy = skip ? packswap::oversize_policy::skip : packswap::oversize_policy::reject;
  packswap::greedy_packer g;
  g.capacity = capacity;
  g.buffer = buffer;
  g.on_oversize = policy;
  check(set, g, packswap::pack_list::no_budget);
  packswap::budgeted_packer b;
  b.capacity = capacity;
  b.buffer = buffer;
  b.image_budget = budget;
  b.on_oversize = policy;
  check(set, b, budget);
  return 0;
}
