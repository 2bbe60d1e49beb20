#pragma once

#include <cstddef>
#include <cstdint>

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

/// prefetch() every cache line of the `count` records from `first` on (none when `count` is 0).
template <class T>
inline void prefetch_lines(const T* first, std::size_t count) {
  if (count == 0) {
    return;
  }
  constexpr std::uintptr_t line = 64;
  const auto begin = reinterpret_cast<std::uintptr_t>(first) & ~(line - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(first + count);
  for (std::uintptr_t at = begin; at < end; at += line) {
    prefetch(reinterpret_cast<const void*>(at));
  }
}

} // namespace packswap::detail
