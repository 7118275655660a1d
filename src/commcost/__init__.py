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
    "InputError": "commcost.core.errors",
    # the one communication model
    "CommModel": "commcost.comm.model",
    "FlatLinkModel": "commcost.comm.model",
    "FabricModel": "commcost.comm.model",
    "ProfileModel": "commcost.comm.model",
    "ProfileScope": "commcost.comm.model",
    "profile_model": "commcost.calibrate.profile",
    "OverlapBounds": "commcost.step.overlap",
    "Link": "commcost.comm.topology",
    # collectives
    "Algorithm": "commcost.comm.collectives",
    "Collective": "commcost.comm.collectives",
    "CollectiveCost": "commcost.comm.collectives",
    "bus_bandwidth_factor": "commcost.comm.collectives",
    "ring_all_reduce": "commcost.comm.collectives",
    "ring_reduce_scatter": "commcost.comm.collectives",
    "ring_all_gather": "commcost.comm.collectives",
    # buckets
    "BucketAdvice": "commcost.step.buckets",
    "BucketRow": "commcost.step.buckets",
    "bucket_advice": "commcost.step.buckets",
    "bucket_row": "commcost.step.buckets",
    "crossover_bytes": "commcost.step.buckets",
    # the drill's budget
    "Budget": "commcost.analyses.drill.budget",
    "BudgetInputs": "commcost.analyses.drill.budget",
    "communication_budget": "commcost.analyses.drill.budget",
    "LayerInputs": "commcost.analyses.drill.layer",
    "LayerRatio": "commcost.analyses.drill.layer",
    "layer_ratio": "commcost.analyses.drill.layer",
    # the scaling analysis (seed: scaling_analysis.py)
    "ScalingCurve": "commcost.analyses.scaling",
    "ScalingInputs": "commcost.analyses.scaling",
    "ScalingRow": "commcost.analyses.scaling",
    "data_parallel_comm": "commcost.analyses.scaling",
    "scaling_curve": "commcost.analyses.scaling",
    "scaling_row": "commcost.analyses.scaling",
    "seed_analysis": "commcost.analyses.scaling",
    "seed_inputs": "commcost.analyses.scaling",
    # the DDP timeline
    "DdpBucketCaps": "commcost.step.ddp_buckets",
    "assign_buckets_by_size": "commcost.step.ddp_buckets",
    "ddp_bucket_caps": "commcost.step.ddp_buckets",
    "initial_buckets": "commcost.step.ddp_buckets",
    "rebuilt_buckets": "commcost.step.ddp_buckets",
    "BucketSweep": "commcost.step.sweep",
    "BucketTiming": "commcost.step.timeline",
    "CurvePoint": "commcost.step.sweep",
    "Timeline": "commcost.step.timeline",
    "TimelineInputs": "commcost.step.timeline",
    "comm_allreduce_cost": "commcost.step.timeline",
    "BucketChoice": "commcost.step.timeline",
    "simulate_timeline": "commcost.step.timeline",
    "sweep_buckets": "commcost.step.sweep",
    "model_params": "commcost.workload.shape",
    "model_preset": "commcost.workload.shape",
    # fabrics: two-tier topologies, algorithms, presets (one entry point: collective_cost)
    "Topology": "commcost.comm.topology",
    "Placement": "commcost.comm.topology",
    "place": "commcost.comm.topology",
    "collective_cost": "commcost.comm.algorithms",
    "algorithm_costs": "commcost.comm.algorithms",
    "protocol_costs": "commcost.comm.algorithms",
    "Protocol": "commcost.comm.protocols",
    "ProtocolModel": "commcost.comm.protocols",
    "system_topology": "commcost.comm.systems",
    "system_group": "commcost.comm.systems",
    # parallel plans
    "TransformerSpec": "commcost.workload.transformer",
    "model_spec": "commcost.workload.transformer",
    "Layout": "commcost.parallel.layout",
    "CommOp": "commcost.parallel.layout",
    "MemoryBreakdown": "commcost.workload.memory",
    "memory_per_gpu": "commcost.workload.memory",
    "PlanInputs": "commcost.analyses.plan.plan",
    "Plan": "commcost.analyses.plan.plan",
    "fit_efficiency": "commcost.calibrate.efficiency",
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
    # traces in (PyTorch profiler / Kineto) and simulated timelines out
    "TraceSummary": "commcost.trace.summary",
    "analyze_trace": "commcost.trace.summary",
    "predict_rows": "commcost.trace.summary",
    "timeline_chrome_trace": "commcost.report.chrome_trace",
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
