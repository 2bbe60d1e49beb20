#pragma once

// Moved: span is public API in "packswap/span.hpp". This forwarder stays only while headers
// inside the library still include it, and is removed before 0.1.
#include "packswap/span.hpp"
