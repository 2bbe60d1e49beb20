#pragma once

#include "packswap/error.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace packswap::detail {

/// An all-gather spelled as point-to-point operations, for the host backends: this rank's block
/// goes to every other rank and comes from every other rank into its place in `all`; the own block
/// is copied here. `sends` and `recvs` are reused storage (cleared, capacity kept).
inline void gather_as_p2p(std::int32_t rank, std::int32_t size, span<const std::byte> mine,
                          span<std::byte> all, std::vector<send_op>& sends,
                          std::vector<recv_op>& recvs) {
  const auto block = mine.size();
  PACKSWAP_EXPECTS(all.size() == block * static_cast<std::size_t>(size), errc::invalid_argument,
                   "all-gather output has " << all.size() << " bytes, needs " << size << " x "
                                            << block);
  sends.clear();
  recvs.clear();
  for (std::int32_t r = 0; r < size; ++r) {
    std::byte* dst = all.data() + static_cast<std::size_t>(r) * block;
    if (r == rank) {
      if (block > 0) {
        std::memcpy(dst, mine.data(), block);
      }
      continue;
    }
    sends.push_back(send_op{r, mine.data(), static_cast<std::int64_t>(block)});
    recvs.push_back(recv_op{r, dst, static_cast<std::int64_t>(block), -1});
  }
}

/// Throws unless every gathered block arrived whole (`errc::mismatch`, naming the rank).
inline void check_gathered(span<const recv_op> recvs, std::int32_t rank) {
  for (const auto& r : recvs) {
    PACKSWAP_EXPECTS(r.received == r.bytes, errc::mismatch,
                     "rank " << rank << ": the all-gather block from rank " << r.peer << " has "
                             << r.received << " bytes, expected " << r.bytes);
  }
}

} // namespace packswap::detail
