"""commcost: how much of a training step is communication, and what to change.

The public API. Every function is pure and returns a frozen dataclass whose
fields are SI quantities with named terms; the CLI only renders them.

Names are imported lazily (PEP 562): ``from commcost import ring_all_reduce``
loads only the modules that name needs, so the command line starts fast.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # inputs and errors
    "InputError": "commcost.errors",
    "Link": "commcost.topology",
    # collectives
    "Algorithm": "commcost.collectives",
    "Collective": "commcost.collectives",
    "CollectiveCost": "commcost.collectives",
    "bus_bandwidth_factor": "commcost.collectives",
    "ring_all_reduce": "commcost.collectives",
    "ring_reduce_scatter": "commcost.collectives",
    "ring_all_gather": "commcost.collectives",
    # buckets
    "BucketAdvice": "commcost.buckets",
    "BucketRow": "commcost.buckets",
    "bucket_advice": "commcost.buckets",
    "bucket_row": "commcost.buckets",
    "crossover_bytes": "commcost.buckets",
    # the drill's budget
    "Budget": "commcost.budget",
    "BudgetInputs": "commcost.budget",
    "communication_budget": "commcost.budget",
    "LayerInputs": "commcost.layer",
    "LayerRatio": "commcost.layer",
    "layer_ratio": "commcost.layer",
    # the scaling analysis (seed: scaling_analysis.py)
    "ScalingCurve": "commcost.scaling",
    "ScalingInputs": "commcost.scaling",
    "ScalingRow": "commcost.scaling",
    "data_parallel_comm": "commcost.scaling",
    "scaling_curve": "commcost.scaling",
    "scaling_row": "commcost.scaling",
    "seed_analysis": "commcost.scaling",
    "seed_inputs": "commcost.scaling",
    # the DDP timeline
    "DdpBucketCaps": "commcost.ddp_buckets",
    "assign_buckets_by_size": "commcost.ddp_buckets",
    "ddp_bucket_caps": "commcost.ddp_buckets",
    "initial_buckets": "commcost.ddp_buckets",
    "rebuilt_buckets": "commcost.ddp_buckets",
    "BucketSweep": "commcost.timeline",
    "BucketTiming": "commcost.timeline",
    "CurvePoint": "commcost.timeline",
    "Timeline": "commcost.timeline",
    "TimelineInputs": "commcost.timeline",
    "ring_allreduce_cost": "commcost.timeline",
    "simulate_timeline": "commcost.timeline",
    "sweep_buckets": "commcost.timeline",
    "ModelShape": "commcost.workload",
    "model_params": "commcost.workload",
    "model_preset": "commcost.workload",
    # fabrics: two-tier topologies, algorithms, presets (one entry point: collective_cost)
    "Topology": "commcost.topology",
    "Placement": "commcost.topology",
    "place": "commcost.topology",
    "collective_cost": "commcost.algorithms",
    "algorithm_costs": "commcost.algorithms",
    "protocol_costs": "commcost.algorithms",
    "Protocol": "commcost.protocols",
    "ProtocolModel": "commcost.protocols",
    "system_topology": "commcost.presets",
    "system_group": "commcost.presets",
    # calibration
    "Series": "commcost.calibrate.data",
    "load_series": "commcost.calibrate.data",
    "AlphaBetaFit": "commcost.calibrate.fit",
    "Comparison": "commcost.calibrate.fit",
    "Regime": "commcost.calibrate.fit",
    "Sample": "commcost.calibrate.fit",
    "compare": "commcost.calibrate.fit",
    "fit_alpha_beta": "commcost.calibrate.fit",
    "MeasureConfig": "commcost.calibrate.measure",
    "MeasurementFailed": "commcost.calibrate.measure",
    "measure": "commcost.calibrate.measure",
    "size_grid": "commcost.calibrate.measure",
    "NcclTestsRun": "commcost.calibrate.nccl_tests",
    "parse_nccl_tests": "commcost.calibrate.nccl_tests",
    "read_nccl_tests": "commcost.calibrate.nccl_tests",
    "Profile": "commcost.calibrate.profile",
    "load_profile": "commcost.calibrate.profile",
    "save_profile": "commcost.calibrate.profile",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'commcost' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
