#include "all_headers.hpp"

#include <string>

std::string packswap_odr_b() {
  return packswap::version_string;
}
