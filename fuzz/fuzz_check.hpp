#pragma once

// An invariant check that survives NDEBUG and tells the fuzzer something went wrong.

#include <cstdio>
#include <cstdlib>

#define PACKSWAP_FUZZ_CHECK(cond)                                                                  \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
      std::abort();                                                                                \
    }                                                                                              \
  } while (false)
