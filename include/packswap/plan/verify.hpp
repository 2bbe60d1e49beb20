#pragma once

#include "packswap/batch.hpp"
#include "packswap/plan/plan.hpp"

#include <cstdint>
#include <ostream>
#include <sstream>
#include <vector>

namespace packswap {

/// Checks what every plan must satisfy and throws `errc::internal` naming the first violation:
/// `a` puts every pack in exactly one cell and every cell holds exactly `mbs` packs; for every
/// rank and micro-step the plan holds, `compute` lists exactly the packs `a` puts there,
/// `keep` those of them the rank's own loader produced and `receives` the rest, each from its
/// source rank; every send goes to the rank `a` names, and, where the plan holds both ends, is
/// matched by the receiver's entry, in the same order. O(packs). For tests, fuzzers and
/// debugging: `solve()` output always passes.
inline void verify(span<const pack_meta> packs, const shape& s, const assignment& a,
                   const plan& pl) {
  validate_batch(packs, s);
  validate_assignment(a, s);
  const auto fail_unless = [](bool ok, const auto& describe) {
    if (!ok) {
      std::ostringstream os;
      describe(os);
      detail::throw_error(errc::internal, os.str());
    }
  };
  const shape ps = pl.batch_shape();
  fail_unless(ps.dp == s.dp && ps.ga == s.ga && ps.mbs == s.mbs, [&](std::ostream& os) {
    os << "plan shape dp=" << ps.dp << " ga=" << ps.ga << " mbs=" << ps.mbs
       << " differs from the batch's dp=" << s.dp << " ga=" << s.ga << " mbs=" << s.mbs;
  });
  std::vector<char> seen(packs.size(), 0);
  for (std::int32_t r = pl.first_rank(); r < pl.last_rank(); ++r) {
    for (std::int32_t m = 0; m < s.ga; ++m) {
      const auto compute = pl.compute(r, m);
      const auto keep = pl.keep(r, m);
      const auto recv = pl.receives(r, m);
      fail_unless(static_cast<std::int64_t>(compute.size()) == s.mbs, [&](std::ostream& os) {
        os << "(rank " << r << ", micro-step " << m << ") computes " << compute.size()
           << " packs, mbs is " << s.mbs;
      });
      fail_unless(keep.size() + recv.size() == compute.size(), [&](std::ostream& os) {
        os << "(rank " << r << ", micro-step " << m << ") keeps " << keep.size() << " and receives "
           << recv.size() << " packs but computes " << compute.size();
      });
      for (const auto p : compute) {
        const auto& c = a[static_cast<std::size_t>(p)];
        fail_unless(c.rank == r && c.micro_step == m, [&](std::ostream& os) {
          os << "pack " << p << " is computed at (rank " << r << ", micro-step " << m
             << ") but assigned to (rank " << c.rank << ", micro-step " << c.micro_step << ")";
        });
        fail_unless(seen[static_cast<std::size_t>(p)] == 0,
                    [&](std::ostream& os) { os << "pack " << p << " is computed twice"; });
        seen[static_cast<std::size_t>(p)] = 1;
      }
      for (const auto p : keep) {
        fail_unless(packs[static_cast<std::size_t>(p)].source_rank == r, [&](std::ostream& os) {
          os << "rank " << r << " keeps pack " << p << " of source rank "
             << packs[static_cast<std::size_t>(p)].source_rank;
        });
      }
      for (const auto& t : recv) {
        const auto& src = packs[static_cast<std::size_t>(t.pack)];
        fail_unless(src.source_rank == t.peer && t.peer != r && t.bytes == src.bytes &&
                        a[static_cast<std::size_t>(t.pack)].rank == r,
                    [&](std::ostream& os) {
                      os << "rank " << r << " receives pack " << t.pack << " from rank " << t.peer
                         << " (" << t.bytes << " bytes); its source is rank " << src.source_rank
                         << " with " << src.bytes << " bytes";
                    });
      }
      const auto sends = pl.sends(r, m);
      for (std::size_t i = 0; i < sends.size(); ++i) {
        const auto& t = sends[i];
        const auto& c = a[static_cast<std::size_t>(t.pack)];
        fail_unless(packs[static_cast<std::size_t>(t.pack)].source_rank == r && c.rank == t.peer &&
                        c.micro_step == m && t.peer != r,
                    [&](std::ostream& os) {
                      os << "rank " << r << " sends pack " << t.pack << " to rank " << t.peer
                         << " for micro-step " << m << "; it is assigned to (rank " << c.rank
                         << ", micro-step " << c.micro_step << ")";
                    });
        if (t.peer >= pl.first_rank() && t.peer < pl.last_rank()) {
          // The receiver lists the packs from r in the same order r sends them.
          const auto theirs = pl.receives(t.peer, m);
          std::size_t from_r = 0;
          std::size_t rank_in_list = 0;
          bool found = false;
          for (const auto& u : theirs) {
            if (u.peer != r) {
              continue;
            }
            if (u.pack == t.pack) {
              found = true;
              rank_in_list = from_r;
            }
            ++from_r;
          }
          std::size_t to_peer = 0;
          for (std::size_t j = 0; j < i; ++j) {
            to_peer += sends[j].peer == t.peer ? 1 : 0;
          }
          fail_unless(found && rank_in_list == to_peer, [&](std::ostream& os) {
            os << "rank " << r << " sends pack " << t.pack << " to rank " << t.peer
               << " for micro-step " << m << " but the receiver does not list it in that position";
          });
        }
      }
    }
  }
  if (pl.first_rank() == 0 && pl.last_rank() == s.dp) {
    for (std::size_t p = 0; p < packs.size(); ++p) {
      fail_unless(seen[p] != 0,
                  [&](std::ostream& os) { os << "pack " << p << " is computed nowhere"; });
    }
  }
}

} // namespace packswap
