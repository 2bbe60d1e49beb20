"""packswap: balance vision-language training by swapping whole packs between data-parallel ranks.

The solver, cost model and packers are packswap's C++ library, bound with pybind11
(``packswap._core``); ``packswap.torch`` adds the exchange over ``torch.distributed``. This
module never imports torch.

    import packswap
    sol = packswap.solve(cost, nbytes, source_rank, dp=64, ga=16)
    sol.rank, sol.micro_step, sol.metrics

See docs/python.md for the whole API.
"""

from ._core import (
    COST_TERMS,
    FEATURES,
    BudgetedPacker,
    Calibration,
    CostModel,
    GreedyPacker,
    PackFeatures,
    PackingMetrics,
    PackList,
    PayloadModel,
    SampleKind,
    SampleSet,
    Solution,
    Solver,
    Workload,
    __version__,
    calibrate,
    digest,
    features_of,
    generate,
    make_pack_meta,
    mean_image_tokens_per_pack,
    measure_packing,
    solve,
    workload_preset,
    workload_preset_names,
)
from ._errors import Error

__all__ = [
    "COST_TERMS",
    "FEATURES",
    "BudgetedPacker",
    "Calibration",
    "CostModel",
    "Error",
    "GreedyPacker",
    "PackFeatures",
    "PackingMetrics",
    "PackList",
    "PayloadModel",
    "SampleKind",
    "SampleSet",
    "Solution",
    "Solver",
    "Workload",
    "__version__",
    "calibrate",
    "digest",
    "features_of",
    "generate",
    "make_pack_meta",
    "mean_image_tokens_per_pack",
    "measure_packing",
    "solve",
    "workload_preset",
    "workload_preset_names",
]
