// Any text: read_sample_csv either throws packswap::error or returns samples that write back to
// the same samples.
#include <packswap/packing/sample_csv.hpp>

#include "fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  packswap::sample_set set;
  try {
    set = packswap::read_sample_csv(in);
  } catch (const packswap::error& e) {
    PACKSWAP_FUZZ_CHECK(e.code() == packswap::errc::parse_error ||
                        e.code() == packswap::errc::invalid_argument);
    return 0;
  }
  std::ostringstream out;
  packswap::write_sample_csv(out, set);
  std::istringstream again(out.str());
  const auto back = packswap::read_sample_csv(again);
  PACKSWAP_FUZZ_CHECK(back.size() == set.size());
  for (std::size_t i = 0; i < set.size(); ++i) {
    PACKSWAP_FUZZ_CHECK(back.tokens(i) == set.tokens(i));
    PACKSWAP_FUZZ_CHECK(back.image_tokens(i) == set.image_tokens(i));
    PACKSWAP_FUZZ_CHECK(back.images(i).size() == set.images(i).size());
    PACKSWAP_FUZZ_CHECK(back.documents(i).size() == set.documents(i).size());
  }
  return 0;
}
