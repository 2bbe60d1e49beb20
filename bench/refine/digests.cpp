// Digests of the solver's assignments over about a thousand configurations: every synthetic mix
// of the tests and every stress distribution, shapes from dp 1 to 1,024 and ga 1 to 1,024, mbs 1
// to 3, both sync modes, eps 0 to 0.1, one node and several. Two builds that print the same lines
// make the same plans; `scripts/digest-solve A B` builds this program against two revisions'
// headers and compares them (what a refactoring must leave unchanged).
//
//   packswap-bench-refine-digests [--quick]
//
// One line per configuration, then `all <digest of every line>`. --quick: every fifth
// configuration (the ctest smoke run).
#include <packswap/detail/digest.hpp>
#include <packswap/solve.hpp>

#include "batches.hpp"
#include "stress.hpp"

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using packswap::pack_meta;
using packswap::shape;

struct generator {
  std::string name;
  std::function<std::vector<pack_meta>(const shape&, std::uint64_t)> make;
};

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<generator> gens;
  for (const auto m : packswap::test::all_mixes) {
    gens.push_back({packswap::test::name(m), [m](const shape& s, std::uint64_t seed) {
                      return packswap::test::random_batch(s, seed, m);
                    }});
  }
  for (const auto d : packswap::test::stress::all_dists) {
    gens.push_back({packswap::test::stress::name(d), [d](const shape& s, std::uint64_t seed) {
                      return packswap::test::stress::batch(s, d, seed);
                    }});
  }
  const shape shapes[] = {{1, 1, 1},   {1, 16, 1},   {3, 5, 1},   {8, 4, 1},   {16, 16, 1},
                          {64, 16, 1}, {256, 16, 1}, {4, 256, 1}, {16, 64, 1}, {2, 1024, 1},
                          {32, 32, 1}, {1024, 4, 1}, {8, 8, 2},   {16, 4, 3}};
  const double eps_list[] = {0, 0.001, 0.01};
  std::size_t index = 0;
  packswap::detail::digest all;
  for (const auto& g : gens) {
    for (const auto& s : shapes) {
      for (const auto mode : {packswap::sync_mode::per_micro_step, packswap::sync_mode::per_step}) {
        for (const double eps : eps_list) {
          const std::size_t i = index++;
          if (quick && i % 5 != 0) {
            continue;
          }
          const auto packs = g.make(s, 1000 + i);
          packswap::solve_options opt;
          opt.mode = mode;
          opt.eps = eps;
          // Every third configuration on nodes of 4 ranks, crossings weighing 4.
          const bool nodes = i % 3 == 2 && s.dp >= 8;
          if (nodes) {
            opt.topology = packswap::topology::uniform(4, 4);
          }
          const auto d = packswap::digest(packswap::solve(packs, s, opt).cells);
          char line[200];
          std::snprintf(line, sizeof line, "%s dp=%d ga=%d mbs=%d %s eps=%g%s %016llx",
                        g.name.c_str(), s.dp, s.ga, s.mbs, packswap::to_string(mode), eps,
                        nodes ? " nodes=4" : "", static_cast<unsigned long long>(d));
          std::printf("%s\n", line);
          all.bytes(reinterpret_cast<const unsigned char*>(line), std::strlen(line));
        }
      }
    }
  }
  std::printf("all %016llx over %zu configurations\n", static_cast<unsigned long long>(all.value()),
              quick ? (index + 4) / 5 : index);
  return 0;
}
