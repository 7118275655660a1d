"""commcost: how much of a training step is communication, and what to change.

The public API. Every function is pure and returns a frozen dataclass whose
fields are SI quantities with named terms; the CLI only renders them.
"""

from commcost.budget import Budget, BudgetInputs, communication_budget
from commcost.buckets import BucketAdvice, BucketRow, bucket_advice, bucket_row, crossover_bytes
from commcost.collectives import (
    Algorithm, Collective, CollectiveCost, bus_bandwidth_factor,
    ring_all_gather, ring_all_reduce, ring_reduce_scatter,
)
from commcost.errors import InputError
from commcost.layer_ratio import LayerInputs, LayerRatio, layer_ratio
from commcost.topology import Link
from commcost.ddp_buckets import DdpBucketCaps, assign_buckets_by_size, ddp_bucket_caps, initial_buckets, rebuilt_buckets
from commcost.timeline import (
    BucketSweep, BucketTiming, CurvePoint, Timeline, TimelineInputs, ring_allreduce_cost,
    simulate_timeline, sweep_buckets,
)
from commcost.workload import ModelShape, model_params, model_preset

__all__ = [
    "Algorithm", "BucketAdvice", "BucketRow", "Budget", "BudgetInputs", "Collective",
    "CollectiveCost", "InputError", "LayerInputs", "LayerRatio", "Link",
    "bucket_advice", "bucket_row", "bus_bandwidth_factor", "communication_budget",
    "crossover_bytes", "layer_ratio", "ring_all_gather", "ring_all_reduce", "ring_reduce_scatter",
    # the DDP timeline
    "BucketSweep", "BucketTiming", "CurvePoint", "DdpBucketCaps", "ModelShape", "Timeline", "TimelineInputs",
    "assign_buckets_by_size", "ddp_bucket_caps", "initial_buckets", "model_params", "model_preset",
    "rebuilt_buckets", "ring_allreduce_cost", "simulate_timeline", "sweep_buckets",
]

__version__ = "0.1.0"
