#include <packswap/error.hpp>
#include <packswap/simulate/method.hpp>

#include <doctest/doctest.h>

#include <string>

TEST_CASE("method names round-trip and are the CLI's names") {
  CHECK(std::string(packswap::to_string(packswap::method::two_d)) == "2d");
  CHECK(std::string(packswap::to_string(packswap::method::rebalance_overlap)) ==
        "rebalance-overlap");
  for (const auto m : packswap::all_methods) {
    CHECK(packswap::method_from_string(packswap::to_string(m)) == m);
  }
}

TEST_CASE("all_methods lists every method at its own index") {
  for (std::size_t i = 0; i < packswap::all_methods.size(); ++i) {
    CHECK(static_cast<std::size_t>(packswap::all_methods[i]) == i);
  }
}

TEST_CASE("an unknown method name is an error listing the known ones") {
  CHECK_THROWS_WITH_AS(packswap::method_from_string("2D"),
                       doctest::Contains("unknown method '2D' (known: baseline, 2d, local"),
                       packswap::error);
}
