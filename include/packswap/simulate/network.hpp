#pragma once

#include "packswap/batch.hpp"
#include "packswap/detail/checked.hpp"
#include "packswap/error.hpp"
#include "packswap/refine/topology.hpp"
#include "packswap/span.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace packswap {

/// The links packs travel over: ranks `[k * ranks_per_node, (k + 1) * ranks_per_node)` share node
/// k; a byte between two ranks of one node uses the intra-node link (NVLink), any other byte the
/// inter-node one (the rank's NIC).
///
/// Moving `intra` and `inter` bytes in `messages` messages in one direction takes
///
///     ceil(max(intra / intra_node_bytes_per_s, inter / inter_node_bytes_per_s) in us)
///       + ceil(messages * latency_ns / 1000)
///
/// The two links are separate hardware and run at once, hence the max; each message (one pack)
/// pays the latency, since a rank issues its sends and receives one after another. Sending and
/// receiving are full duplex: a rank's exchange takes the longer of the two (`measure_exchange`).
///
/// Defaults: 150 GB/s within a node (NVLink, with the exchange confined to a few SMs so that it can
/// hide behind compute, DESIGN.md §5), 40 GB/s across nodes (a 400 Gb/s NIC per GPU at 80%), 20 us
/// per message, 8 GPUs per node. Bandwidths are bytes per second, 1 to 10^13.
///
/// ```
/// packswap::network_model net;
/// net.inter_node_bytes_per_s = 5'000'000'000;       // 5 GB/s: a slower fabric
/// auto us = net.transfer_us(0, 26'000'000, 1);       // one 26 MB pack to another node
/// ```
struct network_model {
  std::int64_t intra_node_bytes_per_s = 150'000'000'000; ///< between GPUs of one node
  std::int64_t inter_node_bytes_per_s = 40'000'000'000;  ///< between GPUs of different nodes
  std::int64_t latency_ns = 20'000;                      ///< per message (one pack)
  std::int32_t ranks_per_node = 8;                       ///< ranks r / ranks_per_node share a node

  /// The largest bandwidth accepted, 10 TB/s (it keeps the integer arithmetic exact).
  static constexpr std::int64_t max_bytes_per_s = 10'000'000'000'000;

  /// Throws `errc::invalid_argument` naming the field unless every parameter is in range.
  void validate() const {
    PACKSWAP_EXPECTS(intra_node_bytes_per_s >= 1 && intra_node_bytes_per_s <= max_bytes_per_s,
                     errc::invalid_argument,
                     "intra-node bandwidth is " << intra_node_bytes_per_s
                                                << " bytes/s, must be in [1, " << max_bytes_per_s
                                                << "]");
    PACKSWAP_EXPECTS(inter_node_bytes_per_s >= 1 && inter_node_bytes_per_s <= max_bytes_per_s,
                     errc::invalid_argument,
                     "inter-node bandwidth is " << inter_node_bytes_per_s
                                                << " bytes/s, must be in [1, " << max_bytes_per_s
                                                << "]");
    PACKSWAP_EXPECTS(latency_ns >= 0 && latency_ns <= 1'000'000'000'000, errc::invalid_argument,
                     "latency is " << latency_ns << " ns, must be in [0, 10^12]");
    PACKSWAP_EXPECTS(ranks_per_node >= 1, errc::invalid_argument,
                     "ranks per node is " << ranks_per_node << ", must be at least 1");
  }

  /// Whether ranks `a` and `b` share a node.
  [[nodiscard]] bool same_node(std::int32_t a, std::int32_t b) const noexcept {
    return a / ranks_per_node == b / ranks_per_node;
  }

  /// Microseconds to move `intra` bytes within the node and `inter` bytes across nodes, in
  /// `messages` messages, in one direction (see above). Requires a valid model and counts >= 0.
  [[nodiscard]] std::int64_t transfer_us(std::int64_t intra, std::int64_t inter,
                                         std::int64_t messages) const {
    const std::int64_t wire =
        std::max(link_us(intra, intra_node_bytes_per_s), link_us(inter, inter_node_bytes_per_s));
    const std::int64_t ns = detail::checked_mul(messages, latency_ns, "message latency");
    return detail::checked_add(wire, ns / 1000 + (ns % 1000 != 0 ? 1 : 0), "transfer time");
  }

  /// The solver's view of these links: the same nodes, and a crossing byte weighted by how much
  /// slower the inter-node link is (rounded, at least 1).
  [[nodiscard]] packswap::topology topology() const {
    const std::int64_t ratio =
        (intra_node_bytes_per_s + inter_node_bytes_per_s / 2) / inter_node_bytes_per_s;
    return topology::uniform(ranks_per_node, std::clamp<std::int64_t>(ratio, 1, 1 << 20));
  }

 private:
  // ceil(bytes * 10^6 / bw) exactly: the remainder is below 10^13, so times 10^6 it fits 64 bits
  // unsigned.
  static std::int64_t link_us(std::int64_t bytes, std::int64_t bw) {
    const std::int64_t whole = detail::checked_mul(bytes / bw, 1'000'000, "transfer time");
    const auto rest = static_cast<std::uint64_t>(bytes % bw) * 1'000'000u;
    const auto b = static_cast<std::uint64_t>(bw);
    return whole + static_cast<std::int64_t>(rest / b + (rest % b != 0 ? 1 : 0));
  }
};

/// Who sends what for one assignment, and how long each exchange takes.
struct exchange_profile {
  /// The exchange that brings every pack of micro-step m to its rank, as rank r sees it:
  /// `time_us[r * ga + m]` = max(r's sends, r's receives) for that micro-step.
  std::vector<std::int64_t> time_us;
  std::int64_t moved = 0;            ///< packs computed away from their source rank
  std::int64_t moved_bytes = 0;      ///< their bytes
  std::int64_t inter_node_bytes = 0; ///< the part that crosses nodes
};

/// The exchange that assignment `cells` needs, per rank and micro-step: a pack whose cell is
/// (r, m) and whose source rank is s != r goes from s to r in the exchange of micro-step m (the
/// loader has every pack of the global batch when the step starts). Validates its inputs. O(packs).
///
/// ```
/// auto sol = packswap::solve(meta, shape);
/// auto x = packswap::measure_exchange(meta, sol.cells, shape, packswap::network_model{});
/// ```
[[nodiscard]] inline exchange_profile measure_exchange(span<const pack_meta> packs,
                                                       const assignment& cells, const shape& s,
                                                       const network_model& net) {
  validate_batch(packs, s);
  validate_assignment(cells, s);
  net.validate();
  const auto n_cells = static_cast<std::size_t>(s.cells());
  // Per cell and direction: intra-node bytes, inter-node bytes, messages.
  struct flow {
    std::int64_t intra = 0;
    std::int64_t inter = 0;
    std::int64_t messages = 0;
  };
  std::vector<flow> sent(n_cells);
  std::vector<flow> received(n_cells);
  exchange_profile out;
  const auto ga = static_cast<std::size_t>(s.ga);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    const std::int32_t from = packs[p].source_rank;
    const cell to = cells[p];
    if (from == to.rank) {
      continue;
    }
    const std::int64_t bytes = packs[p].bytes;
    const bool local = net.same_node(from, to.rank);
    const auto m = static_cast<std::size_t>(to.micro_step);
    for (flow* f : {&sent[static_cast<std::size_t>(from) * ga + m],
                    &received[static_cast<std::size_t>(to.rank) * ga + m]}) {
      (local ? f->intra : f->inter) += bytes;
      ++f->messages;
    }
    ++out.moved;
    out.moved_bytes += bytes;
    out.inter_node_bytes += local ? 0 : bytes;
  }
  out.time_us.resize(n_cells);
  for (std::size_t c = 0; c < n_cells; ++c) {
    out.time_us[c] =
        std::max(net.transfer_us(sent[c].intra, sent[c].inter, sent[c].messages),
                 net.transfer_us(received[c].intra, received[c].inter, received[c].messages));
  }
  return out;
}

} // namespace packswap
