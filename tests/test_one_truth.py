"""One truth: the same setup gives the same number in every command (issue 9, "What it must show").

Every test here runs two or more commands (as a user would: subprocesses, no install) on the
same setup and compares what they print, or checks a property of the one CommModel they share.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from commcost.analyses.drill.budget import BudgetInputs, budget_timeline_inputs, communication_budget
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.topology import Link
from commcost.comm.systems import system_group
from commcost.step.timeline import simulate_timeline
from conftest import DATA, run_commcost, run_tool

DRILL_LINK = ("--gpus", "32", "--bw", "25", "--latency", "20")
DGX = ("--system", "dgx-h100", "--nodes", "4")
STEP = ("--params", "1.3", "--step-ms", "400")


def _json(run, *args):
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("setup", [DRILL_LINK, DGX], ids=["drill-link", "dgx-h100x4"])
def test_budget_timeline_and_collective_agree(setup):
    budget = _json(run_tool, *setup, *STEP)
    timeline = _json(run_commcost, "timeline", *setup, *STEP)
    whole = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "2600000000", *setup)
    tail = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "25MiB", *setup)
    rel = 1e-3
    # T: the gradient's all-reduce (2.6e9 B)
    assert budget["allreduce"]["total_s"] == pytest.approx(whole["time_s"], rel=rel)
    assert budget["allreduce"]["algorithm"] == whole["algorithm"]
    # the tail: one full 25 MiB bucket
    assert budget["step"]["tail_s"] == pytest.approx(tail["time_s"], rel=rel)
    # the simulated exposed time of DDP's default buckets, and their wire time
    assert budget["step"]["simulated"]["default_exposed_s"] == pytest.approx(timeline["exposed_s"], rel=rel)
    assert budget["step"]["simulated"]["default_wire_s"] == pytest.approx(timeline["wire_s"], rel=rel)
    # the bound never exceeds the simulation (issue 9 item 3: it printed 248 us against 122 us)
    assert budget["step"]["exposed_lower_bound_s"] <= timeline["exposed_s"] * (1 + 1e-12)


def test_drill_link_collective_runs_the_ring_the_budget_runs():
    # auto on one flat link is the ring: 2*31*20 us + 2*31/32 * 2.6e9/25e9 = 1.24 + 201.5 = 202.74 ms
    c = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "2.6GB", *DRILL_LINK)
    assert c["algorithm"] == "ring" and c["time_s"] == pytest.approx(0.20274)


def test_units_on_rates_and_latencies_mean_the_same_link():
    # 400 Gbit/s = 50 GB/s = the bare 50 (GB/s); 20 us = 0.02 ms = the bare 20 (us)
    base = ("--op", "all_reduce", "--size", "1GiB", "--gpus", "16")
    times = {_json(run_commcost, "collective", *base, "--bw", bw, "--latency", lat)["time_s"]
             for bw, lat in (("50", "20"), ("50GB/s", "20us"), ("400Gbps", "0.02ms"), ("400Gbit/s", "20"))}
    assert len(times) == 1


def test_params_as_a_raw_count_is_refused_with_the_intent():
    r = run_tool(*DRILL_LINK, "--params", "7e9", "--step-ms", "400")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "did you mean 7 (billions)?" in r.stderr


def test_model_registry_is_shared_by_budget_and_timeline():
    # llama2-7b: 6,738,415,616 params (hardware/models.json) -> S = 13,476,831,232 B in both
    b = _json(run_tool, *DRILL_LINK, "--model", "llama2-7b", "--step-ms", "400")
    t = _json(run_commcost, "timeline", *DRILL_LINK, "--model", "llama2-7b", "--step-ms", "400")
    assert b["message"]["bytes"] == t["message_bytes"] == 2 * 6_738_415_616
    # the seed's 7b is an alias of the registry's llama2-7b
    alias = _json(run_tool, *DRILL_LINK, "--model", "7b", "--step-ms", "400")
    assert alias["message"]["bytes"] == b["message"]["bytes"]


# --- a calibrated profile predicts exactly what validate scores --------------------------

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def test_collective_with_a_profile_equals_validate(tmp_path):
    profile = tmp_path / "ib.json"
    r = run_commcost("fit", str(LOG), "-o", str(profile))
    assert r.returncode == 0, r.stderr
    v = _json(run_commcost, "validate", str(LOG), "--profile", str(profile))
    sizes = [p["size_bytes"] for p in v["points"]]
    assert len(sizes) >= 2  # the log's sizes: compared one by one below
    c = _json(run_commcost, "collective", "--op", "all_reduce", "--sizes", ",".join(f"{s:.0f}" for s in sizes),
              "--profile", str(profile))
    predicted = {row["size_bytes"]: row["time_s"] for row in c["rows"]}
    for p in v["points"]:
        assert predicted[p["size_bytes"]] == pytest.approx(p["predicted_s"], rel=1e-3), p["size_bytes"]


def test_profile_regimes_reach_budget_timeline_and_scaling(tmp_path):
    profile = tmp_path / "ib.json"
    assert run_commcost("fit", str(LOG), "-o", str(profile)).returncode == 0
    c = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "2600000000", "--profile", str(profile))
    b = _json(run_tool, "--profile", str(profile), *STEP)
    s = _json(run_commcost, "scaling", "--params", "1.3", "--compute-ms", "400", "--gpus", "16",
              "--profile", str(profile))
    assert b["allreduce"]["total_s"] == pytest.approx(c["time_s"], rel=1e-9)
    assert s["rows"][0]["comm_s"] == pytest.approx(c["time_s"], rel=1e-9)


def test_profile_outside_its_scope_is_refused_or_extrapolated_with_a_warning(tmp_path):
    profile = tmp_path / "ib.json"
    assert run_commcost("fit", str(LOG), "-o", str(profile)).returncode == 0
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--gpus", "64", "--profile", str(profile))
    assert r.returncode == 2 and "measured on all_reduce over 16 ranks" in r.stderr and "--extrapolate" in r.stderr
    r = run_commcost("collective", "--op", "all_to_all", "--size", "1GiB", "--profile", str(profile))
    assert r.returncode == 2 and "op all_to_all" in r.stderr
    r = run_commcost("collective", "--op", "all_reduce", "--size", "1GiB", "--gpus", "64", "--profile", str(profile),
                     "--extrapolate")
    assert r.returncode == 0 and "warning" in r.stderr and "extrapolated" in r.stderr


# --- the bucket advice of issue 9 item 6 ----------------------------------------------------

@pytest.mark.parametrize("args", [
    ("--system", "dgx-h100", "--nodes", "4", "--model", "llama2-7b", "--step-ms", "1200"),
    ("--system", "dgx-h100", "--nodes", "8", "--model", "llama2-70b", "--step-ms", "10000"),
], ids=["llama2-7b-4-nodes", "llama2-70b-8-nodes"])
def test_recommended_bucket_is_within_tolerance_and_never_worse_than_default(args):
    d = _json(run_commcost, "timeline", *args, "--bucket", "auto")
    best, default = d["best"], d["pytorch_default"]
    tolerance = max(0.05 * best["min_exposed_s"], 50e-6)
    assert best["tolerance_s"] == pytest.approx(tolerance)
    assert best["exposed_s"] <= best["min_exposed_s"] + tolerance
    assert best["exposed_s"] <= default["exposed_s"]
    # main recommended 2,435 MiB (6 buckets) for the first and 11,585 MiB for the second
    assert best["bucket_bytes"] < 2435 * 2**20


def test_drill_at_256_gpus_no_longer_says_hides():
    # T = 217.39 ms fits the 266.67 ms window (first order), but every bucketing leaves > 50 ms exposed
    d = _json(run_tool, "--gpus", "256", "--bw", "25", "--latency", "20", *STEP)
    assert d["step"]["first_order_verdict"] == "HIDES"
    assert d["step"]["overlap_verdict"] == "DOES NOT HIDE"
    assert d["step"]["simulated"]["best_exposed_s"] > 0.05 * 0.4   # beyond the 20 ms tail budget


def test_nvl72_across_pods_names_the_fitted_spine_and_inside_one_pod_says_nothing():
    # 20 racks = 3 pods of 8: the spine's share is fitted on one table, said on stderr and in the header
    r = run_tool("--system", "gb200-nvl72", "--nodes", "20", *STEP)
    assert r.returncode == 0
    assert "across 3 pods of 8 nodes" in r.stderr and "CAUTION:" in r.stdout
    # 2 racks are inside one pod, where the two-tier terms match the 2-rack table: no caution
    r = run_tool("--system", "gb200-nvl72", "--nodes", "2", *STEP)
    assert r.returncode == 0
    assert "pods" not in r.stderr and "CAUTION" not in r.stdout


def test_system_budget_prints_no_bandwidth_above_a_physical_link():
    r = run_tool(*DGX, *STEP)
    assert r.returncode == 0 and "ring all-reduce" not in r.stdout.splitlines()[3]
    assert "484" not in r.stdout  # the flat-equivalent 484.6 GB/s of main
    assert "in_network" in r.stdout


# --- properties ------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(2, 512), bw=st.floats(1e9, 1e12), lat=st.floats(0.0, 1e-4),
       params=st.floats(1e7, 2e10), step=st.floats(1e-3, 10.0), fb=st.floats(0.1, 1.0), k=st.integers(1, 8))
def test_lower_bound_never_exceeds_the_simulated_exposed_time_on_a_flat_link(gpus, bw, lat, params, step, fb, k):
    comm = FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw, latency_s=lat))
    _check_bound(BudgetInputs(gpus=gpus, comm=comm, params=params, step_s=step, backward_fraction=fb,
                              grad_accum=k, scaling_gpus=(gpus,),
                              intra_node_comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=300e9, latency_s=lat))))


@settings(max_examples=20, deadline=None)
@given(system=st.sampled_from(["dgx-a100", "dgx-h100", "hgx-b200", "aws-p5"]), nodes=st.integers(1, 16),
       params=st.floats(1e8, 2e10), step=st.floats(1e-2, 5.0), fb=st.floats(0.2, 1.0))
def test_lower_bound_never_exceeds_the_simulated_exposed_time_on_a_fabric(system, nodes, params, step, fb):
    topo, P = system_group(system, nodes=nodes)
    _check_bound(BudgetInputs(gpus=P, comm=FabricModel(topology=topo), params=params, step_s=step,
                              backward_fraction=fb, intra_node_comm=FlatLinkModel(link=topo.intra),
                              scaling_gpus=(P,)))


def _check_bound(inp: BudgetInputs) -> None:
    b = communication_budget(inp)
    default = simulate_timeline(budget_timeline_inputs(inp))
    assert b.step.exposed_lower_bound_s <= default.exposed_s * (1 + 1e-9) + 1e-15
    assert b.overlap is not None and b.overlap.default.exposed_s == pytest.approx(default.exposed_s)
    # the recommended cap never exposes more than the default
    assert b.overlap.best.exposed_s <= default.exposed_s * (1 + 1e-9) + 1e-15


def test_budget_says_when_pure_ddp_does_not_fit_and_points_at_plan():
    # llama2-7b: 6,738,415,616 params x 16 B (2 + 2 + 12, mixed-precision Adam) = 107.8 GB > 80 GB on an H100
    d = _json(run_tool, *DGX, "--model", "llama2-7b", "--step-ms", "1200")
    assert d["memory"]["model_states_bytes"] == 16 * 6_738_415_616
    assert d["memory"]["fits"] is False and d["memory"]["gpu"] == "h100-sxm"
    r = run_tool(*DGX, "--model", "llama2-7b", "--step-ms", "1200")
    assert "DOES NOT FIT" in r.stdout and "commcost plan" in r.stdout
    # the drill's 1.3 B: 20.8 GB fits
    assert _json(run_tool, *DRILL_LINK, *STEP, "--gpu", "h100-sxm")["memory"]["fits"] is True


def test_collective_prints_the_measured_band_of_its_class_on_presets():
    ratios = json.loads((DATA.parent.parent / "src/commcost/hardware/bands.json").read_text())["multi_node"]
    d = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "64MiB", "--system", "dgx-h100",
              "--nodes", "2")
    # band = (r_lo T, r_hi T) with the multi-node class's ratios (2 nodes of 8)
    assert d["band_s"] == pytest.approx([ratios["low_ratio"] * d["time_s"], ratios["high_ratio"] * d["time_s"]])
    flat = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "64MiB", *DRILL_LINK)
    assert flat["band_s"] is None  # no measured class for a hand-given link


_COMM_MODEL_KINDS = {"FlatLinkModel", "FabricModel", "ProfileModel"}
_MAY_BUILD_COMM_MODELS = {"cli/_fabric.py", "calibrate/profile.py"}
"""The one resolver, and the profile loader it calls; comm/ defines the kinds (``scaled()`` and the like)."""


def test_every_comm_model_comes_from_the_one_resolver():
    # an analysis, a report or an input builder that builds its own CommModel prices with a second link
    import ast
    from pathlib import Path

    import commcost

    root = Path(commcost.__file__).parent
    builders: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) \
                    in _COMM_MODEL_KINDS:
                builders[rel] = builders.get(rel, 0) + 1
    outside = sorted(f for f in builders if f not in _MAY_BUILD_COMM_MODELS and not f.startswith("comm/"))
    assert outside == []
    assert builders.get("cli/_fabric.py", 0) >= 5  # the resolver's own: flat, system, custom, tier, seed fabrics
