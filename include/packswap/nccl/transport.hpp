#pragma once

#include "packswap/error.hpp"
#include "packswap/exchange/cta.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/nccl/communicator.hpp"
#include "packswap/nccl/error.hpp"
#include "packswap/span.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace packswap::nccl {

/// Options of an NCCL `transport`.
struct transport_options {
  /// CTAs the exchange communicator may take (see `packswap::cta_policy`). `automatic` starts
  /// at `ctas.ctas` and re-splits the communicator once, after the first global batch whose
  /// compute time was measured, with `choose_ctas` of that batch's bytes and compute time.
  cta_policy ctas = cta_policy::automatic();
  /// Deadline of setup calls (communicator split, group launch) before they fail.
  std::chrono::milliseconds setup_timeout = std::chrono::seconds(120);
  /// How long an abort waits for the exchange stream to finish what is queued on it (see
  /// "Stopping" in the `transport` comment) before it gives up and reports a stray operation.
  std::chrono::milliseconds abort_timeout = std::chrono::seconds(30);
};

/// The NCCL backend: `ncclSend`/`ncclRecv` groups on a dedicated CUDA stream, on a communicator
/// split from the caller's, with device buffers; completion is a CUDA event that the caller's
/// stream waits on (the engine never blocks the host for an exchange).
///
/// ```
/// packswap::nccl::transport t(packswap::nccl::communicator_ref(dp_comm)); // collective
/// packswap::engine<packswap::nccl::transport> e(t, {dp, ga});
/// e.submit(packs);                              // local_pack::data are device pointers
/// auto cell = e.acquire(0, compute_stream);     // compute_stream waits for the exchange
/// ```
///
/// Communicator: the exchange runs on its own nonblocking communicator, split from `parent`
/// (color 0, key = rank) with this transport's CTA limits, so exchange traffic never queues
/// behind gradient collectives on `parent` and every NCCL call has a deadline. The split is a
/// collective call on `parent`: construct the transports of all ranks at the same point.
///
/// Ordering: every NCCL call and stream operation is made from the thread that drives the engine,
/// at points fixed by its call sequence, so under `CUDA_DEVICE_MAX_CONNECTIONS=1` all ranks issue
/// their exchange and gradient collectives in the same order. The worker thread only queries
/// events and the communicator's asynchronous error, and aborts it.
///
/// Errors: a failed or timed-out operation aborts the exchange communicator (`ncclCommAbort`):
/// its kernels stop, so no stream waits forever; later operations fail. NCCL cannot withdraw an
/// enqueued operation, so `cancel` of an unfinished request aborts the communicator too. Other
/// ranks learn of it through their own errors or deadlines.
///
/// Stopping, and who still uses your device memory. The exchange stream holds every NCCL send
/// (it reads your payloads in place), every receive into the engine's buffers, the metadata
/// staging copies, and waits for the caller's stream at each reused buffer (`start_after`).
/// `abort` aborts the communicators, whose kernels then exit, and waits until the exchange
/// stream has finished everything queued on it, up to `abort_timeout`: after that no work of
/// this transport reads a payload or writes a buffer, and the caller's stream no longer waits
/// on the exchange stream (every `ready` fence it waits for has passed). What it cannot wait
/// for is the caller's own work: the stream passed to `acquire`/`release` still runs your kernels
/// on the micro-batch (kept packs are your payloads), so synchronize it (or free with
/// `cudaFreeAsync` on it) before freeing payloads. When the exchange stream does not finish in
/// time (a hung kernel, or a caller stream stuck before a release the exchange waits for),
/// `stray_operations()` is 1 until it does: keep the payloads until `cudaDeviceSynchronize()`
/// returns.
///
/// Lifetime: the parent communicator and the CUDA device must outlive the transport. Device
/// memory comes from `cudaMallocAsync` on the exchange stream. Thread-safety: see
/// `packswap/exchange/transport.hpp`.
class transport {
 public:
  using stream_type = cudaStream_t;                            ///< the caller's stream
  static constexpr memory_space memory = memory_space::device; ///< buffers are device memory
  static constexpr bool stream_ordered = true; ///< completion is an event on the caller's stream

  /// A point on a stream: a CUDA event, created on first use.
  class fence {
   public:
    fence() = default;
    fence(const fence&) = delete;
    fence& operator=(const fence&) = delete;
    ~fence() {
      if (event_ != nullptr) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaEventDestroy(event_));
      }
    }

   private:
    friend class transport;
    cudaEvent_t event_ = nullptr;
  };

  /// A completion handle: an event recorded after the operation, and the staging buffers of an
  /// all-gather (host spans in and out, device in between). Reused across operations.
  class request {
   public:
    request() = default;
    request(const request&) = delete;
    request& operator=(const request&) = delete;
    ~request() {
      if (device_ != nullptr) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFreeAsync(device_, stream_));
      }
      if (pinned_ != nullptr) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFreeHost(pinned_));
      }
    }

   private:
    friend class transport;
    fence done_;
    bool active_ = false;
    span<recv_op> recvs_;
    span<std::byte> gather_out_;
    bool gather_ = false;
    cudaStream_t stream_ = nullptr;
    void* device_ = nullptr;
    std::size_t device_bytes_ = 0;
    std::byte* pinned_ = nullptr;
    std::size_t pinned_bytes_ = 0;
  };

  /// Splits the exchange communicator from `parent` (collective) and creates the exchange stream
  /// on the current CUDA device.
  explicit transport(communicator_ref parent, const transport_options& opt = {})
      : parent_(parent), opt_(opt) {
    opt_.ctas.validate();
    rank_ = parent.rank();
    size_ = parent.size();
    PACKSWAP_CUDA_TRY(cudaGetDevice(&device_));
    PACKSWAP_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
      ctas_ = opt_.ctas.kind == cta_policy::mode::nccl_default ? 0 : opt_.ctas.ctas;
      comm_ = communicator::split(parent_, 0, rank_, config(ctas_), setup_deadline());
      for (auto& s : samples_) {
        PACKSWAP_CUDA_TRY(cudaEventCreate(&s.begin));
        PACKSWAP_CUDA_TRY(cudaEventCreate(&s.end));
      }
    } catch (...) {
      release_resources();
      throw;
    }
  }

  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  /// Finalizes the communicators (aborting them when that does not finish in time) and releases
  /// the stream. Never throws.
  ~transport() { release_resources(); }

  /// This rank.
  [[nodiscard]] std::int32_t rank() const noexcept { return rank_; }
  /// The number of ranks.
  [[nodiscard]] std::int32_t size() const noexcept { return size_; }

  /// The stream every exchange runs on.
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  /// Gathers host blocks through device staging: host -> device, `ncclAllGather`, device -> host.
  void start_all_gather(request& req, span<const std::byte> mine, span<std::byte> all) {
    const std::size_t n = mine.size();
    PACKSWAP_EXPECTS(all.size() == n * static_cast<std::size_t>(size_), errc::invalid_argument,
                     "all-gather output has " << all.size() << " bytes, needs " << size_ << " x "
                                              << n);
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_aborted_locked();
    begin(req);
    if (req.pinned_bytes_ < all.size()) {
      if (req.pinned_ != nullptr) {
        PACKSWAP_CUDA_TRY(cudaFreeHost(req.pinned_));
        req.pinned_ = nullptr;
      }
      void* p = nullptr;
      PACKSWAP_CUDA_TRY(cudaMallocHost(&p, all.size()));
      req.pinned_ = static_cast<std::byte*>(p);
      req.pinned_bytes_ = all.size();
    }
    if (req.device_bytes_ < all.size()) {
      if (req.device_ != nullptr) {
        PACKSWAP_CUDA_TRY(cudaFreeAsync(req.device_, stream_));
        req.device_ = nullptr;
      }
      PACKSWAP_CUDA_TRY(cudaMallocAsync(&req.device_, all.size(), stream_));
      req.device_bytes_ = all.size();
    }
    req.stream_ = stream_;
    const std::size_t at = n * static_cast<std::size_t>(rank_);
    auto* dev = static_cast<std::byte*>(req.device_);
    if (n > 0) {
      std::memcpy(req.pinned_ + at, mine.data(), n);
      PACKSWAP_CUDA_TRY(
          cudaMemcpyAsync(dev + at, req.pinned_ + at, n, cudaMemcpyHostToDevice, stream_));
      guarded([&] {
        PACKSWAP_NCCL_TRY(ncclAllGather(dev + at, dev, n, ncclUint8, comm_.get(), stream_));
        detail::wait_ready(comm_.get(), setup_deadline(), "ncclAllGather");
      });
      PACKSWAP_CUDA_TRY(
          cudaMemcpyAsync(req.pinned_, dev, all.size(), cudaMemcpyDeviceToHost, stream_));
    }
    req.gather_ = true;
    req.gather_out_ = all;
    req.recvs_ = {};
    finish_start(req);
  }

  /// One NCCL group of sends and receives on the exchange stream (empty ones are skipped on both
  /// ends, which agree on sizes through the plan).
  void start_exchange(request& req, span<const send_op> sends, span<recv_op> recvs) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_aborted_locked();
    begin(req);
    guarded([&] {
      group_guard group;
      for (const auto& s : sends) {
        if (s.bytes > 0) {
          PACKSWAP_NCCL_TRY(ncclSend(s.data, static_cast<std::size_t>(s.bytes), ncclUint8, s.peer,
                                     comm_.get(), stream_));
        }
      }
      for (auto& r : recvs) {
        r.received = -1;
        if (r.bytes > 0) {
          PACKSWAP_NCCL_TRY(ncclRecv(r.data, static_cast<std::size_t>(r.bytes), ncclUint8, r.peer,
                                     comm_.get(), stream_));
        }
      }
      group.end();
      detail::wait_ready(comm_.get(), setup_deadline(), "ncclGroupEnd");
    });
    req.gather_ = false;
    req.recvs_ = recvs;
    finish_start(req);
  }

  /// Polls the request's event and the communicator's asynchronous error until the request
  /// completed (true) or the deadline passed (false); throws on a CUDA or NCCL error.
  [[nodiscard]] bool wait(request& req, deadline until) {
    // The worker thread has no current device of its own.
    PACKSWAP_CUDA_TRY(cudaSetDevice(device_));
    packswap::detail::backoff pause;
    for (;;) {
      if (!req.active_) {
        return true;
      }
      const cudaError_t q = cudaEventQuery(req.done_.event_);
      if (q == cudaSuccess) {
        complete(req);
        return true;
      }
      if (q != cudaErrorNotReady) {
        PACKSWAP_CUDA_TRY(q);
      }
      check_async_error();
      if (exchange_clock::now() >= until) {
        return false;
      }
      pause.pause();
    }
  }

  /// An enqueued NCCL operation cannot be withdrawn: an unfinished request aborts the
  /// communicator, which stops its kernels.
  void cancel(request& req) noexcept {
    if (!req.active_) {
      return;
    }
    const on_device here(device_);
    if (PACKSWAP_CUDA_TRY_NOEXCEPT(cudaEventQuery(req.done_.event_)) != cudaSuccess) {
      try {
        abort(errc::cancelled,
              "rank " + std::to_string(rank_) + " stopped with an exchange in flight");
      } catch (...) {
        abort(errc::cancelled, std::string()); // out of memory for the message
      }
    }
    req.active_ = false;
  }

  /// Aborts the exchange communicator: its kernels stop and every later operation fails with
  /// `code` and `message`. Returns once the exchange stream finished everything queued on it, or
  /// at `abort_timeout` (then `stray_operations()` says so).
  void abort(errc code, const std::string& message) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_locked(code, message);
  }

  /// 1 while an aborted transport's exchange stream still has work queued (it may still read
  /// payloads and write the engine's buffers), else 0.
  [[nodiscard]] std::int64_t stray_operations() const noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_ || stream_ == nullptr) {
      return 0;
    }
    const on_device here(device_);
    return PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamQuery(stream_)) == cudaErrorNotReady ? 1 : 0;
  }

  /// Device memory, ordered on the exchange stream.
  [[nodiscard]] void* allocate(std::size_t bytes) {
    if (bytes == 0) {
      return nullptr;
    }
    void* p = nullptr;
    PACKSWAP_CUDA_TRY(cudaMallocAsync(&p, bytes, stream_));
    return p;
  }
  /// Frees `p` (from `allocate`) in order on the exchange stream.
  void deallocate(void* p, std::size_t) noexcept {
    if (p != nullptr) {
      (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaFreeAsync(p, stream_));
    }
  }

  /// A fence at the current end of `s` (the caller's stream).
  void record(fence& f, stream_type s) {
    ensure(f);
    PACKSWAP_CUDA_TRY(cudaEventRecord(f.event_, s));
  }
  /// A fence at the current end of the exchange stream.
  void mark(fence& f) {
    ensure(f);
    PACKSWAP_CUDA_TRY(cudaEventRecord(f.event_, stream_));
  }
  /// Makes `s` wait for `f`.
  void wait_fence(fence& f, stream_type s) {
    if (f.event_ != nullptr) {
      PACKSWAP_CUDA_TRY(cudaStreamWaitEvent(s, f.event_, 0));
    }
  }
  /// Makes later exchange work wait for `f`.
  void start_after(fence& f) {
    if (f.event_ != nullptr) {
      PACKSWAP_CUDA_TRY(cudaStreamWaitEvent(stream_, f.event_, 0));
    }
  }

  // ---- CTA tuning, driven by the engine ----

  /// Marks the start of a micro-step's compute on the caller's stream.
  void compute_begin(stream_type s) {
    auto& sample = samples_[next_sample_];
    PACKSWAP_CUDA_TRY(cudaEventRecord(sample.begin, s));
    sample.pending = false;
  }
  /// Marks its end; the pair is read back later without blocking.
  void compute_end(stream_type s) {
    auto& sample = samples_[next_sample_];
    PACKSWAP_CUDA_TRY(cudaEventRecord(sample.end, s));
    sample.pending = true;
    next_sample_ = (next_sample_ + 1) % samples_.size();
  }
  /// The median compute time per micro-step over the samples finished since the last call, in
  /// nanoseconds; 0 when none finished. Never blocks.
  [[nodiscard]] std::int64_t compute_ns() {
    std::array<float, sample_count> ms{};
    std::size_t n = 0;
    for (auto& s : samples_) {
      if (s.pending && cudaEventQuery(s.end) == cudaSuccess) {
        float t = 0;
        if (cudaEventElapsedTime(&t, s.begin, s.end) == cudaSuccess) {
          ms[n++] = t;
        }
        s.pending = false;
      }
    }
    (void)cudaGetLastError(); // a query of an unfinished event is not an error to keep
    if (n == 0) {
      return 0;
    }
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(n / 2),
                     ms.begin() + static_cast<std::ptrdiff_t>(n));
    return static_cast<std::int64_t>(static_cast<double>(ms[n / 2]) * 1e6);
  }
  /// Called by the engine at the same point on every rank with the same numbers (the most bytes
  /// any rank moves in one micro-step, the least compute time any rank measured): under the
  /// `automatic` policy, re-splits the exchange communicator once with `choose_ctas` of them.
  /// The old communicator is kept until destruction (its last operations may still run).
  void tune(std::int64_t bytes, std::int64_t compute_ns) {
    if (opt_.ctas.kind != cta_policy::mode::automatic || tuned_ || compute_ns <= 0) {
      return;
    }
    tuned_ = true;
    const auto c = choose_ctas(bytes, compute_ns, opt_.ctas);
    if (c == ctas_) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_aborted_locked();
    communicator next = communicator::split(parent_, 0, rank_, config(c), setup_deadline());
    retired_.push_back(std::move(comm_));
    comm_ = std::move(next);
    ctas_ = c;
  }
  /// The CTA limit in force (0: NCCL's default).
  [[nodiscard]] std::int32_t ctas() const noexcept { return ctas_; }

 private:
  static constexpr std::size_t sample_count = 64;
  struct timing {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    bool pending = false;
  };

  static comm_config config(std::int32_t ctas) {
    comm_config c;
    c.blocking = false;
    c.min_ctas = ctas;
    c.max_ctas = ctas;
    return c;
  }

  deadline setup_deadline() const { return exchange_clock::now() + opt_.setup_timeout; }

  static void ensure(fence& f) {
    if (f.event_ == nullptr) {
      PACKSWAP_CUDA_TRY(cudaEventCreateWithFlags(&f.event_, cudaEventDisableTiming));
    }
  }

  void begin(request& req) {
    PACKSWAP_EXPECTS(!req.active_, errc::internal,
                     "rank " << rank_ << ": an NCCL transport request was started twice");
    ensure(req.done_);
  }

  void finish_start(request& req) {
    PACKSWAP_CUDA_TRY(cudaEventRecord(req.done_.event_, stream_));
    req.active_ = true;
  }

  void abort_locked(errc code, const std::string& message) noexcept {
    if (aborted_) {
      return;
    }
    aborted_ = true;
    abort_code_ = code;
    try {
      abort_message_ = message;
    } catch (...) {
      // Out of memory while failing: the code still goes out.
    }
    comm_.abort();
    for (auto& c : retired_) {
      c.abort();
    }
    // The aborted kernels exit; what else is queued (staging copies, frees, waits on the
    // caller's stream) runs out. Until then it may touch the buffers.
    const on_device here(device_);
    const deadline until = exchange_clock::now() + opt_.abort_timeout;
    packswap::detail::backoff pause;
    while (PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamQuery(stream_)) == cudaErrorNotReady &&
           exchange_clock::now() < until) {
      pause.pause();
    }
  }

  // Makes `device` current on this thread for its scope (abort and the stray check may come
  // from a thread that never chose a device, or chose another).
  class on_device {
   public:
    explicit on_device(int device) noexcept {
      had_ = PACKSWAP_CUDA_TRY_NOEXCEPT(cudaGetDevice(&before_)) == cudaSuccess;
      (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaSetDevice(device));
    }
    on_device(const on_device&) = delete;
    on_device& operator=(const on_device&) = delete;
    ~on_device() {
      if (had_) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaSetDevice(before_));
      }
    }

   private:
    int before_ = 0;
    bool had_ = false;
  };

  // Runs NCCL calls (under mutex_); a failure leaves a half-launched group or a communicator in an
  // unknown state, so it aborts the communicator before the error goes on.
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      abort_locked(errc::nccl, e.what());
      throw;
    }
  }

  void complete(request& req) {
    if (req.gather_ && !req.gather_out_.empty()) {
      std::memcpy(req.gather_out_.data(), req.pinned_, req.gather_out_.size());
    }
    for (auto& r : req.recvs_) {
      r.received = r.bytes; // NCCL receives exactly the posted count, or fails
    }
    req.active_ = false;
  }

  void check_async_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_aborted_locked();
    ncclResult_t state = ncclSuccess;
    PACKSWAP_NCCL_TRY(ncclCommGetAsyncError(comm_.get(), &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      throw nccl_error(state,
                       "rank " + std::to_string(rank_) + ": the exchange communicator failed: " +
                           ncclGetErrorString(state) + " (" + ncclGetLastError(comm_.get()) + ")");
    }
  }

  void throw_if_aborted_locked() const {
    if (aborted_) {
      PACKSWAP_FAIL(abort_code_, "rank " << rank_ << ": the exchange communicator was aborted: "
                                         << abort_message_);
    }
  }

  void release_resources() noexcept {
    comm_.reset();
    for (auto& c : retired_) {
      c.reset();
    }
    retired_.clear();
    for (auto& s : samples_) {
      if (s.begin != nullptr) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaEventDestroy(s.begin));
      }
      if (s.end != nullptr) {
        (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaEventDestroy(s.end));
      }
      s = timing{};
    }
    if (stream_ != nullptr) {
      (void)PACKSWAP_CUDA_TRY_NOEXCEPT(cudaStreamDestroy(stream_));
      stream_ = nullptr;
    }
  }

  communicator_ref parent_;
  transport_options opt_;
  std::int32_t rank_ = 0;
  std::int32_t size_ = 1;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  // Serializes every use of comm_: enqueueing and tuning (caller's thread) against the
  // asynchronous-error query and the abort (worker), which frees it.
  mutable std::mutex mutex_;
  communicator comm_;
  std::vector<communicator> retired_;
  std::int32_t ctas_ = 0;
  bool tuned_ = false;
  bool aborted_ = false;
  errc abort_code_ = errc::nccl;
  std::string abort_message_;
  std::array<timing, sample_count> samples_{};
  std::size_t next_sample_ = 0;
};

} // namespace packswap::nccl
