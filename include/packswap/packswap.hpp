#pragma once

/// The umbrella header: every pure layer of packswap (packing, cost, balance, refine, plan,
/// simulate). The exchange layer touches threads and transports and is included explicitly:
/// `packswap/exchange/...`, `packswap/mpi/...`, `packswap/nccl/...`.

#include "packswap/error.hpp"
#include "packswap/version.hpp"

#include "packswap/balance/balance.hpp"
#include "packswap/balance/batch.hpp"
#include "packswap/balance/batch_csv.hpp"
#include "packswap/balance/metrics.hpp"
#include "packswap/plan/plan.hpp"
#include "packswap/plan/verify.hpp"
#include "packswap/refine/movement.hpp"
#include "packswap/refine/refine.hpp"
#include "packswap/refine/relabel.hpp"
#include "packswap/refine/topology.hpp"
#include "packswap/solve.hpp"
