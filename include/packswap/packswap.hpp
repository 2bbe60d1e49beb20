#pragma once

/// The umbrella header: the vocabulary every layer shares (`packswap/batch.hpp`,
/// `packswap/span.hpp`) and every pure layer of packswap (packing, cost, balance, refine, plan,
/// simulate). The exchange layer touches threads and transports and is included explicitly:
/// `packswap/exchange/...`, `packswap/mpi/...`, `packswap/nccl/...`.

#include "packswap/batch.hpp"
#include "packswap/error.hpp"
#include "packswap/span.hpp"
#include "packswap/version.hpp"

#include "packswap/balance/balance.hpp"
#include "packswap/balance/batch_csv.hpp"
#include "packswap/balance/metrics.hpp"
#include "packswap/cost/calibrate.hpp"
#include "packswap/cost/cost_model.hpp"
#include "packswap/cost/features.hpp"
#include "packswap/cost/pack_meta.hpp"
#include "packswap/cost/payload.hpp"
#include "packswap/cost/presets.hpp"
#include "packswap/packing/budgeted_packer.hpp"
#include "packswap/packing/greedy_packer.hpp"
#include "packswap/packing/metrics.hpp"
#include "packswap/packing/pack_list.hpp"
#include "packswap/packing/packer.hpp"
#include "packswap/packing/sample.hpp"
#include "packswap/packing/sample_csv.hpp"
#include "packswap/packing/workload.hpp"
#include "packswap/plan/plan.hpp"
#include "packswap/plan/verify.hpp"
#include "packswap/refine/movement.hpp"
#include "packswap/refine/refine.hpp"
#include "packswap/refine/relabel.hpp"
#include "packswap/refine/topology.hpp"
#include "packswap/simulate/compute_model.hpp"
#include "packswap/simulate/method.hpp"
#include "packswap/simulate/network.hpp"
#include "packswap/simulate/pack_stream.hpp"
#include "packswap/simulate/placement.hpp"
#include "packswap/simulate/simulator.hpp"
#include "packswap/simulate/step_time.hpp"
#include "packswap/solve.hpp"
