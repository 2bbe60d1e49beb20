#include <packswap/balance/batch_csv.hpp>

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace packswap;

namespace {

std::vector<pack_meta> read(const std::string& text) {
  std::istringstream in(text);
  return read_batch_csv(in);
}

std::string error_of(const std::string& text) {
  try {
    read(text);
  } catch (const error& e) {
    CHECK(e.code() == errc::parse_error);
    return e.what();
  }
  FAIL("did not throw");
  return {};
}

} // namespace

TEST_CASE("a batch CSV round-trips through write and read") {
  const std::vector<pack_meta> packs{{10, 100, 0}, {0, 0, 1}, {7, 70000, 1}, {3, 5, 0}};
  std::ostringstream out;
  write_batch_csv(out, packs);
  const auto back = read(out.str());
  REQUIRE(back.size() == packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    CHECK(back[p].cost == packs[p].cost);
    CHECK(back[p].bytes == packs[p].bytes);
    CHECK(back[p].source_rank == packs[p].source_rank);
  }
}

TEST_CASE("comments, blank lines, spaces and CRLF line ends are accepted") {
  const auto packs =
      read("# exported by the loader\r\npack,source_rank,cost,bytes\r\n\r\n0, 1 ,+5,6\r\n");
  REQUIRE(packs.size() == 1);
  CHECK(packs[0].source_rank == 1);
  CHECK(packs[0].cost == 5);
}

TEST_CASE("malformed CSV names the line and the field") {
  CHECK(error_of("").find("no header") != std::string::npos);
  CHECK(error_of("pack,cost\n").find("line 1: expected the header") != std::string::npos);
  CHECK(error_of("pack,source_rank,cost,bytes\n0,0,1\n").find("line 2: expected 4 fields") !=
        std::string::npos);
  CHECK(error_of("pack,source_rank,cost,bytes\n0,0,1,2\n1,0,x,2\n").find("line 3: cost \"x\"") !=
        std::string::npos);
  CHECK(
      error_of("pack,source_rank,cost,bytes\n0,0,99999999999999999999,2\n").find("line 2: cost") !=
      std::string::npos);
  CHECK(error_of("pack,source_rank,cost,bytes\n1,0,1,2\n").find("line 2: pack 1 out of order") !=
        std::string::npos);
  CHECK(error_of("pack,source_rank,cost,bytes\n0,-1,1,2\n").find("line 2: source_rank -1") !=
        std::string::npos);
  CHECK(error_of("pack,source_rank,cost,bytes\n0,0,,2\n").find("line 2: cost \"\"") !=
        std::string::npos);
}

TEST_CASE("negative values parse; validation, not parsing, refuses them") {
  const auto packs = read("pack,source_rank,cost,bytes\n0,0,-3,2\n");
  CHECK(packs[0].cost == -3);
  CHECK_THROWS_WITH_AS(validate_batch(packs, {1, 1, 1}), doctest::Contains("pack 0 has cost -3"),
                       error);
}
