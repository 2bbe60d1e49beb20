#pragma once

// Moved: the batch vocabulary is in "packswap/batch.hpp". This forwarder stays only while headers
// inside the library still include it, and is removed before 0.1.
#include "packswap/batch.hpp"
