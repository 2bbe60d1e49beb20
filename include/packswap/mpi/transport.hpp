#pragma once

#include "packswap/detail/span.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/gather.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/transport.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace packswap {

/// The MPI backend: ranks are MPI processes, buffers are host memory. This is how CI runs the
/// real multi-process protocol (`mpirun -np N`).
///
/// ```
/// int provided = 0;
/// MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
/// {
///   packswap::mpi_transport t(MPI_COMM_WORLD);         // duplicates the communicator
///   packswap::engine<packswap::mpi_transport> e(t, {world_size, ga});
///   ...
/// }                                                     // before MPI_Finalize
/// MPI_Finalize();
/// ```
///
/// It owns a duplicate of the communicator it is given, so exchange traffic never matches the
/// caller's own messages; destroy it before `MPI_Finalize`. It needs `MPI_THREAD_MULTIPLE`: the
/// engine's caller thread starts operations while its worker waits. Operations are nonblocking
/// point-to-point messages (an all-gather too, so that every pending receive can be cancelled);
/// payloads over 1 GiB go in 1 GiB pieces. An `abort` sends a notice to every other rank, and a
/// waiting rank that finds one fails with the aborting rank's code and message.
///
/// Thread-safety: see `packswap/exchange/transport.hpp`.
class mpi_transport : public detail::host_transport_base {
 public:
  /// A completion handle; reused by later operations once complete or cancelled.
  class request {
   public:
    request() = default;
    request(const request&) = delete;
    request& operator=(const request&) = delete;

   private:
    friend class mpi_transport;
    std::vector<MPI_Request> handles_;
    std::vector<std::int64_t> owner_; // per handle: index of its recv_op, or -1 for a send
    std::vector<MPI_Status> statuses_;
    span<recv_op> recvs_;
    bool active_ = false;
    std::vector<send_op> gather_sends_;
    std::vector<recv_op> gather_recvs_;
    bool gather_ = false;
  };

  /// Duplicates `parent`. Throws `errc::invalid_argument` unless MPI was initialized with
  /// `MPI_THREAD_MULTIPLE`, `errc::transport` when MPI fails.
  explicit mpi_transport(MPI_Comm parent) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    PACKSWAP_EXPECTS(initialized != 0, errc::invalid_argument,
                     "mpi_transport needs MPI to be initialized (MPI_Init_thread)");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    PACKSWAP_EXPECTS(level == MPI_THREAD_MULTIPLE, errc::invalid_argument,
                     "mpi_transport needs MPI_THREAD_MULTIPLE (the engine's worker waits while its "
                     "caller starts operations), MPI provides thread level "
                         << level);
    check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    // Errors come back as codes and become packswap errors, instead of killing the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;

  /// Frees the duplicated communicator (unless MPI was already finalized). A communicator that
  /// saw an abort or a cancellation is left allocated instead: messages to it may still be in
  /// flight, and MPI reuses a freed communicator's context for the next one, where they would
  /// match.
  ~mpi_transport() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) {
      for (auto& h : notices_) {
        if (h != MPI_REQUEST_NULL) {
          MPI_Request_free(&h);
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (!aborted_ && !cancelled_) {
        MPI_Comm_free(&comm_);
      }
    }
  }

  /// This rank.
  std::int32_t rank() const noexcept { return rank_; }
  /// The number of ranks.
  std::int32_t size() const noexcept { return size_; }

  /// Starts gathering `mine` from every rank into `all` (rank r's block at `r * mine.size()`).
  void start_all_gather(request& req, span<const std::byte> mine, span<std::byte> all) {
    detail::gather_as_p2p(rank_, size_, mine, all, req.gather_sends_, req.gather_recvs_);
    start(req, req.gather_sends_, req.gather_recvs_, gather_tag);
    req.gather_ = true;
  }

  /// Starts a group of sends and receives.
  void start_exchange(request& req, span<const send_op> sends, span<recv_op> recvs) {
    start(req, sends, recvs, data_tag);
    req.gather_ = false;
  }

  /// Polls `req` (and abort notices) until it completes or the deadline passes.
  bool wait(request& req, deadline until) {
    detail::backoff pause;
    for (;;) {
      throw_if_aborted();
      poll_notices();
      if (!req.active_) {
        return true;
      }
      int done = 0;
      req.statuses_.resize(req.handles_.size());
      const int rc = MPI_Testall(static_cast<int>(req.handles_.size()), req.handles_.data(), &done,
                                 req.statuses_.data());
      if (rc != MPI_SUCCESS) {
        fail_from_statuses(req, rc);
      }
      if (done != 0) {
        finish(req);
        return true;
      }
      if (exchange_clock::now() >= until) {
        return false;
      }
      pause.pause();
    }
  }

  /// Withdraws `req`: receives are cancelled and completed, unmatched sends are cancelled or
  /// released to MPI (their buffers are the caller's payloads, which MPI no longer needs once the
  /// receiving side cancelled too).
  void cancel(request& req) noexcept {
    if (!req.active_) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    for (std::size_t i = 0; i < req.handles_.size(); ++i) {
      MPI_Request& h = req.handles_[i];
      if (h == MPI_REQUEST_NULL) {
        continue;
      }
      MPI_Cancel(&h);
      if (req.owner_[i] >= 0) {
        MPI_Wait(&h, MPI_STATUS_IGNORE); // a cancelled receive always completes
      } else {
        int done = 0;
        MPI_Test(&h, &done, MPI_STATUS_IGNORE);
        if (done == 0) {
          MPI_Request_free(&h);
        }
      }
    }
    req.active_ = false;
  }

  /// Fails every later operation here and sends a notice to every other rank, whose next wait
  /// fails with `code` and this message.
  void abort(errc code, const std::string& message) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) {
      return;
    }
    aborted_ = true;
    abort_rank_ = rank_;
    abort_code_ = code;
    try {
      abort_message_ = message;
      notice_.resize(8 + message.size());
      detail::put_u64(notice_.data(), static_cast<std::uint64_t>(code));
      std::copy(message.begin(), message.end(), reinterpret_cast<char*>(notice_.data() + 8));
      notices_.assign(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    } catch (...) {
      return; // out of memory: this rank fails; the others see their deadline pass
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) {
        MPI_Isend(notice_.data(), static_cast<int>(notice_.size()), MPI_BYTE, r, abort_tag, comm_,
                  &notices_[static_cast<std::size_t>(r)]);
      }
    }
    // Notices are small (eager) and normally complete at once; give them a moment to leave.
    const auto until = exchange_clock::now() + std::chrono::milliseconds(100);
    int done = 0;
    while (done == 0 && exchange_clock::now() < until) {
      MPI_Testall(size_, notices_.data(), &done, MPI_STATUSES_IGNORE);
      if (done == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

 private:
  static constexpr int data_tag = 1;
  static constexpr int gather_tag = 2;
  static constexpr int abort_tag = 3;
  static constexpr std::int64_t piece = std::int64_t{1} << 30;

  void check(int rc, const char* what) const {
    if (rc != MPI_SUCCESS) {
      PACKSWAP_FAIL(errc::transport,
                    "rank " << rank_ << ": " << what << " failed: " << error_string(rc));
    }
  }

  static std::string error_string(int rc) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return std::string(text, static_cast<std::size_t>(len));
  }

  static std::int64_t pieces(std::int64_t bytes) {
    return bytes <= 0 ? 1 : (bytes + piece - 1) / piece;
  }

  void start(request& req, span<const send_op> sends, span<recv_op> recvs, int tag) {
    PACKSWAP_EXPECTS(!req.active_, errc::internal,
                     "rank " << rank_ << ": an mpi_transport request was started twice");
    throw_if_aborted();
    req.handles_.clear();
    req.owner_.clear();
    req.recvs_ = recvs;
    req.active_ = true;
    try {
      for (std::size_t i = 0; i < recvs.size(); ++i) {
        auto& r = recvs[i];
        check_peer(r.peer);
        r.received = 0;
        auto* base = static_cast<char*>(r.data);
        for (std::int64_t p = 0; p < pieces(r.bytes); ++p) {
          const auto n = static_cast<int>(std::min(piece, r.bytes - p * piece));
          req.handles_.push_back(MPI_REQUEST_NULL);
          req.owner_.push_back(static_cast<std::int64_t>(i));
          check(MPI_Irecv(base == nullptr ? nullptr : base + p * piece, std::max(n, 0), MPI_BYTE,
                          r.peer, tag, comm_, &req.handles_.back()),
                "MPI_Irecv");
        }
      }
      for (const auto& s : sends) {
        check_peer(s.peer);
        const auto* base = static_cast<const char*>(s.data);
        for (std::int64_t p = 0; p < pieces(s.bytes); ++p) {
          const auto n = static_cast<int>(std::min(piece, s.bytes - p * piece));
          req.handles_.push_back(MPI_REQUEST_NULL);
          req.owner_.push_back(-1);
          check(MPI_Isend(base == nullptr ? nullptr : base + p * piece, std::max(n, 0), MPI_BYTE,
                          s.peer, tag, comm_, &req.handles_.back()),
                "MPI_Isend");
        }
      }
    } catch (...) {
      cancel(req); // a start that fails leaves nothing posted
      throw;
    }
  }

  void check_peer(std::int32_t peer) const {
    PACKSWAP_EXPECTS(peer >= 0 && peer < size_, errc::invalid_argument,
                     "rank " << rank_ << ": peer " << peer << " is outside a communicator of "
                             << size_ << " ranks");
  }

  void finish(request& req) {
    for (std::size_t i = 0; i < req.owner_.size(); ++i) {
      if (req.owner_[i] >= 0) {
        int n = 0;
        MPI_Get_count(&req.statuses_[i], MPI_BYTE, &n);
        req.recvs_[static_cast<std::size_t>(req.owner_[i])].received += n;
      }
    }
    req.active_ = false;
    if (req.gather_) {
      detail::check_gathered(req.gather_recvs_, rank_);
    }
  }

  [[noreturn]] void fail_from_statuses(request& req, int rc) {
    for (std::size_t i = 0; i < req.statuses_.size(); ++i) {
      const int e = req.statuses_[i].MPI_ERROR;
      if (rc == MPI_ERR_IN_STATUS && e != MPI_SUCCESS && e != MPI_ERR_PENDING) {
        const bool recv = req.owner_[i] >= 0;
        const auto& op = recv ? req.recvs_[static_cast<std::size_t>(req.owner_[i])] : recv_op{};
        int error_class = 0;
        MPI_Error_class(e, &error_class);
        PACKSWAP_FAIL(error_class == MPI_ERR_TRUNCATE ? errc::mismatch : errc::transport,
                      "rank " << rank_ << ": "
                              << (recv ? "a receive from rank " + std::to_string(op.peer) + " (" +
                                             std::to_string(op.bytes) + " bytes expected)"
                                       : std::string("a send"))
                              << " failed: " << error_string(e));
      }
    }
    PACKSWAP_FAIL(errc::transport,
                  "rank " << rank_ << ": MPI_Testall failed: " << error_string(rc));
  }

  void throw_if_aborted() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) {
      PACKSWAP_FAIL(abort_code_,
                    "rank " << abort_rank_ << " aborted the exchange: " << abort_message_);
    }
  }

  // A notice from a rank that aborted. Matched probe and receive, so that two threads polling at
  // once never receive the same notice.
  void poll_notices() {
    int found = 0;
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, abort_tag, comm_, &found, &msg, &status);
    if (found == 0) {
      return;
    }
    int n = 0;
    MPI_Get_count(&status, MPI_BYTE, &n);
    std::vector<std::byte> text(static_cast<std::size_t>(std::max(n, 8)));
    MPI_Mrecv(text.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!aborted_) {
        aborted_ = true;
        abort_rank_ = status.MPI_SOURCE;
        const auto code = detail::get_u64(text.data());
        abort_code_ = code >= 1 && code <= static_cast<std::uint64_t>(errc::internal)
                          ? static_cast<errc>(code)
                          : errc::transport;
        abort_message_.assign(reinterpret_cast<const char*>(text.data() + 8),
                              static_cast<std::size_t>(std::max(n - 8, 0)));
      }
    }
    throw_if_aborted();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::mutex mutex_;
  bool aborted_ = false;
  bool cancelled_ = false;
  int abort_rank_ = -1;
  errc abort_code_ = errc::transport;
  std::string abort_message_;
  std::vector<std::byte> notice_;
  std::vector<MPI_Request> notices_;
};

} // namespace packswap
