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
from commcost.topology import Link, Placement, Topology, place
from commcost.algorithms import algorithm_costs, collective_cost
from commcost.presets import system_group, system_topology

__all__ = [
    "Algorithm", "BucketAdvice", "BucketRow", "Budget", "BudgetInputs", "Collective",
    "CollectiveCost", "InputError", "LayerInputs", "LayerRatio", "Link",
    "bucket_advice", "bucket_row", "bus_bandwidth_factor", "communication_budget",
    "crossover_bytes", "layer_ratio", "ring_all_gather", "ring_all_reduce", "ring_reduce_scatter",
    "Topology", "Placement", "place", "collective_cost", "algorithm_costs", "system_topology", "system_group",
]

__version__ = "0.1.0"
