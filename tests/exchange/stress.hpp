#pragma once
// The randomized engine stress test, shared by its threads and MPI programs: one seeded
// configuration after another (shape, prefetch, pack sizes, delays, and at most one event: an
// abort, a watchdog's abort from another thread, an injected fault or a stop mid-flight), each
// rank checking every pack it is handed and freeing its payloads as early as the engine's
// lifetime rules allow. Payloads are overwritten just before they are freed, so that a transport
// still reading one delivers garbage (caught by the checksums or the content check) even where no
// sanitizer watches (another MPI process).

#include <packswap/detail/prng.hpp>
#include <packswap/exchange/engine.hpp>
#include <packswap/exchange/fault.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace packswap::stress {

/// What happens in one configuration besides training.
enum class event {
  none,     ///< every rank trains to the end
  abort,    ///< one rank calls engine::abort before one of its calls, frees everything, unwinds
  watchdog, ///< another thread of one rank calls engine::abort after a random time
  fault,    ///< one rank's transport injects a fault
  stop,     ///< every rank destroys its engine mid-flight at the same call
};

inline const char* name(event e) {
  switch (e) {
  case event::none:
    return "none";
  case event::abort:
    return "abort";
  case event::watchdog:
    return "watchdog";
  case event::fault:
    return "fault";
  case event::stop:
    return "stop";
  }
  return "?";
}

inline const char* name(fault_kind k) {
  switch (k) {
  case fault_kind::none:
    return "none";
  case fault_kind::fail:
    return "fail";
  case fault_kind::hang:
    return "hang";
  case fault_kind::short_data:
    return "short_data";
  case fault_kind::corrupt_data:
    return "corrupt_data";
  case fault_kind::alter_metadata:
    return "alter_metadata";
  }
  return "?";
}

/// One call of the training loop every rank makes.
struct call {
  enum kind_t { submit, acquire, release } kind = submit;
  std::int64_t batch = 0;
  std::int32_t micro_step = 0;
};

/// One randomized configuration: everything in it follows from (seed, index).
struct config {
  std::uint64_t seed = 0;
  std::int64_t index = 0;
  shape s{};
  engine_options opt{};
  std::int64_t batches = 0;            ///< including the last one, which no event comes after
  std::vector<std::int32_t> submit_at; ///< batch k + 1 is submitted before acquire(submit_at[k])
                                       ///< of batch k (ga: after its last release)
  std::vector<call> calls;             ///< the call sequence, the same on every rank
  std::int32_t zero_percent = 0;       ///< share of empty packs
  std::int64_t small_max = 0;          ///< most bytes of an ordinary pack
  std::int32_t large_packs = 0;        ///< packs of [large_max / 2, large_max] bytes
  std::int64_t large_max = 0;
  std::uint64_t large_key = 0;
  std::chrono::microseconds caller_pause{0}; ///< before calls and while "computing"
  std::int32_t caller_percent = 0;
  jitter transport_jitter{};
  std::chrono::microseconds copy_pause{0}; ///< threads transport: slow copies
  event what = event::none;
  std::int32_t event_rank = 0;
  std::int64_t event_call = 0; ///< abort or stop: before this call
  std::chrono::microseconds watchdog_after{0};
  fault injected{};
  bool free_before_destroy = true; ///< after an error: free payloads, then destroy the engine

  /// The index of the last batch's submit: aborts come before it, so that every other rank still
  /// needs the aborting one afterwards and must fail.
  std::int64_t last_submit() const {
    for (std::size_t i = calls.size(); i-- > 0;) {
      if (calls[i].kind == call::submit) {
        return static_cast<std::int64_t>(i);
      }
    }
    return 0;
  }

  std::string describe() const {
    std::ostringstream os;
    os << "config " << index << ": dp " << s.dp << " ga " << s.ga << " mbs " << s.mbs << " batches "
       << batches << " depth " << opt.prefetch_depth << " across " << opt.prefetch_across_batches
       << " kept-through " << opt.exchange_kept_packs << " checksums " << opt.verify_checksums
       << " zero% " << zero_percent << " small " << small_max << " large " << large_packs << "x"
       << large_max << " caller " << caller_pause.count() << "us@" << caller_percent
       << "% transport " << transport_jitter.max.count() << "us@" << transport_jitter.percent
       << "% copy " << copy_pause.count() << "us event " << name(what);
    if (what == event::abort || what == event::stop) {
      os << " rank " << event_rank << " call " << event_call;
    } else if (what == event::watchdog) {
      os << " rank " << event_rank << " after " << watchdog_after.count() << "us";
    } else if (what == event::fault) {
      os << " rank " << event_rank << " " << name(injected.kind) << " "
         << (injected.target == fault_target::exchange ? "exchange" : "all_gather") << " "
         << injected.at;
    }
    return os.str();
  }
};

/// Derives configuration `index` of the run seeded `seed`, with `dp` in [1, max_dp].
inline config make_config(std::uint64_t seed, std::int64_t index, std::int32_t max_dp) {
  prng rng(seed * 0x9e3779b97f4a7c15ULL +
           static_cast<std::uint64_t>(index) * 0xbf58476d1ce4e5b9ULL);
  config c;
  c.seed = seed;
  c.index = index;
  c.s.dp = static_cast<std::int32_t>(rng.uniform(1, max_dp));
  c.s.ga = static_cast<std::int32_t>(rng.chance(1, 4) ? rng.uniform(1, 3) : rng.uniform(1, 16));
  c.s.mbs = static_cast<std::int32_t>(rng.uniform(1, 3));
  c.batches = rng.uniform(2, 4);
  c.opt.prefetch_depth = static_cast<std::int32_t>(rng.uniform(1, 3));
  c.opt.prefetch_across_batches = rng.chance(1, 2);
  c.opt.exchange_kept_packs = rng.chance(1, 8);
  c.opt.verify_checksums = !rng.chance(1, 8);
  c.opt.timeout = std::chrono::seconds(60);
  c.zero_percent = static_cast<std::int32_t>(rng.uniform(0, 3) * 15);
  c.small_max = rng.chance(1, 3) ? 64 : rng.uniform(1, 64) * 1024;
  if (rng.chance(1, 2)) {
    c.large_packs = static_cast<std::int32_t>(rng.uniform(1, 6));
    c.large_max = std::int64_t{1} << rng.uniform(18, 22); // 256 KiB to 4 MiB
    c.large_key = rng();
  }
  if (rng.chance(2, 3)) {
    c.caller_pause = std::chrono::microseconds(rng.uniform(1, 2000));
    c.caller_percent = static_cast<std::int32_t>(rng.uniform(5, 40));
  }
  if (rng.chance(2, 3)) {
    c.transport_jitter = jitter{std::chrono::microseconds(rng.uniform(1, 2000)),
                                static_cast<std::int32_t>(rng.uniform(5, 50)), rng()};
  }
  if (rng.chance(1, 2)) {
    c.copy_pause = std::chrono::microseconds(rng.uniform(1, 3000));
  }
  // The call sequence: batch k + 1 is submitted at a random point of batch k, the same point on
  // every rank (the engine starts operations at points fixed by the calls).
  c.submit_at.resize(static_cast<std::size_t>(c.batches));
  for (auto& at : c.submit_at) {
    at = static_cast<std::int32_t>(rng.uniform(0, c.s.ga));
  }
  c.calls.push_back(call{call::submit, 0, 0});
  for (std::int64_t k = 0; k < c.batches; ++k) {
    const bool next = k + 1 < c.batches;
    const auto at = c.submit_at[static_cast<std::size_t>(k)];
    for (std::int32_t m = 0; m < c.s.ga; ++m) {
      if (next && at == m) {
        c.calls.push_back(call{call::submit, k + 1, 0});
      }
      c.calls.push_back(call{call::acquire, k, m});
      c.calls.push_back(call{call::release, k, m});
    }
    if (next && at == c.s.ga) {
      c.calls.push_back(call{call::submit, k + 1, 0});
    }
  }
  const auto roll = rng.uniform(0, 99);
  c.event_rank = static_cast<std::int32_t>(rng.uniform(0, c.s.dp - 1));
  c.free_before_destroy = rng.chance(3, 4);
  if (roll < 40) {
    c.what = event::none;
  } else if (roll < 65) {
    c.what = event::abort;
    c.event_call = rng.uniform(0, c.last_submit() - 1 < 0 ? 0 : c.last_submit() - 1);
  } else if (roll < 75) {
    c.what = event::watchdog;
    c.watchdog_after = std::chrono::microseconds(rng.uniform(0, 30000));
  } else if (roll < 92) {
    c.what = event::fault;
    const auto f = rng.uniform(0, 9);
    c.injected.kind = f < 4   ? fault_kind::fail
                      : f < 6 ? fault_kind::corrupt_data
                      : f < 8 ? fault_kind::short_data
                      : f < 9 ? fault_kind::alter_metadata
                              : fault_kind::hang;
    if (c.injected.kind == fault_kind::alter_metadata && c.s.dp == 1) {
      c.injected.kind = fault_kind::fail; // one rank cannot disagree with itself
    }
    if (c.injected.kind == fault_kind::corrupt_data) {
      c.opt.verify_checksums = true; // without checksums nothing can catch it
    }
    c.injected.target = c.injected.kind == fault_kind::alter_metadata ||
                                (c.injected.kind != fault_kind::short_data &&
                                 c.injected.kind != fault_kind::corrupt_data && rng.chance(1, 4))
                            ? fault_target::all_gather
                            : fault_target::exchange;
    c.injected.at = c.injected.target == fault_target::exchange
                        ? rng.uniform(0, (c.batches - 1) * c.s.ga - 1)
                        : rng.uniform(0, 2 * (c.batches - 1) - 1);
    if (c.injected.kind == fault_kind::hang) {
      // Every rank waits for its deadline: keep it short, and the world small enough that an
      // ordinary operation never takes that long on a loaded machine under a sanitizer.
      c.s.dp = std::min<std::int32_t>(c.s.dp, 4);
      c.event_rank %= c.s.dp;
      c.opt.timeout = std::chrono::milliseconds(1500);
    }
  } else {
    c.what = event::stop;
    c.event_call = rng.uniform(0, static_cast<std::int64_t>(c.calls.size()));
  }
  return c;
}

/// A well-mixed function of one 64-bit word (one SplitMix64 step).
inline std::uint64_t mix(std::uint64_t x) {
  return packswap::detail::splitmix64(x);
}

/// The identity of one pack's payload.
inline std::uint64_t pack_key(const config& c, std::int64_t batch, std::int32_t rank,
                              std::int64_t index) {
  return mix(c.seed ^
             mix(static_cast<std::uint64_t>(c.index) * 1000003 +
                 static_cast<std::uint64_t>(batch) * 7919) ^
             mix(static_cast<std::uint64_t>(rank) * 0x9e3779b97f4a7c15ULL ^
                 mix(static_cast<std::uint64_t>(index))));
}

/// The size of a pack, which every rank can compute.
inline std::int64_t pack_bytes(const config& c, std::int64_t batch, std::int32_t rank,
                               std::int64_t index) {
  const std::uint64_t key = pack_key(c, batch, rank, index);
  // The large packs: `large_packs` positions drawn from `large_key` over the whole run.
  const std::int64_t ppr = c.s.packs_per_rank();
  const std::int64_t total = ppr * c.s.dp * c.batches;
  const std::int64_t id = (batch * c.s.dp + rank) * ppr + index;
  for (std::int32_t i = 0; i < c.large_packs; ++i) {
    const std::uint64_t h = mix(c.large_key + static_cast<std::uint64_t>(i));
    if (static_cast<std::int64_t>(h % static_cast<std::uint64_t>(total)) == id) {
      return c.large_max / 2 +
             static_cast<std::int64_t>(mix(h) % static_cast<std::uint64_t>(c.large_max / 2 + 1));
    }
  }
  if (static_cast<std::int32_t>(key % 100) < c.zero_percent) {
    return 0;
  }
  return 1 + static_cast<std::int64_t>(mix(key) % static_cast<std::uint64_t>(c.small_max));
}

/// Writes the payload of a pack.
inline void fill(unsigned char* out, std::int64_t bytes, std::uint64_t key) {
  std::int64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t w = mix(key + static_cast<std::uint64_t>(i));
    std::memcpy(out + i, &w, 8);
  }
  if (i < bytes) {
    const std::uint64_t w = mix(key + static_cast<std::uint64_t>(i));
    std::memcpy(out + i, &w, static_cast<std::size_t>(bytes - i));
  }
}

/// True when `data` holds the payload of a pack.
inline bool intact(const void* data, std::int64_t bytes, std::uint64_t key) {
  const auto* in = static_cast<const unsigned char*>(data);
  std::int64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t w = mix(key + static_cast<std::uint64_t>(i));
    if (std::memcmp(in + i, &w, 8) != 0) {
      return false;
    }
  }
  if (i < bytes) {
    const std::uint64_t w = mix(key + static_cast<std::uint64_t>(i));
    return std::memcmp(in + i, &w, static_cast<std::size_t>(bytes - i)) == 0;
  }
  return true;
}

/// One rank's payloads of one batch, each in its own heap block.
struct payloads {
  std::vector<std::unique_ptr<unsigned char[]>> blocks;
  std::vector<local_pack> packs;

  void make(const config& c, std::int64_t batch, std::int32_t rank) {
    const std::int64_t ppr = c.s.packs_per_rank();
    blocks.resize(static_cast<std::size_t>(ppr));
    packs.resize(static_cast<std::size_t>(ppr));
    // Skewed costs, as a loader's shard gives them: some ranks hold many heavy packs (more than
    // one micro-step's worth), so that balancing moves packs between ranks; uniform costs let most
    // batches balance in place, and the test would exercise little but kept packs.
    prng costs(pack_key(c, batch, rank, -1));
    const std::int64_t heavy_percent = costs.chance(3, 4) ? 0 : costs.uniform(60, 100);
    for (std::int64_t i = 0; i < ppr; ++i) {
      const std::int64_t bytes = pack_bytes(c, batch, rank, i);
      auto& block = blocks[static_cast<std::size_t>(i)];
      if (bytes > 0) {
        block.reset(new unsigned char[static_cast<std::size_t>(bytes)]);
        fill(block.get(), bytes, pack_key(c, batch, rank, i));
      }
      const std::int64_t cost =
          costs.uniform(0, 1000) *
          (costs.chance(static_cast<std::uint64_t>(heavy_percent), 100) ? 20 : 1);
      packs[static_cast<std::size_t>(i)] = local_pack{cost, bytes, block.get()};
    }
  }

  /// Overwrites, then frees: a transport still reading delivers garbage, a sanitizer reports it.
  void free() {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i]) {
        std::memset(blocks[i].get(), 0xa5, static_cast<std::size_t>(packs[i].bytes));
        blocks[i].reset();
      }
    }
    blocks.clear();
    packs.clear();
  }
};

/// How one rank's run of one configuration ended.
struct rank_result {
  bool failed = false;
  errc code = errc::internal;
  std::string what;
  std::int64_t acquired = 0;           ///< micro-steps handed out
  std::int64_t packs = 0;              ///< packs checked
  std::vector<std::string> violations; ///< anything wrong: must stay empty
  bool fault_fired = false;
};

namespace detail {

inline void pause(prng& rng, const config& c) {
  if (c.caller_pause.count() > 0 && rng.chance(static_cast<std::uint64_t>(c.caller_percent), 100)) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng.uniform(0, c.caller_pause.count())));
  }
}

// Checks a handed-out cell against the solution: exactly the packs assigned to (rank, m), in
// ascending id order, each byte for byte what its source submitted; kept packs in place.
inline void check_cell(const config& c, std::int32_t rank, const call& at, const micro_batch& cell,
                       const std::vector<payloads>& mine, rank_result& out) {
  const auto bad = [&](const std::string& what) {
    if (out.violations.size() < 8) {
      std::ostringstream os;
      os << "rank " << rank << ", batch " << at.batch << ", micro-step " << at.micro_step << ": "
         << what;
      out.violations.push_back(os.str());
    }
  };
  if (cell.batch != at.batch || cell.micro_step != at.micro_step || cell.solution == nullptr) {
    bad("the cell is labelled batch " + std::to_string(cell.batch) + ", micro-step " +
        std::to_string(cell.micro_step));
    return;
  }
  const auto& cells = cell.solution->cells;
  std::vector<std::int32_t> expected;
  for (std::size_t id = 0; id < cells.size(); ++id) {
    if (cells[id].rank == rank && cells[id].micro_step == at.micro_step) {
      expected.push_back(static_cast<std::int32_t>(id));
    }
  }
  if (static_cast<std::int32_t>(expected.size()) != c.s.mbs ||
      cell.packs.size() != expected.size()) {
    bad("the cell has " + std::to_string(cell.packs.size()) + " packs, the solution assigns " +
        std::to_string(expected.size()) + ", mbs is " + std::to_string(c.s.mbs));
    return;
  }
  const std::int64_t ppr = c.s.packs_per_rank();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const pack_view& p = cell.packs[i];
    ++out.packs;
    if (p.pack != expected[i]) {
      bad("pack " + std::to_string(p.pack) + " where the solution has " +
          std::to_string(expected[i]));
      continue;
    }
    const auto src = static_cast<std::int32_t>(p.pack / ppr);
    const std::int64_t index = p.pack % ppr;
    if (p.source_rank != src || p.source_index != index) {
      bad("pack " + std::to_string(p.pack) + " names source " + std::to_string(p.source_rank) +
          "/" + std::to_string(p.source_index));
      continue;
    }
    const std::int64_t bytes = pack_bytes(c, at.batch, src, index);
    if (p.bytes != bytes || (bytes > 0 && p.data == nullptr) ||
        !intact(p.data, bytes, pack_key(c, at.batch, src, index))) {
      bad("pack " + std::to_string(p.pack) + " from rank " + std::to_string(src) + " (" +
          std::to_string(p.bytes) + " bytes handed out, " + std::to_string(bytes) +
          " submitted) is not what its source submitted");
      continue;
    }
    const bool keep = src == rank && !c.opt.exchange_kept_packs;
    const auto& own = mine[static_cast<std::size_t>(at.batch)];
    if (p.kept != keep || (keep && p.data != own.packs[static_cast<std::size_t>(index)].data)) {
      bad("pack " + std::to_string(p.pack) + " is " + (p.kept ? "" : "not ") +
          "marked kept, or a kept pack is not the submitted buffer");
    }
  }
}

} // namespace detail

/// Runs one rank of configuration `c` on `inner` (rank `rank` of a world of `c.s.dp`). Frees each
/// batch's payloads right after its last release; after abort() returns and after an error reaches
/// the caller it frees everything at once, before or after destroying the engine.
template <class Inner>
rank_result run_rank(const config& c, Inner& inner, std::int32_t rank) {
  using transport = fault_injecting_transport<Inner>;
  const bool faulty = c.what == event::fault && rank == c.event_rank;
  jitter j = c.transport_jitter;
  j.seed ^= static_cast<std::uint64_t>(rank) * 0x2545f4914f6cdd1dULL;
  transport t(inner, faulty ? c.injected : fault{}, j);
  rank_result out;
  std::vector<payloads> mine(static_cast<std::size_t>(c.batches));
  const auto free_all = [&] {
    for (auto& p : mine) {
      p.free();
    }
  };
  prng rng(pack_key(c, -2, rank, -2));
  std::optional<engine<transport>> e;
  e.emplace(t, c.s, c.opt);
  std::thread watchdog;
  if (c.what == event::watchdog && rank == c.event_rank) {
    watchdog = std::thread([&] {
      std::this_thread::sleep_for(c.watchdog_after);
      e->abort("the watchdog fired");
    });
  }
  const std::int64_t stop = c.what == event::stop ? c.event_call : -1;
  const std::int64_t abort_at = c.what == event::abort && rank == c.event_rank ? c.event_call : -1;
  bool aborted = false;
  try {
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(c.calls.size()); ++i) {
      if (i == stop) {
        break;
      }
      detail::pause(rng, c);
      if (i == abort_at) {
        e->abort("the stress test gave up");
        aborted = true;
        free_all(); // allowed the moment abort() returns
      }
      const call& at = c.calls[static_cast<std::size_t>(i)];
      if (at.kind == call::submit) {
        auto& p = mine[static_cast<std::size_t>(at.batch)];
        if (!aborted) {
          p.make(c, at.batch, rank);
        }
        e->submit(p.packs);
      } else if (at.kind == call::acquire) {
        const micro_batch cell = e->acquire(at.micro_step);
        ++out.acquired;
        detail::check_cell(c, rank, at, cell, mine, out);
        detail::pause(rng, c); // compute
      } else {
        e->release(at.micro_step);
        if (at.micro_step == c.s.ga - 1) {
          mine[static_cast<std::size_t>(at.batch)].free(); // the batch's last release
        }
      }
    }
    if (aborted) {
      out.violations.push_back("rank " + std::to_string(rank) +
                               ": every call after its abort() returned normally");
    }
  } catch (const error& err) {
    out.failed = true;
    out.code = err.code();
    out.what = err.what();
    if (c.free_before_destroy) {
      free_all(); // allowed once an error reached the caller
    }
    const auto st = e->stats();
    if (st.stray_operations != 0) {
      out.violations.push_back("rank " + std::to_string(rank) + ": " +
                               std::to_string(st.stray_operations) +
                               " operations could not be stopped after the error");
    }
    if (st.worker_running || st.buffer_bytes != 0) {
      out.violations.push_back("rank " + std::to_string(rank) + ": after the error the worker " +
                               (st.worker_running ? "still runs" : "was joined") + " and " +
                               std::to_string(st.buffer_bytes) + " buffer bytes are held");
    }
  } catch (const std::exception& other) {
    out.violations.push_back("rank " + std::to_string(rank) +
                             ": an exception that is not a packswap::error: " + other.what());
  }
  if (watchdog.joinable()) {
    watchdog.join();
  }
  out.fault_fired = t.fired();
  e.reset();
  free_all();
  return out;
}

/// Checks how the ranks of configuration `c` ended, as far as `results` (the ranks `ranks`, all
/// of them or this process's) show; `fired`: the injected fault fired on its rank. Returns what is
/// wrong.
inline std::vector<std::string> judge(const config& c, const std::vector<rank_result>& results,
                                      const std::vector<std::int32_t>& ranks, bool fired) {
  std::vector<std::string> wrong;
  for (const auto& r : results) {
    wrong.insert(wrong.end(), r.violations.begin(), r.violations.end());
  }
  const auto code_set = [&](errc code) {
    switch (c.injected.kind) {
    case fault_kind::fail:
      return code == errc::transport;
    case fault_kind::hang:
      return code == errc::timeout;
    default:
      return code == errc::mismatch;
    }
  };
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const std::int32_t rank = ranks[i];
    const std::string who = "rank " + std::to_string(rank) + ": ";
    const std::int64_t steps = c.batches * c.s.ga;
    switch (c.what) {
    case event::none:
      if (r.failed || r.acquired != steps) {
        wrong.push_back(who + "did not train to the end: " + r.what);
      }
      break;
    case event::stop:
      // A transport that cannot withdraw an operation (MPI, NCCL) aborts when an engine is
      // destroyed with one in flight; a rank still inside its last call then fails with that.
      if (r.failed && (r.code != errc::cancelled ||
                       r.what.find("stopped with an exchange in flight") == std::string::npos)) {
        wrong.push_back(who + "failed though every rank stopped at the same call: " + r.what);
      }
      break;
    case event::abort:
      // The abort comes before the last batch's submit, which needs every rank: all must fail,
      // with the aborting rank's code and message.
      if (!r.failed || r.code != errc::cancelled ||
          r.what.find("rank " + std::to_string(c.event_rank) + " gave up") == std::string::npos) {
        wrong.push_back(who + "after rank " + std::to_string(c.event_rank) +
                        " aborted: " + (r.failed ? r.what : std::string("no error")));
      }
      break;
    case event::watchdog:
      // The watchdog may fire after the training ended: an error is then not required.
      if (r.failed && r.code != errc::cancelled) {
        wrong.push_back(who + "after the watchdog's abort: " + r.what);
      }
      if (!r.failed && r.acquired != steps) {
        wrong.push_back(who + "stopped early without an error");
      }
      break;
    case event::fault:
      if (r.failed && !code_set(r.code)) {
        wrong.push_back(who + "the " + name(c.injected.kind) + " fault ended in " + r.what);
      }
      if (!r.failed && r.acquired != steps) {
        wrong.push_back(who + "stopped early without an error");
      }
      if (fired && c.injected.kind != fault_kind::short_data &&
          c.injected.kind != fault_kind::corrupt_data && !r.failed) {
        // Operation faults come before the last batch's end, which needs every rank.
        wrong.push_back(who + "trained to the end though the " + name(c.injected.kind) +
                        " fault fired");
      }
      break;
    }
  }
  return wrong;
}

/// The command-line options of both stress programs.
struct options {
  double seconds = 10;
  std::uint64_t seed = 0;
  std::int64_t first = 0;
  std::int64_t count = -1; ///< -1: as many as the time allows
  std::int32_t max_dp = 12;
  bool verbose = false;
};

inline options parse(int argc, char** argv, const char* program) {
  options o;
  o.seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() %
                                      1000000007);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--seed") {
      o.seed = std::stoull(value());
    } else if (a == "--first") {
      o.first = std::stoll(value());
    } else if (a == "--count") {
      o.count = std::stoll(value());
    } else if (a == "--max-dp") {
      o.max_dp = static_cast<std::int32_t>(std::stol(value()));
    } else if (a == "--verbose") {
      o.verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--seed N] [--first I] [--count N] [--max-dp D] "
                   "[--verbose]\n"
                   "Runs randomized engine configurations derived from the seed, for S seconds "
                   "or N configurations from index I.\n",
                   program);
      std::exit(2);
    }
  }
  return o;
}

} // namespace packswap::stress
