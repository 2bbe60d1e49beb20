#pragma once

/// The packswap version. This header is the only place it is written: CMake parses these three
/// lines, and `tests/cmake/test_version.cpp` checks that both agree.
#define PACKSWAP_VERSION_MAJOR 0
#define PACKSWAP_VERSION_MINOR 1
#define PACKSWAP_VERSION_PATCH 0

/// The version as one integer, `major * 10000 + minor * 100 + patch`, for `#if` tests.
#define PACKSWAP_VERSION                                                                           \
  (PACKSWAP_VERSION_MAJOR * 10000 + PACKSWAP_VERSION_MINOR * 100 + PACKSWAP_VERSION_PATCH)

namespace packswap {

/// The version this header belongs to, e.g. `"0.1.0"`.
inline constexpr const char* version_string = "0.1.0";

} // namespace packswap
