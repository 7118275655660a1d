"""A fuzz test of the public API (``commcost.__all__``) at its edge: every call, with each argument
either plausible or hostile (NaN, inf, negative, 5e-324, 1e308, a 400-digit integer, a bool, a
string, None, a list), returns finite, non-negative numbers throughout its result, or raises
:class:`InputError` (a ValueError) or TypeError -- never inf, a negative size, an AttributeError or
an OverflowError (issue 36). Every name of ``commcost.__all__`` is fuzzed here or left out with its
reason in :data:`NOT_FUZZED`, so a new export is considered."""

from __future__ import annotations

import dataclasses
import enum
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import commcost
from commcost.core.errors import InputError

HOSTILE = st.sampled_from([float("nan"), float("inf"), -float("inf"), -1, -1.0, 0, 0.0, 5e-324, 1e308, -1e308,
                           10**400, 2**63, True, None, "8", [1], 1e-300])
"""Values no argument should let through silently."""


def number(lo: float, hi: float) -> st.SearchStrategy:
    """A plausible float in [lo, hi], or a hostile value (one draw in four)."""
    return st.one_of(st.floats(lo, hi), st.floats(lo, hi), st.floats(lo, hi), HOSTILE)


def count(lo: int, hi: int) -> st.SearchStrategy:
    """A plausible integer in [lo, hi], or a hostile value (one draw in four)."""
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi), st.integers(lo, hi), HOSTILE)


def link(draw) -> object:
    return draw(st.one_of(st.builds(commcost.Link, bandwidth_bytes_per_s=st.floats(1e3, 1e15),
                                    latency_s=st.floats(0, 10)), HOSTILE))


def flat(draw) -> object:
    return commcost.FlatLinkModel(link=commcost.Link(bandwidth_bytes_per_s=draw(st.floats(1e3, 1e15)),
                                                     latency_s=draw(st.floats(0, 1e-3))))


def fabric(draw) -> object:
    kind = draw(st.sampled_from(["link", "system", "hostile"]))
    if kind == "system":
        return commcost.system_topology(draw(st.sampled_from(["dgx-h100", "dgx-a100"])),
                                        nodes=draw(st.integers(1, 64)))
    return link(draw) if kind == "link" else draw(HOSTILE)


OPS = st.one_of(st.sampled_from(list(commcost.Collective)), st.sampled_from(["all_reduce", "nope", None, 3]))

TARGETS = {
    "Link": lambda d: commcost.Link(bandwidth_bytes_per_s=d(number(1e3, 1e15)), latency_s=d(number(0, 10))),
    "FlatLinkModel": lambda d: commcost.FlatLinkModel(link=link(d)).cost(
        commcost.Collective.ALL_REDUCE, d(number(0, 2.0**40)), d(count(1, 4096))),
    "FabricModel": lambda d: commcost.FabricModel(topology=d(st.one_of(st.just(
        commcost.system_topology("dgx-h100", nodes=4)), HOSTILE))).cost(
        commcost.Collective.ALL_GATHER, d(number(0, 2.0**40)), d(count(1, 32))),
    "ring_all_reduce": lambda d: commcost.ring_all_reduce(d(number(0, 2.0**50)), d(count(1, 10**6)), link(d)),
    "ring_reduce_scatter": lambda d: commcost.ring_reduce_scatter(d(number(0, 2.0**50)), d(count(1, 10**6)), link(d)),
    "ring_all_gather": lambda d: commcost.ring_all_gather(d(number(0, 2.0**50)), d(count(1, 10**6)), link(d)),
    "collective_cost": lambda d: commcost.collective_cost(d(OPS), d(number(0, 2.0**50)), d(count(1, 4096)),
                                                          fabric(d)),
    "algorithm_costs": lambda d: commcost.algorithm_costs(d(OPS), d(number(0, 2.0**50)), d(count(1, 4096)),
                                                          fabric(d)),
    "protocol_costs": lambda d: commcost.protocol_costs(d(OPS), d(number(0, 2.0**50)), d(count(1, 512)), fabric(d),
                                                        d(st.sampled_from(["auto", "ring", "tree", "x", None]))),
    "bus_bandwidth_factor": lambda d: commcost.bus_bandwidth_factor(d(OPS), d(count(1, 10**6))),
    "system_topology": lambda d: commcost.system_topology(
        d(st.sampled_from(["dgx-h100", "dgx-b200", "", "nope", None])), nodes=d(count(1, 10**5))),
    "system_group": lambda d: commcost.system_group(
        d(st.sampled_from(["dgx-h100", "dgx-a100", "nope"])), nodes=d(st.one_of(st.none(), count(1, 10**5))),
        gpus=d(st.one_of(st.none(), count(1, 10**6)))),
    "place": lambda d: commcost.place(d(count(1, 10**6)), commcost.system_topology("dgx-h100", nodes=8)),
    "Placement": lambda d: commcost.Placement(gpus=d(count(1, 64)), nodes=d(count(1, 8)),
                                              gpus_per_node=d(count(1, 8)), min_gpus_per_node=d(count(1, 8))),
    "Topology": lambda d: commcost.Topology(gpus_per_node=d(count(1, 1024)), nodes=d(count(1, 10**5)),
                                            intra=link(d), inter=link(d), oversubscription=d(number(1, 64))),
    "ddp_bucket_caps": lambda d: commcost.ddp_bucket_caps(d(st.one_of(st.none(), number(2.0**-20, 2.0**40))),
                                                          first_bucket_bytes=d(st.one_of(st.none(),
                                                                                         count(1, 2**40)))),
    "DdpBucketCaps": lambda d: commcost.DdpBucketCaps(bucket_cap_bytes=d(count(1, 2**40)),
                                                      first_bucket_cap_bytes=d(count(1, 2**40))),
    "size_grid": lambda d: commcost.size_grid(d(number(1, 2**20)), d(number(1, 2**30)), d(number(1.01, 16))),
    "Sample": lambda d: commcost.Sample(size_bytes=d(number(0, 2.0**40)), time_s=d(number(0, 10))),
    "fit_alpha_beta": lambda d: commcost.fit_alpha_beta(
        [commcost.Sample(size_bytes=s, time_s=d(number(1e-6, 1)))
         for s in d(st.lists(st.integers(1, 2**34), min_size=0, max_size=8, unique=True))],
        op=commcost.Collective.ALL_REDUCE, gpus=d(count(2, 1024)), max_regimes=d(count(1, 100))),
    "Regime": lambda d: commcost.Regime(min_size_bytes=d(number(0, 2.0**40)), max_size_bytes=d(number(0, 2.0**60)),
                                        alpha_s=d(number(0, 1)), bandwidth_bytes_per_s=d(number(1e3, 1e15))),
    "OverlapBounds": lambda d: commcost.OverlapBounds(compute_s=d(number(0, 1e3)), comm_s=d(number(0, 1e3)),
                                                      window_s=d(number(0, 1e3)), after_s=d(number(0, 1e3))),
    "crossover_bytes": lambda d: commcost.crossover_bytes(flat(d), d(count(1, 4096)),
                                                          near_bytes=d(number(1, 2.0**40))),
    "bucket_row": lambda d: commcost.bucket_row(d(number(0, 2.0**40)), d(number(1, 2.0**34)), d(count(1, 4096)),
                                                flat(d)),
    "bucket_advice": lambda d: commcost.bucket_advice(d(number(1, 2.0**40)), d(count(1, 4096)), flat(d),
                                                      max_latency_share=d(number(1e-6, 0.99)),
                                                      tail_budget_s=d(number(1e-6, 10))),
    "data_parallel_comm": lambda d: commcost.data_parallel_comm(d(number(0, 2.0**40)), d(count(1, 4096)), flat(d)),
    "scaling_row": lambda d: commcost.scaling_row(
        gpus=d(count(1, 10**5)), message_bytes=d(number(0, 2.0**40)), compute_s=d(number(1e-6, 1e3)),
        overhead_s=d(number(0, 1e3)), overlap_fraction=d(number(0, 1)), comm=flat(d)),
    "model_spec": lambda d: commcost.model_spec(d(st.one_of(st.sampled_from(["llama2-7b", "gpt3-175b"]),
                                                            st.text(max_size=12), HOSTILE))),
    "model_preset": lambda d: commcost.model_preset(d(st.one_of(st.sampled_from(["llama2-7b"]),
                                                                st.text(max_size=12), HOSTILE))),
    "model_params": lambda d: commcost.model_params(d(st.one_of(st.just(commcost.model_spec("llama2-7b")),
                                                                HOSTILE))),
    "TransformerSpec": lambda d: commcost.model_params(commcost.TransformerSpec(
        layers=d(count(1, 10_000)), hidden=d(count(1, 10**6)), heads=d(count(1, 1024)), vocab=d(count(1, 10**8)))),
    "Layout": lambda d: commcost.Layout(dp=d(count(1, 10**6)), tp=d(count(1, 64)), pp=d(count(1, 64)),
                                        micro_batch=d(count(1, 64)), global_batch=d(count(1, 10**7))),
    "memory_per_gpu": lambda d: commcost.memory_per_gpu(
        d(st.one_of(st.just(commcost.model_spec("llama2-7b")), HOSTILE)),
        commcost.Layout(dp=8, global_batch=d(st.sampled_from([8, 64, 1024]))),
        seq=d(count(1, 10**6)), capacity_bytes=d(number(1, 2.0**40)), weight_bytes=d(number(0, 4)),
        expert_load=d(number(0.1, 8))),
    "parse_nccl_tests": lambda d: commcost.parse_nccl_tests(d(st.one_of(st.text(max_size=300), st.just(
        "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
        "  1024 256 float sum -1 " + " ".join(["nan"] * 8) + "\n")))),
    "assign_buckets_by_size": lambda d: commcost.assign_buckets_by_size(
        d(st.lists(count(0, 2**30), max_size=20)), d(st.lists(count(1, 2**30), min_size=1, max_size=3))),
    "initial_buckets": lambda d: commcost.initial_buckets(d(st.lists(count(0, 2**30), max_size=20)),
                                                          commcost.ddp_bucket_caps(25)),
    "rebuilt_buckets": lambda d: commcost.rebuilt_buckets(
        sizes := d(st.lists(st.integers(0, 2**30), max_size=20)),
        d(st.one_of(st.permutations(list(range(len(sizes)))), st.lists(count(-2, 30), max_size=20))),
        commcost.ddp_bucket_caps(25)),
    "simulate_timeline": lambda d: commcost.simulate_timeline(commcost.TimelineInputs(
        gpus=d(count(1, 4096)), comm=flat(d), step_s=d(number(1e-6, 1e3)), params=d(number(0, 1e10)))),
    "comm_allreduce_cost": lambda d: commcost.comm_allreduce_cost(commcost.TimelineInputs(
        gpus=d(count(1, 4096)), comm=flat(d), step_s=d(number(1e-6, 1e3)), params=d(number(0, 1e12)))),
    "communication_budget": lambda d: commcost.communication_budget(commcost.BudgetInputs(
        gpus=d(count(1, 4096)), comm=flat(d), params=d(number(1e6, 1e12)), step_s=d(number(1e-6, 1e3)),
        intra_node_comm=flat(d))),
    "layer_ratio": lambda d: commcost.layer_ratio(commcost.LayerInputs(
        gpus=d(count(1, 4096)), comm=flat(d), hidden=d(count(1, 10**5)), seq=d(count(1, 10**6)))),
    "ProfileScope": lambda d: commcost.ProfileScope(op=d(OPS), gpus=d(count(1, 4096))),
}
"""Name -> a call of it from ``draw``, each argument plausible or hostile."""

NOT_FUZZED = {
    # reading and writing files, running processes: their hostile inputs are files and signals, tested in
    # tests/calibrate (*_hostile.py), tests/trace (test_trace_hostile.py, test_pool.py, test_scheduler.py)
    "load_profile": "reads a file", "load_series": "reads a file", "read_nccl_tests": "reads a file",
    "save_profile": "writes a file", "measure": "runs torch.distributed ranks", "MeasureConfig": "measure's input",
    "analyze_trace": "reads trace files", "timeline_chrome_trace": "formats a simulated Timeline (output)",
    "seed_analysis": "no arguments", "seed_inputs": "preset keys only (tests/analyses/test_scaling.py)",
    # results: built by the functions above, not by a caller
    "AlphaBetaFit": "a fit's result", "BucketAdvice": "a result", "BucketChoice": "a result", "BucketRow": "a result",
    "BucketSweep": "a result", "BucketTiming": "a result", "Budget": "a result", "CollectiveCost": "a result",
    "Comparison": "a result", "CurvePoint": "a result", "LayerRatio": "a result", "MemoryBreakdown": "a result",
    "NcclTestsRun": "a parse's result", "Plan": "a result", "Profile": "a fit's result, saved and loaded",
    "ScalingCurve": "a result", "ScalingRow": "a result", "Series": "a read's result", "Timeline": "a result",
    "TraceSummary": "a result", "CommOp": "a layout's result",
    # inputs whose use is fuzzed through a function above, or that need a whole valid object graph
    "BudgetInputs": "fuzzed through communication_budget", "LayerInputs": "fuzzed through layer_ratio",
    "TimelineInputs": "fuzzed through simulate_timeline", "ScalingInputs": "fuzzed through scaling_row's terms",
    "PlanInputs": "the plan kernel's inputs: tests/analyses/plan", "fit_efficiency": "needs a PlanInputs",
    "scaling_curve": "scaling_row per GPU count (fuzzed)", "sweep_buckets": "simulate_timeline per cap (fuzzed)",
    "compare": "signed errors by definition", "predict_rows": "rows of a trace",
    "ProfileModel": "a profile's model", "profile_model": "a profile's model", "ProtocolModel": "preset data",
    "CommModel": "abstract base", "InputError": "the error itself", "MeasurementFailed": "an error",
    "Algorithm": "an enum", "Collective": "an enum", "Protocol": "an enum",
}


def test_every_public_name_is_fuzzed_or_says_why_not():
    assert set(commcost.__all__) == set(TARGETS) | set(NOT_FUZZED), \
        sorted(set(commcost.__all__) ^ (set(TARGETS) | set(NOT_FUZZED)))
    assert not set(TARGETS) & set(NOT_FUZZED)


def _numbers(value, where="result", seen=None):
    """Every int/float inside ``value`` (dataclass fields, tuples, lists, dicts), with where it is."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, bool) or isinstance(value, (str, bytes, enum.Enum)) or value is None:
        return
    if isinstance(value, (int, float)):
        yield where, value
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _numbers(getattr(value, f.name), f"{where}.{f.name}", seen)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{where}[{k!r}]", seen)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{where}[{i}]", seen)


SIGNED = {
    "backward_margin_s": "f_b t_c - T: negative when the all-reduce does not fit in backward (its docstring)",
    "alpha_s": "a fitted intercept",
}
"""Result fields (by name) that are signed by definition, with why."""

UNBOUNDED = {
    "max_size_bytes": "the last regime's open end is inf (Regime's docstring)",
    "max_bucket_bytes": "inf when P = 1: one GPU communicates nothing, so no cap is too large (its docstring)",
}
"""Result fields (by name) whose inf is a documented sentinel for "no upper end", with why."""


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_call_is_finite_and_non_negative_or_refused(name, data):
    try:
        result = TARGETS[name](data.draw)
    except (InputError, TypeError):
        return
    for where, x in _numbers(result):
        field = where.rsplit(".", 1)[-1].split("[", 1)[0]
        if isinstance(x, float) and not (x == math.inf and field in UNBOUNDED):
            assert math.isfinite(x), f"{name}: {where} = {x}"
        assert x >= 0 or field in SIGNED, f"{name}: {where} = {x}"
