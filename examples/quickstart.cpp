// Quick start: every rank gathers a few integers per pack, runs the same solver, and gets the
// same plan: which packs it computes at each micro-step, which it sends, which it receives.
#include <packswap/packswap.hpp>

#include <cstdio>
#include <vector>

int main() {
  const packswap::shape shape{/*dp=*/4, /*ga=*/4};
  // One record per pack: cost (here ViT microseconds), payload bytes, the rank that loaded it.
  // Rank 0's loader happened to produce the image-heavy packs.
  std::vector<packswap::pack_meta> packs;
  for (int rank = 0; rank < shape.dp; ++rank) {
    for (int i = 0; i < shape.ga; ++i) {
      const int image_tokens = rank == 0 ? 2500 + 100 * i : 300 * i;
      packs.push_back({60'000 + 280 * image_tokens, 32'768 + 4'704 * image_tokens, rank});
    }
  }
  const auto sol = packswap::solve(packs, shape);
  std::printf("A = %lld (lower bound %lld), B = %lld (lower bound %lld), %lld of %zu packs move\n",
              static_cast<long long>(sol.balance.a), static_cast<long long>(sol.balance.lb_a),
              static_cast<long long>(sol.balance.b), static_cast<long long>(sol.balance.lb_b),
              static_cast<long long>(sol.movement.moved), packs.size());
  for (int step = 0; step < shape.ga; ++step) {
    std::printf("micro-step %d, rank 0:", step);
    for (auto p : sol.plan.keep(0, step))
      std::printf(" keeps %d", p);
    for (auto t : sol.plan.sends(0, step))
      std::printf(" sends %d->%d", t.pack, t.peer);
    for (auto t : sol.plan.receives(0, step))
      std::printf(" receives %d<-%d", t.pack, t.peer);
    std::printf("\n");
  }
  return sol.balance.a == sol.balance.lb_a ? 0 : 1;
}
