#pragma once

/// Typed CUDA and NCCL errors and the check macros of the NCCL backend.
///
/// `PACKSWAP_CUDA_TRY(call)` / `PACKSWAP_NCCL_TRY(call)` evaluate `call` exactly once and, on
/// failure, throw `packswap::nccl::cuda_error` / `nccl_error` (both `packswap::error`, with
/// `errc::cuda` / `errc::nccl`) that keep the status and name the call text and file:line. The
/// `_NOEXCEPT` twins, for destructors and cleanup, evaluate to the status instead and never throw.
///
/// ```
/// PACKSWAP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
/// PACKSWAP_NCCL_TRY(ncclSend(buf, n, ncclUint8, peer, comm, s));
/// (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamDestroy(s)); // in a destructor
/// ```

#include "packswap/error.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <sstream>
#include <string>

namespace packswap::nccl {

/// A failed CUDA runtime call; `status()` is what it returned.
class cuda_error : public packswap::error {
 public:
  /// An error with code `errc::cuda` for a call that returned `status`.
  cuda_error(cudaError_t status, const std::string& message)
      : packswap::error(errc::cuda, message), status_(status) {}
  /// What the call returned.
  [[nodiscard]] cudaError_t status() const noexcept { return status_; }

 private:
  cudaError_t status_;
};

/// A failed NCCL call (or an asynchronous NCCL error); `status()` is the NCCL result.
class nccl_error : public packswap::error {
 public:
  /// An error with code `errc::nccl` for a call (or asynchronous error) that returned `status`.
  nccl_error(ncclResult_t status, const std::string& message)
      : packswap::error(errc::nccl, message), status_(status) {}
  /// What the call returned.
  [[nodiscard]] ncclResult_t status() const noexcept { return status_; }

 private:
  ncclResult_t status_;
};

namespace detail {

[[noreturn]] inline void throw_cuda(cudaError_t status, const char* call, const char* file,
                                    int line) {
  std::ostringstream os;
  os << call << " failed at " << file << ":" << line << ": " << cudaGetErrorName(status) << " ("
     << cudaGetErrorString(status) << ")";
  throw cuda_error(status, os.str());
}

[[noreturn]] inline void throw_nccl(ncclResult_t status, const char* call, const char* file,
                                    int line) {
  std::ostringstream os;
  os << call << " failed at " << file << ":" << line << ": " << ncclGetErrorString(status);
  // The thread's last NCCL error says what went wrong in more detail, when there is one.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    os << " (" << last << ")";
  }
  throw nccl_error(status, os.str());
}

// Clears the runtime's last-error state after a failed call: CUDA keeps a non-sticky error until
// someone reads it, and an unrelated later check (a kernel launch, cudaGetLastError) would report
// it again as its own. Sticky errors (a corrupted context) stay; every later call reports them.
inline cudaError_t clear_cuda_error(cudaError_t status) noexcept {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return status;
}

} // namespace detail

/// Why no CUDA device is usable here, or an empty string when one is. The GPU tests, examples and
/// benchmarks print it and skip (exit code 77) instead of failing on machines without a GPU.
inline std::string no_device_reason() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) {
    return {};
  }
  return std::string("no CUDA device visible (cudaGetDeviceCount: ") + cudaGetErrorString(status) +
         ", " + std::to_string(devices) + " devices)";
}

} // namespace packswap::nccl

/// Evaluates the CUDA runtime call once; on failure clears the last error and throws
/// `packswap::nccl::cuda_error` naming the call and file:line.
#define PACKSWAP_CUDA_TRY(call)                                                                    \
  do {                                                                                             \
    const cudaError_t packswap_cuda_status_ = (call);                                              \
    if (packswap_cuda_status_ != cudaSuccess) {                                                    \
      ::packswap::nccl::detail::clear_cuda_error(packswap_cuda_status_);                           \
      ::packswap::nccl::detail::throw_cuda(packswap_cuda_status_, #call, __FILE__, __LINE__);      \
    }                                                                                              \
  } while (false)

/// Evaluates the CUDA runtime call once, clears the last error on failure and yields the status;
/// never throws (for destructors).
#define PACKSWAP_CUDA_TRY_NOEXCEPT(call) ::packswap::nccl::detail::clear_cuda_error((call))

/// Evaluates the NCCL call once; throws `packswap::nccl::nccl_error` on failure. `ncclInProgress`
/// is not a failure: a nonblocking communicator returns it while the call completes, and the
/// caller then waits for the communicator to be ready (see `communicator.hpp`).
#define PACKSWAP_NCCL_TRY(call)                                                                    \
  do {                                                                                             \
    const ncclResult_t packswap_nccl_status_ = (call);                                             \
    if (packswap_nccl_status_ != ncclSuccess && packswap_nccl_status_ != ncclInProgress) {         \
      ::packswap::nccl::detail::throw_nccl(packswap_nccl_status_, #call, __FILE__, __LINE__);      \
    }                                                                                              \
  } while (false)

/// Evaluates the NCCL call once and yields its result; never throws (for destructors).
#define PACKSWAP_NCCL_TRY_NOEXCEPT(call) static_cast<ncclResult_t>((call))
