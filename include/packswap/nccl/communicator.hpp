#pragma once

#include "packswap/error.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/nccl/error.hpp"

#include <nccl.h>

#include <chrono>
#include <string>
#include <utility>

namespace packswap::nccl {

/// How packswap configures a communicator it creates.
struct comm_config {
  /// false (the default): NCCL calls return at once (`ncclInProgress`) and packswap waits for
  /// them with a deadline, so that a stuck peer ends in an error, not a hang.
  bool blocking = false;
  /// Per-communicator CTA limits (NCCL's `minCTAs`/`maxCTAs`); 0 leaves NCCL's default.
  int min_ctas = 0;
  int max_ctas = 0; ///< see `min_ctas`

  /// The NCCL configuration these settings make.
  [[nodiscard]] ncclConfig_t to_nccl() const noexcept {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = blocking ? 1 : 0;
    if (min_ctas > 0) {
      c.minCTAs = min_ctas;
    }
    if (max_ctas > 0) {
      c.maxCTAs = max_ctas;
    }
    c.splitShare = 0; // own resources: the exchange must not contend inside the parent's
    return c;
  }
};

namespace detail {

/// Waits until a nonblocking communicator finished its last call (its async state leaves
/// `ncclInProgress`); throws `nccl_error` when it failed and `errc::timeout` at the deadline.
inline void wait_ready(ncclComm_t comm, deadline until, const char* what) {
  packswap::detail::backoff pause;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    PACKSWAP_NCCL_TRY(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) {
      return;
    }
    if (state != ncclInProgress) {
      throw nccl_error(state, std::string(what) + " failed: " + ncclGetErrorString(state) + " (" +
                                  ncclGetLastError(comm) + ")");
    }
    PACKSWAP_EXPECTS(exchange_clock::now() < until, errc::timeout,
                     what << " did not complete before its deadline");
    pause.pause();
  }
}

} // namespace detail

/// A non-owning NCCL communicator handle: the caller's (for example the data-parallel group's).
/// Copying it copies the handle; the communicator must outlive every use.
class communicator_ref {
 public:
  communicator_ref() = default;
  /// Refers to `comm`, which stays the caller's.
  explicit communicator_ref(ncclComm_t comm) noexcept : comm_(comm) {}

  /// The NCCL handle.
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }
  /// Whether it refers to a communicator.
  explicit operator bool() const noexcept { return comm_ != nullptr; }

  /// This rank in the communicator.
  [[nodiscard]] int rank() const {
    int r = 0;
    PACKSWAP_NCCL_TRY(ncclCommUserRank(comm_, &r));
    return r;
  }
  /// The number of ranks.
  [[nodiscard]] int size() const {
    int n = 0;
    PACKSWAP_NCCL_TRY(ncclCommCount(comm_, &n));
    return n;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

/// An owning NCCL communicator: finalized and destroyed with the object (aborted when that fails
/// or does not finish within `finalize_timeout`). Move-only.
///
/// ```
/// auto mine = packswap::nccl::communicator::split(packswap::nccl::communicator_ref(dp_comm),
///                                                 0, rank, {/*blocking=*/false, 4, 4});
/// ```
class communicator {
 public:
  communicator() = default;
  /// Adopts `comm`: this object destroys it.
  explicit communicator(ncclComm_t comm) noexcept : comm_(comm) {}
  /// Takes over `other`'s communicator; `other` is left empty.
  communicator(communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  /// Destroys the communicator held, then takes over `other`'s.
  communicator& operator=(communicator&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() { reset(); }

  /// A new communicator split from `parent` (collective over `parent`: every rank calls it, in
  /// the same order relative to its other calls on `parent`). Waits for it up to `until`.
  [[nodiscard]] static communicator split(communicator_ref parent, int color, int key,
                                          const comm_config& cfg, deadline until) {
    ncclComm_t comm = nullptr;
    ncclConfig_t conf = cfg.to_nccl();
    PACKSWAP_NCCL_TRY(ncclCommSplit(parent.get(), color, key, &comm, &conf));
    communicator out(comm);
    if (!cfg.blocking) {
      detail::wait_ready(comm, until, "ncclCommSplit");
    }
    return out;
  }

  /// The NCCL handle, still owned by this object.
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }
  /// A non-owning handle to it.
  [[nodiscard]] communicator_ref ref() const noexcept { return communicator_ref(comm_); }
  /// Whether it holds a communicator.
  explicit operator bool() const noexcept { return comm_ != nullptr; }

  /// Aborts the communicator: its kernels stop, pending operations end in error, and it is gone.
  void abort() noexcept {
    if (comm_ != nullptr) {
      (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclCommAbort(comm_));
      comm_ = nullptr;
    }
  }

  /// Finalizes (flushing what was issued) and destroys; aborts instead when that fails or takes
  /// longer than `finalize_timeout`. Never throws.
  void reset() noexcept {
    if (comm_ == nullptr) {
      return;
    }
    try {
      PACKSWAP_NCCL_TRY(ncclCommFinalize(comm_));
      detail::wait_ready(comm_, exchange_clock::now() + finalize_timeout, "ncclCommFinalize");
      (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclCommDestroy(comm_));
      comm_ = nullptr;
    } catch (...) {
      abort();
    }
  }

  /// How long `reset` waits for outstanding operations before it aborts.
  std::chrono::milliseconds finalize_timeout = std::chrono::seconds(30);

 private:
  ncclComm_t comm_ = nullptr;
};

/// `ncclGroupStart` now, `ncclGroupEnd` at `end()` or, failing that, in the destructor.
///
/// The destructor still ends the group when an exception unwinds through it: NCCL's group depth
/// is per thread, and a group left open would swallow every later NCCL call of this thread into a
/// group that never launches. A half-built group may then launch mismatched operations, so whoever
/// catches the error must abort the communicator (the NCCL transport does).
class group_guard {
 public:
  group_guard() { PACKSWAP_NCCL_TRY(ncclGroupStart()); }
  group_guard(const group_guard&) = delete;
  group_guard& operator=(const group_guard&) = delete;
  ~group_guard() {
    if (!ended_) {
      (void)PACKSWAP_NCCL_TRY_NOEXCEPT(ncclGroupEnd());
    }
  }

  /// Ends the group; may return before it is launched on a nonblocking communicator (wait for it
  /// with `detail::wait_ready`).
  void end() {
    ended_ = true;
    PACKSWAP_NCCL_TRY(ncclGroupEnd());
  }

 private:
  bool ended_ = false;
};

} // namespace packswap::nccl
