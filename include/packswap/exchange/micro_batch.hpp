#pragma once

/// What goes into the exchange engine and what comes out of it: a rank's packs as its loader
/// produced them (`local_pack`), and the packs of its cell for one micro-step (`micro_batch`).

#include "packswap/solve.hpp"
#include "packswap/span.hpp"

#include <cstdint>

namespace packswap {

/// One pack this rank's loader produced, handed to `engine::submit`.
struct local_pack {
  std::int64_t cost = 0;      ///< compute cost in the cost model's integer unit, >= 0
  std::int64_t bytes = 0;     ///< payload size, >= 0
  const void* data = nullptr; ///< payload, in the transport's memory space (may be null if empty)
};

/// One pack of the caller's cell, as `engine::acquire` hands it out.
struct pack_view {
  std::int32_t pack = 0;         ///< pack id in the global batch (`source_rank * ga * mbs + index`)
  std::int32_t source_rank = 0;  ///< the rank whose loader produced it
  std::int32_t source_index = 0; ///< its index in that rank's `submit()`
  std::int64_t bytes = 0;        ///< payload size
  const void* data = nullptr;    ///< payload (host or device pointer, per the transport)
  bool kept = false;             ///< true: the caller's own submitted buffer, used in place
};

/// The packs of one (rank, micro-step) cell, valid until `engine::release` of that micro-step.
struct micro_batch {
  std::int64_t batch = 0;                       ///< global batch index (0, 1, ... in submit order)
  std::int32_t micro_step = 0;                  ///< micro-step in the batch, in execution order
  span<const pack_view> packs;                  ///< ascending pack id; `mbs` entries
  const packswap::solution* solution = nullptr; ///< the batch's solution (balance, movement, plan)
};

} // namespace packswap
