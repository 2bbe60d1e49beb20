// Any text: read_batch_csv either throws packswap::error or returns packs that write back to the
// same packs.
#include <packswap/balance/batch_csv.hpp>

#include "fuzz_check.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<packswap::pack_meta> packs;
  try {
    packs = packswap::read_batch_csv(in);
  } catch (const packswap::error& e) {
    PACKSWAP_FUZZ_CHECK(e.code() == packswap::errc::parse_error);
    return 0;
  }
  std::ostringstream out;
  packswap::write_batch_csv(out, packs);
  std::istringstream again(out.str());
  const auto back = packswap::read_batch_csv(again);
  PACKSWAP_FUZZ_CHECK(back.size() == packs.size());
  for (std::size_t p = 0; p < packs.size(); ++p) {
    PACKSWAP_FUZZ_CHECK(back[p].cost == packs[p].cost && back[p].bytes == packs[p].bytes &&
                        back[p].source_rank == packs[p].source_rank);
  }
  return 0;
}
