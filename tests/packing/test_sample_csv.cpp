#include <packswap/packing/sample_csv.hpp>
#include <packswap/packing/workload.hpp>

#include <doctest/doctest.h>

#include <sstream>
#include <string>

using packswap::read_sample_csv;

namespace {

packswap::sample_set read(const std::string& text) {
  std::istringstream in(text);
  return read_sample_csv(in);
}

std::string error_of(const std::string& text) {
  try {
    (void)read(text);
  } catch (const packswap::error& e) {
    CHECK(e.code() == packswap::errc::parse_error);
    return e.what();
  }
  return "no error";
}

} // namespace

TEST_CASE("the CSV reader reads tokens, per-image tokens and document lengths") {
  const auto set = read("# per-sample statistics\n"
                        "tokens,images,documents\n"
                        "1800,,\n"
                        "\n"
                        " 2100 , 1024;256 ,\r\n"
                        "1600,,700;900\n");
  REQUIRE(set.size() == 3);
  CHECK(set.tokens(0) == 1800);
  CHECK(set.images(0).empty());
  CHECK(set.image_tokens(1) == 1280);
  CHECK(set.images(1)[1] == 256);
  REQUIRE(set.documents(2).size() == 2);
  CHECK(set.documents(2)[0] == 700);
}

TEST_CASE("the CSV columns may come in any order and only tokens is required") {
  auto set = read("documents,tokens,images\n5;5,10,3\n");
  REQUIRE(set.size() == 1);
  CHECK(set.tokens(0) == 10);
  CHECK(set.image_tokens(0) == 3);
  CHECK(set.documents(0).size() == 2);
  set = read("tokens\n7\n8\n");
  CHECK(set.size() == 2);
  CHECK(read("").empty());
}

TEST_CASE("written samples read back the same") {
  const auto set = packswap::generate(packswap::workload_preset("vlm-pretrain"), 2'000, 4);
  std::stringstream io;
  packswap::write_sample_csv(io, set);
  const auto back = read_sample_csv(io);
  REQUIRE(back.size() == set.size());
  for (std::size_t i = 0; i < set.size(); ++i) {
    REQUIRE(back.tokens(i) == set.tokens(i));
    REQUIRE(back.images(i).size() == set.images(i).size());
    REQUIRE(back.documents(i).size() == set.documents(i).size());
    for (std::size_t j = 0; j < set.images(i).size(); ++j) {
      REQUIRE(back.images(i)[j] == set.images(i)[j]);
    }
  }
  CHECK(back.total_image_tokens() == set.total_image_tokens());
}

TEST_CASE("a bad CSV row is a parse error naming the line and the field") {
  CHECK(error_of("tokens,images\n10,\n20,12;x\n") ==
        "packswap [parse_error]: line 3, field 'images': '12;x' is not a ';'-separated list of "
        "integers in int64 range");
  CHECK(error_of("tokens\n10\nabc\n") ==
        "packswap [parse_error]: line 3, field 'tokens': 'abc' is not an integer in int64 range");
  CHECK(error_of("tokens\n99999999999999999999\n").find("line 2, field 'tokens'") !=
        std::string::npos);
  CHECK(error_of("tokens,images\n10,1;;2\n").find("line 2, field 'images': '1;;2'") !=
        std::string::npos);
  CHECK(error_of("tokens,images\n10\n") ==
        "packswap [parse_error]: line 2: 1 fields, the header has 2");
  CHECK(error_of("tokens,image\n") == "packswap [parse_error]: line 1: unknown column 'image' "
                                      "(known: tokens, images, documents)");
  CHECK(error_of("tokens,tokens\n") ==
        "packswap [parse_error]: line 1: column 'tokens' appears twice");
  CHECK(error_of("images\n5\n") == "packswap [parse_error]: line 1: the header has no 'tokens' "
                                   "column");
}

TEST_CASE("a CSV row with counts out of range is a parse error naming the line and the sample") {
  CHECK(error_of("tokens,images\n10,\n\n0,\n") ==
        "packswap [parse_error]: line 4: sample 1 has 0 tokens, must be in [1, 2147483647]");
  CHECK(error_of("tokens,images\n-5,\n") ==
        "packswap [parse_error]: line 2: sample 0 has -5 tokens, must be in [1, 2147483647]");
  CHECK(error_of("tokens,images\n100,60;50\n").find("line 2: sample 0 has more image tokens") !=
        std::string::npos);
  CHECK(error_of("tokens,documents\n100,60;30\n").find("line 2: sample 0 has documents of 90") !=
        std::string::npos);
}
