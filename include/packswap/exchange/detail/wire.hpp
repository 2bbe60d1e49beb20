#pragma once

#include "packswap/batch.hpp"
#include "packswap/span.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace packswap::detail {

/// A fast 64-bit checksum of a payload: four independent multiply-rotate lanes over 8-byte words
/// (several GB/s), so that verifying every received pack costs little next to copying it. Any
/// single changed word changes its lane's state for good; not cryptographic.
inline std::uint64_t payload_checksum(const void* data, std::size_t size) noexcept {
  constexpr std::uint64_t k1 = 0x9e3779b97f4a7c15ULL;
  constexpr std::uint64_t k2 = 0xc2b2ae3d27d4eb4fULL;
  const auto rotl = [](std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t lane[4] = {k1, k2, k1 ^ k2, ~k1};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int l = 0; l < 4; ++l) {
      std::uint64_t w = 0;
      std::memcpy(&w, p + i + 8 * static_cast<std::size_t>(l), 8);
      lane[l] = rotl(lane[l] ^ (w * k1), 31) * k2;
    }
  }
  std::uint64_t tail = 0;
  for (std::size_t j = 0; i + j < size; ++j) {
    tail ^= static_cast<std::uint64_t>(p[i + j]) << (8 * (j % 8));
    if (j % 8 == 7 || i + j + 1 == size) {
      lane[(j / 8) % 4] = rotl(lane[(j / 8) % 4] ^ (tail * k1), 31) * k2;
      tail = 0;
    }
  }
  std::uint64_t h = static_cast<std::uint64_t>(size) * k2;
  for (auto x : lane) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 29;
    h = rotl(h ^ x, 27) * k1 + 0x52dce729;
  }
  return h;
}

/// Little-endian 64-bit words, so that gathered records read the same on every rank.
inline void put_u64(std::byte* out, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<std::byte>(v >> (8 * i));
  }
}
inline std::uint64_t get_u64(const std::byte* in) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(std::to_integer<unsigned>(in[i])) << (8 * i);
  }
  return v;
}

/// The block each rank contributes to the metadata all-gather of one global batch: a header, then
/// one record per local pack. Fixed size for a given shape.
struct meta_header {
  static constexpr std::uint64_t magic = 0x31706177736b6370ULL; // "pckswap1"
  std::uint64_t batch = 0;      ///< the global batch index: ranks out of step disagree here
  std::uint64_t packs = 0;      ///< packs in the block (ga * mbs)
  std::uint64_t compute_ns = 0; ///< measured compute time per micro-step, 0 when not measured
  std::uint64_t flags = 0;      ///< `checksummed`: the records carry payload checksums
  static constexpr std::uint64_t checksummed = 1;
};
inline constexpr std::size_t meta_header_bytes = 5 * 8;
inline constexpr std::size_t meta_record_bytes = 3 * 8; // cost, bytes, checksum

inline std::size_t meta_block_bytes(std::int64_t packs_per_rank) noexcept {
  return meta_header_bytes + static_cast<std::size_t>(packs_per_rank) * meta_record_bytes;
}

inline void put_header(std::byte* out, const meta_header& h) noexcept {
  put_u64(out, meta_header::magic);
  put_u64(out + 8, h.batch);
  put_u64(out + 16, h.packs);
  put_u64(out + 24, h.compute_ns);
  put_u64(out + 32, h.flags);
}

inline void put_record(std::byte* out, std::int64_t cost, std::int64_t bytes,
                       std::uint64_t checksum) noexcept {
  put_u64(out, static_cast<std::uint64_t>(cost));
  put_u64(out + 8, static_cast<std::uint64_t>(bytes));
  put_u64(out + 16, checksum);
}

/// Reads rank `rank`'s block; throws `errc::mismatch` when its header is not the one expected.
inline meta_header get_header(const std::byte* in, std::int32_t rank, std::int32_t me,
                              std::uint64_t batch, std::uint64_t packs) {
  PACKSWAP_EXPECTS(get_u64(in) == meta_header::magic, errc::mismatch,
                   "rank " << me << ": the metadata block gathered from rank " << rank
                           << " is not a packswap block (magic 0x" << std::hex << get_u64(in)
                           << ")");
  meta_header h;
  h.batch = get_u64(in + 8);
  h.packs = get_u64(in + 16);
  h.compute_ns = get_u64(in + 24);
  h.flags = get_u64(in + 32);
  PACKSWAP_EXPECTS(h.batch == batch && h.packs == packs, errc::mismatch,
                   "rank " << me << " is at global batch " << batch << " with " << packs
                           << " packs per rank, rank " << rank << " sent batch " << h.batch
                           << " with " << h.packs << " packs");
  return h;
}

} // namespace packswap::detail
