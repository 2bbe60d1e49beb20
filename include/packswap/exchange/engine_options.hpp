#pragma once

/// The options every rank's `engine` must agree on, and the counters an engine keeps.

#include "packswap/solve.hpp"

#include <chrono>
#include <cstdint>

namespace packswap {

/// Options of an `engine`. Every rank must use the same values.
struct engine_options {
  /// Micro-steps exchanged ahead of the one being computed (>= 1). Memory: `prefetch_depth + 1`
  /// receive buffers, each sized for the largest micro-step seen.
  std::int32_t prefetch_depth = 1;
  /// Let the first exchanges of the next global batch run during the last micro-steps of the
  /// current one (needs the next batch `submit`ted before then).
  bool prefetch_across_batches = true;
  /// How long one transport operation may take once the worker waits for it before it fails with
  /// `errc::timeout`. Must exceed the longest time ranks drift apart (about one micro-step).
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  /// Host transports: checksum every payload at `submit` and verify every received pack before
  /// `acquire` hands it out. Ignored (no checksums) for device memory.
  bool verify_checksums = true;
  /// Route the packs a rank keeps through the transport as self-sends too (a test option: on one
  /// GPU it makes every pack cross NCCL). Off: kept packs are used in place, never copied.
  bool exchange_kept_packs = false;
  /// The solver's options.
  solve_options solver{};
};

/// Counters of one engine, for tests and monitoring.
struct engine_stats {
  /// `submit` calls that succeeded.
  std::int64_t batches_submitted = 0;
  /// `release` calls that succeeded.
  std::int64_t micro_steps_released = 0;
  std::int64_t packs_kept = 0;     ///< handed out in place
  std::int64_t packs_received = 0; ///< handed out from a receive buffer
  /// Payload bytes received from other ranks.
  std::int64_t bytes_received = 0;
  /// Payload bytes sent to other ranks.
  std::int64_t bytes_sent = 0;
  std::int64_t buffer_allocations = 0;  ///< receive-buffer (re)allocations since construction
  std::int64_t buffer_bytes = 0;        ///< receive-buffer bytes held now
  std::int64_t request_allocations = 0; ///< transport requests created since construction
  bool worker_running = false;          ///< false once the worker was joined (after an error)
  /// Operations the transport could not stop within its deadline after an error (MPI: a rank
  /// that neither took nor drained them). While not zero, the payloads of the batches in flight
  /// may still be read, and the engine keeps its receive buffers rather than free them.
  std::int64_t stray_operations = 0;
  std::int32_t ctas = 0; ///< exchange CTA limit in force (0: transport default)
};

} // namespace packswap
