#pragma once

#include "packswap/exchange/micro_batch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap::detail {

/// One of the engine's `prefetch_depth + 1` receive buffers: the arena the packs of one
/// micro-step arrive in, and the views handed out for it. Micro-step s uses slot s mod the count,
/// so a slot is reused once its previous micro-step was released (stream-ordered transports:
/// once the caller's stream passed that release, through the `released` fence).
template <class Transport>
struct receive_slot {
  static constexpr std::size_t alignment = 256; ///< of every pack in the arena

  std::int64_t seq = -1; ///< the micro-step it holds
  void* arena = nullptr;
  std::size_t capacity = 0;
  std::vector<pack_view> views;
  typename Transport::fence ready, released;
  bool used = false; ///< released at least once: `released` is recorded
  bool done = false; ///< the exchange completed and was checked (guarded by the engine's mutex)

  /// The bytes a pack takes in the arena.
  static std::size_t aligned(std::int64_t bytes) {
    return (static_cast<std::size_t>(bytes) + alignment - 1) / alignment * alignment;
  }

  /// Grows the arena to at least `needed` bytes, by at least half its size so that a batch
  /// distribution with a bounded maximum stops allocating after a few batches; returns the
  /// change in bytes held (0: no allocation).
  std::int64_t grow(Transport& t, std::size_t needed) {
    if (needed <= capacity) {
      return 0;
    }
    std::size_t bytes = std::max(needed, capacity + capacity / 2);
    bytes = (bytes + 4095) / 4096 * 4096;
    const auto before = static_cast<std::int64_t>(capacity);
    release(t);
    arena = t.allocate(bytes);
    capacity = bytes;
    return static_cast<std::int64_t>(bytes) - before;
  }

  /// Frees the arena; a stream-ordered transport frees it after the caller's stream passed its
  /// last release. Only when no transport operation writes into it any more.
  void release(Transport& t) noexcept {
    if (arena != nullptr) {
      if (used) {
        try {
          t.start_after(released);
        } catch (...) {
          // The stream hook failed (a broken CUDA context): freeing in order is all that is left.
        }
      }
      t.deallocate(arena, capacity);
      arena = nullptr;
      capacity = 0;
    }
  }
};

} // namespace packswap::detail
