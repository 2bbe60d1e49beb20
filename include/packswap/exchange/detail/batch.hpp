#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/digest.hpp"
#include "packswap/error.hpp"
#include "packswap/exchange/detail/wire.hpp"
#include "packswap/exchange/micro_batch.hpp"
#include "packswap/exchange/transport.hpp"
#include "packswap/solve.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <vector>

namespace packswap::detail {

/// One global batch on one rank, from `submit` to the release of its last micro-step: what this
/// rank sent and gathered, the solution, and what the worker decided. Sized once, reused.
struct batch_state {
  static constexpr std::size_t digest_block = 16; ///< metadata digest, plan digest

  std::int64_t index = -1;
  std::vector<local_pack> local; ///< this rank's packs as submitted
  std::vector<std::byte> gather_mine, gather_all;
  std::vector<pack_meta> packs;    ///< every rank's packs, by pack id
  std::vector<std::uint64_t> sums; ///< their payload checksums
  std::vector<bool> checksummed;   ///< per rank: its sums are real
  packswap::solution sol;
  std::vector<std::byte> digest_mine, digest_all;
  std::int64_t tune_bytes = 0; ///< the most bytes any rank moves in one micro-step
  std::int64_t tune_ns = 0;    ///< the least compute time any rank measured (0: none)
  std::int64_t jobs = 0;       ///< operations started and not finished by the worker (guarded)
  bool planned = false;        ///< guarded
  bool verified = false;       ///< guarded

  void size_for(const shape& s) {
    const auto ppr = s.packs_per_rank();
    local.reserve(static_cast<std::size_t>(ppr));
    gather_mine.resize(meta_block_bytes(ppr));
    gather_all.resize(meta_block_bytes(ppr) * static_cast<std::size_t>(s.dp));
    packs.resize(static_cast<std::size_t>(s.packs()));
    sums.resize(static_cast<std::size_t>(s.packs()));
    checksummed.resize(static_cast<std::size_t>(s.dp));
    digest_mine.resize(digest_block);
    digest_all.resize(digest_block * static_cast<std::size_t>(s.dp));
  }

  /// Reads every rank's block of `gather_all` into `packs`, `sums`, `checksummed` and
  /// `tune_ns`; throws `errc::mismatch` on a block of another batch or shape.
  void read_metadata(const shape& s, std::int32_t rank) {
    const std::int64_t ppr = s.packs_per_rank();
    const std::size_t block = meta_block_bytes(ppr);
    tune_ns = 0;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      const std::byte* in = gather_all.data() + static_cast<std::size_t>(r) * block;
      const auto h = get_header(in, r, rank, static_cast<std::uint64_t>(index),
                                static_cast<std::uint64_t>(ppr));
      const auto ns = static_cast<std::int64_t>(h.compute_ns);
      if (ns > 0 && (tune_ns == 0 || ns < tune_ns)) {
        tune_ns = ns;
      }
      checksummed[static_cast<std::size_t>(r)] = (h.flags & meta_header::checksummed) != 0;
      for (std::int64_t i = 0; i < ppr; ++i) {
        const std::byte* p =
            in + meta_header_bytes + static_cast<std::size_t>(i) * meta_record_bytes;
        const auto id = static_cast<std::size_t>(r * ppr + i);
        packs[id] = pack_meta{static_cast<std::int64_t>(get_u64(p)),
                              static_cast<std::int64_t>(get_u64(p + 8)), r};
        sums[id] = get_u64(p + 16);
      }
    }
  }

  /// Once solved: this rank's digests (of the gathered metadata and of the plan), and
  /// `tune_bytes`.
  void after_solve(const shape& s) {
    digest meta;
    meta.bytes(reinterpret_cast<const unsigned char*>(gather_all.data()), gather_all.size());
    put_u64(digest_mine.data(), meta.value());
    put_u64(digest_mine.data() + 8, sol.plan.digest());
    tune_bytes = 0;
    for (std::int32_t r = 0; r < s.dp; ++r) {
      for (std::int32_t m = 0; m < s.ga; ++m) {
        tune_bytes =
            std::max({tune_bytes, sol.plan.send_bytes(r, m), sol.plan.receive_bytes(r, m)});
      }
    }
  }

  /// Throws `errc::mismatch`, naming up to 8 ranks whose digests differ from this rank's, unless
  /// every rank gathered the same metadata and made the same plan.
  void check_digests(std::int32_t dp) const {
    const std::uint64_t meta = get_u64(digest_mine.data());
    const std::uint64_t plan = get_u64(digest_mine.data() + 8);
    std::ostringstream differ;
    int shown = 0;
    for (std::int32_t r = 0; r < dp; ++r) {
      const std::byte* in = digest_all.data() + static_cast<std::size_t>(r) * digest_block;
      const auto their_meta = get_u64(in);
      const auto their_plan = get_u64(in + 8);
      if ((their_meta != meta || their_plan != plan) && shown < 8) {
        differ << (shown ? "; " : "") << "rank " << r << " has metadata digest 0x" << std::hex
               << their_meta << " and plan digest 0x" << their_plan << std::dec;
        ++shown;
      }
    }
    PACKSWAP_EXPECTS(shown == 0, errc::mismatch,
                     "ranks disagree on the gathered metadata or the plan: this rank "
                         << "has metadata digest 0x" << std::hex << meta << " and plan digest 0x"
                         << plan << std::dec << ", " << differ.str());
  }

  /// Host memory: throws `errc::mismatch` unless every receive of `recvs` (pack ids `ids`)
  /// arrived whole and, where its source sent a checksum and `checksums` is on, unaltered.
  void check_received(span<const recv_op> recvs, span<const std::int32_t> ids,
                      bool checksums) const {
    for (std::size_t i = 0; i < recvs.size(); ++i) {
      const auto& r = recvs[i];
      const auto id = static_cast<std::size_t>(ids[i]);
      PACKSWAP_EXPECTS(r.received == r.bytes, errc::mismatch,
                       "pack " << id << " from rank " << r.peer << " arrived with " << r.received
                               << " bytes, expected " << r.bytes);
      if (checksums && checksummed[static_cast<std::size_t>(r.peer)]) {
        const auto sum = payload_checksum(r.data, static_cast<std::size_t>(r.bytes));
        PACKSWAP_EXPECTS(sum == sums[id], errc::mismatch,
                         "pack " << id << " from rank " << r.peer << " is corrupted: checksum 0x"
                                 << std::hex << sum << ", its source sent 0x" << sums[id]);
      }
    }
  }
};

} // namespace packswap::detail
