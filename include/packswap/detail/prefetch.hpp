#pragma once

namespace packswap::detail {

/// A hint that the memory at `p` will be read or written soon: the loops that visit records at
/// random places fetch a few ahead, so that several misses are in flight at once. No effect on
/// results; a no-op where the compiler offers no prefetch builtin.
inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

} // namespace packswap::detail
