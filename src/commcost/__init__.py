"""commcost: how much of a training step is communication, and what to change.

The public API. Every function is pure and returns a frozen dataclass whose
fields are SI quantities with named terms; the CLI only renders them.
"""

from commcost.budget import Budget, BudgetInputs, communication_budget
from commcost.calibrate.data import Series, load_series
from commcost.calibrate.fit import AlphaBetaFit, Comparison, Regime, Sample, compare, fit_alpha_beta
from commcost.calibrate.measure import MeasureConfig, MeasurementFailed, measure, size_grid
from commcost.calibrate.nccl_tests import NcclTestsRun, parse_nccl_tests, read_nccl_tests
from commcost.calibrate.profile import Profile, load_profile, save_profile
from commcost.buckets import BucketAdvice, BucketRow, bucket_advice, bucket_row, crossover_bytes
from commcost.collectives import (
    Algorithm, Collective, CollectiveCost, bus_bandwidth_factor,
    ring_all_gather, ring_all_reduce, ring_reduce_scatter,
)
from commcost.errors import InputError
from commcost.layer_ratio import LayerInputs, LayerRatio, layer_ratio
from commcost.topology import Link

__all__ = [
    "Algorithm", "BucketAdvice", "BucketRow", "Budget", "BudgetInputs", "Collective",
    "CollectiveCost", "InputError", "LayerInputs", "LayerRatio", "Link",
    "bucket_advice", "bucket_row", "bus_bandwidth_factor", "communication_budget",
    "crossover_bytes", "layer_ratio", "ring_all_gather", "ring_all_reduce", "ring_reduce_scatter",
    # calibration
    "AlphaBetaFit", "Comparison", "MeasureConfig", "MeasurementFailed", "NcclTestsRun", "Profile", "Regime",
    "Sample", "Series", "compare", "fit_alpha_beta", "load_profile", "load_series", "measure",
    "parse_nccl_tests", "read_nccl_tests", "save_profile", "size_grid",
]

__version__ = "0.1.0"
