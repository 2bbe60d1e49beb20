#include <packswap/packing/sample.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

using packswap::sample_set;

namespace {

std::string error_of(sample_set& set, std::int64_t tokens, std::vector<std::int64_t> images = {},
                     std::vector<std::int64_t> docs = {}) {
  try {
    set.push_back(tokens, images, docs);
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::invalid_argument);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("a sample_set stores tokens, images and documents of every sample, flat") {
  sample_set set;
  CHECK(set.empty());
  set.push_back(1800);
  set.push_back(2100, std::vector<std::int64_t>{1024, 256});
  set.push_back(1600, {}, std::vector<std::int64_t>{700, 900});
  REQUIRE(set.size() == 3);
  CHECK(set.tokens(1) == 2100);
  CHECK(set.image_tokens(0) == 0);
  CHECK(set.image_tokens(1) == 1280);
  REQUIRE(set.images(1).size() == 2);
  CHECK(set.images(1)[0] == 1024);
  CHECK(set.images(1)[1] == 256);
  CHECK(set.images(2).empty());
  // An empty document list means one document spanning the sample.
  REQUIRE(set.documents(0).size() == 1);
  CHECK(set.documents(0)[0] == 1800);
  REQUIRE(set.documents(2).size() == 2);
  CHECK(set.documents(2)[1] == 900);
  CHECK(set.total_tokens() == 5500);
  CHECK(set.total_image_tokens() == 1280);
  CHECK(set.total_images() == 2);
  const auto view = set[1];
  CHECK(view.tokens == 2100);
  CHECK(view.image_tokens == 1280);
  CHECK(view.documents.size() == 1);
  CHECK(set.tokens().size() == 3);
  CHECK(set.image_tokens()[1] == 1280);
}

TEST_CASE("a sample with a count out of range is refused with its index and values") {
  sample_set set;
  set.push_back(10);
  CHECK(error_of(set, 0) ==
        std::string("packswap [invalid_argument]: sample 1 has 0 tokens, must be in [1, "
                    "2147483647]"));
  CHECK(error_of(set, -5).find("sample 1 has -5 tokens") != std::string::npos);
  CHECK(error_of(set, std::int64_t{1} << 31).find("has 2147483648 tokens") != std::string::npos);
  CHECK(error_of(set, 100, {60, 0}).find("sample 1 image 1 has 0 tokens, must be in [1, 100]") !=
        std::string::npos);
  CHECK(error_of(set, 100, {-3}).find("image 0 has -3 tokens") != std::string::npos);
  CHECK(error_of(set, 100, {60, 50})
            .find("more image tokens (110 after image 1) than tokens "
                  "(100)") != std::string::npos);
  CHECK(error_of(set, 100, {}, {60, 30})
            .find("documents of 90 tokens in total, must add up to "
                  "its 100 tokens") != std::string::npos);
  CHECK(error_of(set, 100, {}, {60, 0, 40}).find("document 1 has 0 tokens") != std::string::npos);
  CHECK(error_of(set, 100, {}, {60, 50}).find("longer in total (110 after document 1)") !=
        std::string::npos);
  // A refused sample leaves the set as it was.
  CHECK(set.size() == 1);
  CHECK(set.total_tokens() == 10);
  set.push_back(100, std::vector<std::int64_t>{100}, std::vector<std::int64_t>{100});
  CHECK(set.size() == 2);
}
