// Included from two translation units of one program: any non-inline definition in a header
// makes the link fail.
#include "all_headers.hpp"

#include <string>

std::string packswap_odr_a() {
  return packswap::version_string;
}
