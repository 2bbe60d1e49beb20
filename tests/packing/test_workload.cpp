#include <packswap/detail/digest.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

using packswap::generate;
using packswap::sample_set;
using packswap::workload;
using packswap::workload_preset;

namespace {

std::uint64_t digest_of(const sample_set& set) {
  packswap::detail::digest d;
  for (std::size_t i = 0; i < set.size(); ++i) {
    d.i64(set.tokens(i));
    d.u64(set.images(i).size());
    for (const auto t : set.images(i)) {
      d.i64(t);
    }
    d.u64(set.documents(i).size());
    for (const auto t : set.documents(i)) {
      d.i64(t);
    }
  }
  return d.value();
}

std::string error_of(const workload& w) {
  try {
    (void)generate(w, 10, 1);
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::invalid_argument);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("the default preset with a fixed seed gives the same samples on every compiler") {
  // Built with gcc and clang, libstdc++ (and libc++ where used): any drift in the PRNG or the
  // integer sampling changes this digest.
  const auto set = generate(workload_preset("vlm-pretrain"), 10'000, 42);
  MESSAGE("tokens " << set.total_tokens() << " image tokens " << set.total_image_tokens()
                    << " digest " << digest_of(set));
  CHECK(set.total_tokens() == 22387130);
  CHECK(set.total_image_tokens() == 14846060);
  CHECK(digest_of(set) == 6748927362337364049ULL);
}

TEST_CASE("a prefix of a generated stream does not depend on its length") {
  const auto w = workload_preset("vlm-pretrain");
  const auto long_set = generate(w, 3000, 9);
  const auto short_set = generate(w, 1000, 9);
  sample_set prefix;
  for (std::size_t i = 0; i < 1000; ++i) {
    const auto im = long_set.images(i);
    const auto docs = long_set.documents(i);
    prefix.push_back(long_set.tokens(i), std::vector<std::int64_t>(im.begin(), im.end()),
                     std::vector<std::int64_t>(docs.begin(), docs.end()));
  }
  CHECK(digest_of(prefix) == digest_of(short_set));
  CHECK(digest_of(generate(w, 1000, 10)) != digest_of(short_set));
}

TEST_CASE("every preset draws valid samples no longer than its maximum") {
  for (const auto& name : packswap::workload_preset_names()) {
    const auto w = workload_preset(name);
    CHECK(w.name == name);
    CHECK(!w.description.empty());
    const auto set = generate(w, 20'000, 3);
    REQUIRE(set.size() == 20'000);
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {
      longest = std::max(longest, set.tokens(i));
    }
    CHECK(longest <= w.max_sample_tokens);
    if (name == "text-only") {
      CHECK(set.total_image_tokens() == 0);
    } else {
      CHECK(set.total_image_tokens() > set.total_tokens() / 2);
    }
  }
}

TEST_CASE("the default preset is a VLM mix: mostly 1,200 to 4,200 tokens, most samples with "
          "images, a heavy tail of image tokens") {
  const auto set = generate(workload_preset("vlm-pretrain"), 50'000, 1);
  std::int64_t in_band = 0;
  std::int64_t with_images = 0;
  std::int64_t text_only = 0;
  std::int64_t heavy = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    in_band += set.tokens(i) >= 1200 && set.tokens(i) <= 4200 ? 1 : 0;
    with_images += set.image_tokens(i) > 0 ? 1 : 0;
    text_only += set.image_tokens(i) == 0 ? 1 : 0;
    heavy += set.image_tokens(i) > 3000 ? 1 : 0;
  }
  CHECK(in_band > 35'000);
  CHECK(with_images > 40'000);
  CHECK(text_only > 5'000);
  CHECK(heavy > 2'000);
}

TEST_CASE("an unknown preset name is refused with the known names") {
  CHECK_THROWS_WITH_AS(workload_preset("vlm"),
                       "packswap [invalid_argument]: unknown workload preset 'vlm' (known: "
                       "vlm-pretrain, captioning, high-res, text-only)",
                       packswap::error);
}

TEST_CASE("a malformed workload is refused naming the kind and the field") {
  auto w = workload_preset("vlm-pretrain");
  w.kinds[0].text_tokens[0].lo = 0;
  CHECK(error_of(w).find("kind 'caption' text_tokens band 0 is {weight 1, 0..256}") !=
        std::string::npos);
  w = workload_preset("vlm-pretrain");
  w.kinds[1].image_sides[0].hi = 91; // 91 x 91 = 8281 tokens: more than a sample may hold
  CHECK(error_of(w).find("kind 'image-qa' can draw an image of 91 x 91 tokens") !=
        std::string::npos);
  w = workload_preset("vlm-pretrain");
  w.kinds[2].min_images = 5;
  CHECK(error_of(w).find("kind 'interleaved' has images 5..4") != std::string::npos);
  w = workload_preset("vlm-pretrain");
  for (auto& k : w.kinds) {
    k.weight = 0;
  }
  CHECK(error_of(w).find("has no kind of positive weight") != std::string::npos);
  w = workload_preset("text-only");
  w.kinds[0].min_documents = 0;
  CHECK(error_of(w).find("has documents 0..4") != std::string::npos);
  CHECK_THROWS_AS(generate(workload_preset("text-only"), -1, 1), packswap::error);
}

TEST_CASE("a too-long draw is trimmed: last images dropped, then text shortened") {
  workload w;
  w.name = "tiny";
  w.max_sample_tokens = 100;
  w.kinds = {{"big", 1, 3, 3, {{1, 7, 7}}, {{1, 30, 30}}, 1, 1}}; // 3 images of 49 + 30 text
  const auto set = generate(w, 5, 1);
  for (std::size_t i = 0; i < set.size(); ++i) {
    CHECK(set.images(i).size() == 2); // 147 -> 98, leaving room for text
    CHECK(set.tokens(i) == 100);      // text shortened from 30 to 2
  }
}

TEST_CASE("multi-document samples have documents that add up to the sample") {
  const auto set = generate(workload_preset("text-only"), 5'000, 8);
  std::size_t multi = 0;
  for (std::size_t i = 0; i < set.size(); ++i) {
    std::int64_t sum = 0;
    for (const auto d : set.documents(i)) {
      CHECK(d >= 1);
      sum += d;
    }
    CHECK(sum == set.tokens(i));
    multi += set.documents(i).size() > 1 ? 1 : 0;
  }
  CHECK(multi > 3'000);
}
