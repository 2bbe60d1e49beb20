// A consumer that got packswap through FetchContent: solve a small global batch.
#include <packswap/packswap.hpp>

#include <cstdio>
#include <vector>

int main() {
  const packswap::shape shape{4, 2, 1};
  std::vector<packswap::pack_meta> packs;
  for (int p = 0; p < 8; ++p) {
    packs.push_back({(p % 3) * 1000 + 100, 4096 * (p + 1), p / 2});
  }
  const auto sol = packswap::solve(packs, shape);
  const bool ok = sol.balance.a == sol.balance.lb_a && sol.cells.size() == packs.size();
  std::printf("packswap %s: A=%lld LB_A=%lld moved=%lld -> %s\n", packswap::version_string,
              static_cast<long long>(sol.balance.a), static_cast<long long>(sol.balance.lb_a),
              static_cast<long long>(sol.movement.moved), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
