// The contract every packer policy keeps, written once and run over both packers.
#include <packswap/detail/prng.hpp>
#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/packer.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

using packswap::budgeted_packer;
using packswap::greedy_packer;
using packswap::oversize_policy;
using packswap::pack_list;
using packswap::prng;
using packswap::sample_set;

static_assert(packswap::is_packer_v<greedy_packer>);
static_assert(packswap::is_packer_v<budgeted_packer>);
static_assert(!packswap::is_packer_v<int>);
static_assert(!packswap::is_packer_v<sample_set>);
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
static_assert(packswap::packer_like<greedy_packer>);
static_assert(!packswap::packer_like<double>);
#endif

namespace {

struct params {
  std::int64_t capacity = 8192;
  std::int64_t budget = pack_list::no_budget;
  std::int64_t buffer = 1000;
  std::int64_t lookahead = 16;
  oversize_policy policy = oversize_policy::reject;
};

template <class P>
P make(const params& p);
template <>
greedy_packer make<greedy_packer>(const params& p) {
  return {p.capacity, p.buffer, p.policy, p.lookahead};
}
template <>
budgeted_packer make<budgeted_packer>(const params& p) {
  return {p.capacity, p.budget, p.buffer, p.policy, p.lookahead};
}

// The budget packer P enforces under `p`.
template <class P>
std::int64_t budget_of(const params& p) {
  return std::is_same_v<P, greedy_packer> ? pack_list::no_budget : p.budget;
}

// A random stream of one of three shapes: sizes spread over [1, max_tokens], a few repeated sizes,
// or many small samples among some large ones. Half the samples carry one or two images.
sample_set random_stream(prng& rng, std::int64_t n, std::int64_t max_tokens) {
  sample_set set;
  const auto shape = rng.below(3);
  std::vector<std::int64_t> sizes;
  for (int i = 0; i < 4; ++i) {
    sizes.push_back(rng.uniform(1, max_tokens));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t t = 0;
    if (shape == 0) {
      t = rng.uniform(1, max_tokens);
    } else if (shape == 1) {
      t = sizes[rng.below(sizes.size())];
    } else {
      t = rng.chance(1, 5) ? rng.uniform(1, max_tokens) : rng.uniform(1, 1 + max_tokens / 8);
    }
    std::vector<std::int64_t> images;
    if (rng.chance(1, 2)) {
      const std::int64_t first = rng.uniform(1, t);
      images.push_back(first);
      if (first < t && rng.chance(1, 2)) {
        images.push_back(rng.uniform(1, t - first));
      }
    }
    set.push_back(t, images);
  }
  return set;
}

bool same(const pack_list& a, const pack_list& b) {
  if (a.size() != b.size() || a.skipped().size() != b.skipped().size()) {
    return false;
  }
  for (std::size_t p = 0; p < a.size(); ++p) {
    const auto x = a.samples(p);
    const auto y = b.samples(p);
    if (x.size() != y.size()) {
      return false;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) {
        return false;
      }
    }
  }
  for (std::size_t i = 0; i < a.skipped().size(); ++i) {
    if (a.skipped()[i] != b.skipped()[i]) {
      return false;
    }
  }
  return true;
}

// Every invariant of a packing, with a message naming the first that fails ("" when all hold).
std::string violation(const sample_set& set, const pack_list& packs, std::int64_t capacity,
                      std::int64_t budget, oversize_policy policy) {
  std::vector<int> seen(set.size(), 0);
  for (const auto id : packs.skipped()) {
    const auto s = static_cast<std::size_t>(id);
    if (policy != oversize_policy::skip ||
        (set.tokens(s) <= capacity && set.image_tokens(s) <= budget)) {
      return "sample " + std::to_string(id) + " was skipped but fits";
    }
    ++seen[s];
  }
  std::size_t oldest = 0;
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const auto ids = packs.samples(p);
    if (ids.empty()) {
      return "pack " + std::to_string(p) + " is empty";
    }
    // Each pack opens with the oldest sample not yet placed.
    while (oldest < seen.size() && seen[oldest] != 0) {
      ++oldest;
    }
    if (static_cast<std::size_t>(ids[0]) != oldest) {
      return "pack " + std::to_string(p) + " opens with sample " + std::to_string(ids[0]) +
             ", the oldest unplaced is " + std::to_string(oldest);
    }
    std::int64_t tokens = 0;
    std::int64_t images = 0;
    for (const auto id : ids) {
      const auto s = static_cast<std::size_t>(id);
      ++seen[s];
      tokens += set.tokens(s);
      images += set.image_tokens(s);
    }
    if (tokens != packs.tokens(p) || images != packs.image_tokens(p)) {
      return "pack " + std::to_string(p) + " has wrong totals";
    }
    if (tokens > capacity || images > budget) {
      return "pack " + std::to_string(p) + " holds " + std::to_string(tokens) + " tokens and " +
             std::to_string(images) + " image tokens";
    }
  }
  for (std::size_t s = 0; s < seen.size(); ++s) {
    if (seen[s] != 1) {
      return "sample " + std::to_string(s) + " appears " + std::to_string(seen[s]) + " times";
    }
  }
  return "";
}

template <class P>
std::string error_of(const params& p, const sample_set& set) {
  try {
    (void)packswap::pack_samples(set, make<P>(p));
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::invalid_argument);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE_TEMPLATE("packers place every sample in exactly one pack, within capacity and budget, "
                   "over thousands of random streams",
                   P, greedy_packer, budgeted_packer) {
  prng rng(20240611);
  for (int trial = 0; trial < 3000; ++trial) {
    params p;
    p.capacity = rng.chance(1, 4) ? rng.uniform(1, 8) : rng.uniform(9, 600);
    p.budget = rng.uniform(0, p.capacity + 5);
    p.buffer = rng.uniform(1, 40);
    p.lookahead = rng.uniform(0, 20);
    p.policy = oversize_policy::skip;
    const auto set = random_stream(rng, rng.uniform(0, 150), p.capacity + p.capacity / 8 + 1);
    const pack_list packs = packswap::pack_samples(set, make<P>(p));
    const std::string v = violation(set, packs, p.capacity, budget_of<P>(p), p.policy);
    if (!v.empty()) {
      FAIL_CHECK("trial " << trial << ": " << v);
      break;
    }
  }
}

TEST_CASE_TEMPLATE("packers give the same packs for the same input and parameters, whatever ran "
                   "before",
                   P, greedy_packer, budgeted_packer) {
  prng rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    params p;
    p.capacity = rng.uniform(50, 500);
    p.budget = rng.uniform(p.capacity / 4, p.capacity);
    p.buffer = rng.uniform(1, 64);
    p.policy = oversize_policy::skip;
    const auto set = random_stream(rng, 200, p.capacity + 10);
    const P packer = make<P>(p);
    const pack_list first = packer(set);
    const sample_set copy = set;
    (void)packer(random_stream(rng, 100, p.capacity)); // no state survives a call
    CHECK(same(first, packer(copy)));
    CHECK(same(first, make<P>(p)(set)));
  }
}

TEST_CASE_TEMPLATE("a packer's first pack depends only on the samples it could have buffered", P,
                   greedy_packer, budgeted_packer) {
  prng rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    params p;
    p.capacity = rng.uniform(20, 200);
    p.budget = p.capacity / 2;
    p.buffer = rng.uniform(1, 30);
    p.policy = oversize_policy::skip;
    const auto set = random_stream(rng, 600, p.capacity);
    // While the first pack fills, at most `buffer + capacity` samples can have entered the buffer.
    const auto horizon = static_cast<std::size_t>(p.buffer + p.capacity);
    sample_set changed;
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (i < horizon) {
        const auto images = set.images(i);
        changed.push_back(set.tokens(i), std::vector<std::int64_t>(images.begin(), images.end()));
      } else {
        changed.push_back(rng.uniform(1, p.capacity));
      }
    }
    const auto a = make<P>(p)(set);
    const auto b = make<P>(p)(changed);
    REQUIRE(!a.empty());
    REQUIRE(a.samples(0).size() == b.samples(0).size());
    for (std::size_t i = 0; i < a.samples(0).size(); ++i) {
      CHECK(a.samples(0)[i] == b.samples(0)[i]);
    }
  }
}

TEST_CASE_TEMPLATE("an empty stream gives no pack", P, greedy_packer, budgeted_packer) {
  const auto packs = packswap::pack_samples(sample_set(), make<P>({}));
  CHECK(packs.empty());
  CHECK(packs.total_samples() == 0);
  CHECK(packs.skipped().empty());
}

TEST_CASE_TEMPLATE("one sample gives one pack", P, greedy_packer, budgeted_packer) {
  sample_set set;
  set.push_back(5000, std::vector<std::int64_t>{1000});
  const auto packs = packswap::pack_samples(set, make<P>({}));
  REQUIRE(packs.size() == 1);
  CHECK(packs.samples(0).size() == 1);
  CHECK(packs.tokens(0) == 5000);
  CHECK(packs.image_tokens(0) == 1000);
}

TEST_CASE_TEMPLATE("samples exactly the capacity fill one pack each, in stream order", P,
                   greedy_packer, budgeted_packer) {
  sample_set set;
  for (int i = 0; i < 50; ++i) {
    set.push_back(8192);
  }
  const auto packs = packswap::pack_samples(set, make<P>({}));
  REQUIRE(packs.size() == 50);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    REQUIRE(packs.samples(p).size() == 1);
    CHECK(packs.samples(p)[0] == static_cast<std::int32_t>(p));
    CHECK(packs.tokens(p) == 8192);
  }
}

TEST_CASE_TEMPLATE("a buffer of one sample packs in stream order", P, greedy_packer,
                   budgeted_packer) {
  prng rng(3);
  const auto set = random_stream(rng, 500, 8192);
  params p;
  p.buffer = 1;
  const auto packs = packswap::pack_samples(set, make<P>(p));
  std::int32_t expect = 0;
  for (std::size_t k = 0; k < packs.size(); ++k) {
    for (const auto id : packs.samples(k)) {
      CHECK(id == expect++);
    }
  }
  CHECK(expect == 500);
}

TEST_CASE_TEMPLATE("a sample longer than the capacity is an error naming it, or skipped and "
                   "counted",
                   P, greedy_packer, budgeted_packer) {
  sample_set set;
  set.push_back(100);
  set.push_back(8192);
  set.push_back(9001);
  set.push_back(200);
  CHECK(error_of<P>({}, set) ==
        "packswap [invalid_argument]: sample 2 has 9001 tokens, capacity is 8192");
  params p;
  p.policy = oversize_policy::skip;
  const auto packs = packswap::pack_samples(set, make<P>(p));
  REQUIRE(packs.skipped().size() == 1);
  CHECK(packs.skipped()[0] == 2);
  CHECK(packs.total_samples() == 3);
  CHECK(packs.total_tokens() == 8492);
}

TEST_CASE_TEMPLATE("packers refuse bad parameters with the offending value", P, greedy_packer,
                   budgeted_packer) {
  sample_set set;
  set.push_back(10);
  params p;
  p.capacity = 0;
  CHECK(error_of<P>(p, set) ==
        "packswap [invalid_argument]: capacity is 0 tokens, must be in [1, 4194304]");
  p.capacity = -8;
  CHECK(error_of<P>(p, set).find("capacity is -8 tokens") != std::string::npos);
  p.capacity = (std::int64_t{1} << 22) + 1;
  CHECK(error_of<P>(p, set).find("capacity is 4194305 tokens") != std::string::npos);
  p = params{};
  p.buffer = 0;
  CHECK(error_of<P>(p, set) ==
        "packswap [invalid_argument]: buffer is 0 samples, must be at least 1");
  p = params{};
  p.lookahead = -1;
  CHECK(error_of<P>(p, set) == "packswap [invalid_argument]: lookahead is -1, must be >= 0");
}

TEST_CASE("pack_samples packs with the 1D packer at capacity 8192 by default") {
  sample_set set;
  for (int i = 0; i < 10; ++i) {
    set.push_back(4096, std::vector<std::int64_t>{4000});
  }
  const auto packs = packswap::pack_samples(set);
  CHECK(packs.capacity() == 8192);
  CHECK(packs.image_budget() == pack_list::no_budget);
  CHECK(packs.size() == 5);
}
