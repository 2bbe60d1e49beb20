#include "packswap/version.hpp"

#include <doctest/doctest.h>

#include <string>

TEST_CASE("the version CMake parsed is the one version.hpp declares") {
  CHECK(PACKSWAP_VERSION_MAJOR == PACKSWAP_CMAKE_VERSION_MAJOR);
  CHECK(PACKSWAP_VERSION_MINOR == PACKSWAP_CMAKE_VERSION_MINOR);
  CHECK(PACKSWAP_VERSION_PATCH == PACKSWAP_CMAKE_VERSION_PATCH);
  CHECK(std::string(packswap::version_string) == PACKSWAP_CMAKE_VERSION);
  CHECK(PACKSWAP_VERSION == PACKSWAP_CMAKE_VERSION_MAJOR * 10000 +
                                PACKSWAP_CMAKE_VERSION_MINOR * 100 + PACKSWAP_CMAKE_VERSION_PATCH);
}
