#pragma once
// Helpers shared by the exchange tests: deterministic payloads, ranks as threads, /proc readings.

#include <packswap/detail/prng.hpp>
#include <packswap/exchange/detail/wire.hpp>
#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/threads.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace packswap::test {

/// The payload of one pack: bytes derived from (seed, batch, rank, index), so any rank can
/// recompute what a pack must contain.
inline void fill_payload(std::vector<unsigned char>& out, std::uint64_t seed, std::int64_t batch,
                         std::int32_t rank, std::int32_t index, std::int64_t bytes) {
  out.resize(static_cast<std::size_t>(bytes));
  packswap::prng rng(seed ^ (static_cast<std::uint64_t>(batch) << 32) ^
                     (static_cast<std::uint64_t>(rank) << 16) ^ static_cast<std::uint64_t>(index));
  for (auto& b : out) {
    b = static_cast<unsigned char>(rng());
  }
}

/// One rank's packs of one global batch, with owned payloads.
struct rank_batch {
  std::vector<std::vector<unsigned char>> payloads;
  std::vector<packswap::local_pack> packs;
};

/// Random sizes in [min_bytes, max_bytes], about one in five of them zero when `min_bytes` is 0;
/// costs in [0, 1000].
inline void make_batch(rank_batch& out, std::uint64_t seed, std::int64_t batch, std::int32_t rank,
                       std::int64_t packs_per_rank, std::int64_t max_bytes,
                       std::int64_t min_bytes = 0) {
  packswap::prng rng(seed * 7919 + static_cast<std::uint64_t>(batch) * 104729 +
                     static_cast<std::uint64_t>(rank));
  out.payloads.resize(static_cast<std::size_t>(packs_per_rank));
  out.packs.resize(static_cast<std::size_t>(packs_per_rank));
  for (std::int64_t i = 0; i < packs_per_rank; ++i) {
    const std::int64_t bytes = min_bytes == 0 && rng.chance(1, 5)
                                   ? 0
                                   : rng.uniform(std::max<std::int64_t>(min_bytes, 1), max_bytes);
    auto& payload = out.payloads[static_cast<std::size_t>(i)];
    fill_payload(payload, seed, batch, rank, static_cast<std::int32_t>(i), bytes);
    out.packs[static_cast<std::size_t>(i)] =
        packswap::local_pack{rng.uniform(0, 1000), bytes, payload.data()};
  }
}

/// One rank's packs of `batches` global batches, as `make_batch` makes them.
inline std::vector<rank_batch> make_batches(std::uint64_t seed, std::int64_t batches,
                                            std::int32_t rank, std::int64_t packs_per_rank,
                                            std::int64_t max_bytes, std::int64_t min_bytes = 0) {
  std::vector<rank_batch> out(static_cast<std::size_t>(batches));
  for (std::int64_t k = 0; k < batches; ++k) {
    make_batch(out[static_cast<std::size_t>(k)], seed, k, rank, packs_per_rank, max_bytes,
               min_bytes);
  }
  return out;
}

/// The loop every test trains with: submit batch 0; then for each batch submit the next one first
/// (so its gather and solve overlap), acquire and release each micro-step, and call
/// `visit(k, m, cell, pack)` for every pack handed out.
template <class Engine, class Visit>
void train(Engine& e, const std::vector<rank_batch>& batches, std::int32_t ga, Visit&& visit) {
  e.submit(batches[0].packs);
  for (std::size_t k = 0; k < batches.size(); ++k) {
    if (k + 1 < batches.size()) {
      e.submit(batches[k + 1].packs);
    }
    for (std::int32_t m = 0; m < ga; ++m) {
      const packswap::micro_batch cell = e.acquire(m);
      for (const auto& p : cell.packs) {
        visit(static_cast<std::int64_t>(k), m, cell, p);
      }
      e.release(m);
    }
  }
}

/// One pack as a rank saw it handed out by `engine::acquire`.
struct delivery {
  std::int64_t batch = 0;
  std::int32_t pack = 0;
  std::int32_t rank = 0;
  std::int32_t micro_step = 0;
  bool intact = false;   ///< byte-identical to what its source rank submitted
  bool on_plan = false;  ///< the solution assigns it to exactly this (rank, micro-step)
  bool in_place = false; ///< kept packs are the submitter's own buffer, never a copy
};

/// Drives one rank of an engine over `batches` global batches of random packs (sizes in
/// [0, max_bytes], one in five empty), submitting each batch one ahead, and logs every pack it is
/// handed. The same driver runs on every transport.
template <class Transport>
std::vector<delivery> drive(Transport& t, const packswap::shape& s,
                            const packswap::engine_options& opt, std::int64_t batches,
                            std::uint64_t seed, std::int64_t max_bytes) {
  packswap::engine<Transport> e(t, s, opt);
  const std::int32_t r = t.rank();
  const auto mine = make_batches(seed, batches, r, s.packs_per_rank(), max_bytes);
  std::vector<delivery> log;
  std::vector<unsigned char> expect;
  train(e, mine, s.ga,
        [&](std::int64_t k, std::int32_t m, const packswap::micro_batch& cell,
            const packswap::pack_view& p) {
          fill_payload(expect, seed, k, p.source_rank, p.source_index, p.bytes);
          delivery d;
          d.batch = k;
          d.pack = p.pack;
          d.rank = r;
          d.micro_step = m;
          d.intact = p.bytes == static_cast<std::int64_t>(expect.size()) &&
                     (p.bytes == 0 || std::memcmp(p.data, expect.data(), expect.size()) == 0);
          const auto assigned = cell.solution->cells[static_cast<std::size_t>(p.pack)];
          d.on_plan = cell.batch == k && assigned.rank == r && assigned.micro_step == m;
          const auto& batch = mine[static_cast<std::size_t>(k)];
          const auto* own = p.source_rank == r
                                ? batch.packs[static_cast<std::size_t>(p.source_index)].data
                                : nullptr;
          // Kept packs are the submitter's own buffer; only packs of other ranks are received.
          d.in_place = p.kept ? (p.source_rank == r && p.data == own)
                              : (p.source_rank != r || opt.exchange_kept_packs);
          log.push_back(d);
        });
  return log;
}

/// How a run with an injected fault ended on one rank.
struct outcome {
  bool failed = false;
  packswap::errc code = packswap::errc::internal;
  std::string what;
  double seconds = 0; ///< from the start of the run to the error
  bool worker_running = true;
  std::int64_t buffer_bytes = -1;
  std::int64_t wrong_packs = 0; ///< handed out with the wrong length or bytes: must stay 0
  std::int64_t good_packs = 0;
};

/// Drives an engine on `t` over `batches` batches of non-empty packs (so that a data fault
/// always has something to damage), checking every pack it is handed, until the run ends or the
/// engine throws; then reads the engine's state after the error.
template <class Transport>
outcome drive_until_error(Transport& t, const packswap::shape& s,
                          const packswap::engine_options& opt, std::int64_t batches,
                          std::uint64_t seed, std::int64_t max_bytes) {
  packswap::engine<Transport> e(t, s, opt);
  const auto mine = make_batches(seed, batches, t.rank(), s.packs_per_rank(), max_bytes, 1);
  outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<unsigned char> expect;
  try {
    train(e, mine, s.ga,
          [&](std::int64_t k, std::int32_t, const packswap::micro_batch&,
              const packswap::pack_view& p) {
            fill_payload(expect, seed, k, p.source_rank, p.source_index, p.bytes);
            const bool same = p.bytes == static_cast<std::int64_t>(expect.size()) &&
                              std::memcmp(p.data, expect.data(), expect.size()) == 0;
            (same ? o.good_packs : o.wrong_packs) += 1;
          });
  } catch (const packswap::error& err) {
    o.failed = true;
    o.code = err.code();
    o.what = err.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto st = e.stats();
  o.worker_running = st.worker_running;
  o.buffer_bytes = st.buffer_bytes;
  return o;
}

/// Runs `f(rank)` on `n` threads and returns what each threw (null when nothing).
template <class F>
std::vector<std::exception_ptr> run_ranks(std::int32_t n, F f) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return errors;
}

/// Rethrows the first error of `run_ranks`, if any.
inline void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
}

/// The threads backend, except that the n-th wait (on the worker) or the n-th exchange start
/// (on the caller's thread) throws what `raise` throws.
struct throwing_transport : packswap::threads::transport {
  using packswap::threads::transport::transport;
  std::function<void()> raise;
  int wait_at = -1;
  int start_at = -1;
  bool wait(request& req, packswap::deadline until) {
    if (wait_at-- == 0) {
      raise();
    }
    return threads::transport::wait(req, until);
  }
  void start_exchange(request& req, packswap::span<const packswap::send_op> sends,
                      packswap::span<packswap::recv_op> recvs) {
    if (start_at-- == 0) {
      raise();
    }
    threads::transport::start_exchange(req, sends, recvs);
  }
};

/// What each of two ranks caught: the first exception, and what its next call threw.
struct two_failures {
  std::vector<std::exception_ptr> first{2};
  std::vector<std::exception_ptr> later{2};
};

/// Trains two ranks until they fail, rank 1's transport armed by `arm`.
inline two_failures fail_two_ranks(const std::function<void(throwing_transport&)>& arm) {
  packswap::threads::world world(2);
  two_failures out;
  rethrow_first(run_ranks(2, [&](std::int32_t r) {
    throwing_transport t(world, r);
    if (r == 1) {
      arm(t);
    }
    packswap::engine_options opt;
    opt.timeout = std::chrono::seconds(30);
    packswap::engine<throwing_transport> e(t, {2, 4, 1}, opt);
    const auto mine = make_batches(12, 3, r, 4, 2000);
    const auto i = static_cast<std::size_t>(r);
    try {
      train(e, mine, 4, [](auto&&...) {});
    } catch (...) {
      out.first[i] = std::current_exception();
      try {
        e.submit(mine[0].packs);
      } catch (...) {
        out.later[i] = std::current_exception();
      }
    }
  }));
  return out;
}

/// The `what()` of an exception.
inline std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "(not a std::exception)";
  }
}

/// The process's thread count, from /proc/self/status (0 where there is no /proc).
inline int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::stoi(line.substr(8));
    }
  }
  return 0;
}

/// The thread count once threads just joined have left it: join() returns when the thread has
/// woken its joiner, and the kernel may count it in /proc a moment longer (a thread created and
/// joined read as still there in 13 of 20,000 tries). The smallest count over 20 ms of polls: a
/// thread that stays (a leak) is still counted.
inline int settled_thread_count() {
  int least = thread_count();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    least = std::min(least, thread_count());
  }
  return least;
}

/// The thread count once a thread was created and joined: sanitizer runtimes start a helper
/// thread with the first thread a program creates, which must not count as a leak.
inline int baseline_thread_count() {
  std::thread([] {}).join();
  return settled_thread_count();
}

/// Resident set size in bytes, from /proc/self/statm (0 where there is no /proc).
inline std::int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  in >> size >> resident;
  return resident * 4096;
}

} // namespace packswap::test
