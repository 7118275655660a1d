"""The measured band in budget, timeline and plan (issue 14): shown for a system preset alone, its
numbers the class ratios of bands.json applied by the one rule (commcost.comm.band.composed_band),
and absent for the drill's flat link and for calibrated profiles.

The ratios are read from bands.json here, not pinned, so the tests hold whatever the next
derivation writes; every prediction T is recomputed from the library's CommModel, not read from
the command's own band.
"""

from __future__ import annotations

import json

import pytest

from commcost.comm.band import BandEdgeModel, band_models, composed_band
from commcost.comm.model import FabricModel
from commcost.comm.systems import system_group
from commcost.step.ddp_buckets import DdpBucketCaps
from commcost.step.timeline import TimelineInputs, simulate_timeline
from commcost.core.units import format_seconds
from conftest import DATA, ROOT, run_commcost, run_tool

BANDS = json.loads((ROOT / "src/commcost/hardware/bands.json").read_text())
R = {k: (v["low_ratio"], v["high_ratio"]) for k, v in BANDS.items() if not k.startswith("_")}
DGX2 = ("--system", "dgx-h100", "--nodes", "2")
STEP = ("--params", "1.3", "--step-ms", "400")
S = 1.3e9 * 2  # the gradient: 1.3e9 bf16 parameters = 2.6e9 B
LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"
ONE_NODE_LOG = DATA / "nccl_tests" / "h100_nvlink_1node_8gpu_all_reduce.log"


def _json(run, *args):
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))


def _dgx2():
    topo, P = system_group("dgx-h100", nodes=2)
    return FabricModel(topology=topo), topo, P


# --- budget ----------------------------------------------------------------------------------------

def test_budget_on_a_preset_prints_the_band_of_T_from_the_class_ratios():
    comm, _, P = _dgx2()
    T = comm.cost("all_reduce", S, P).total_s  # independently: the fabric's all-reduce of 2.6e9 B on 16 GPUs
    r_lo, r_hi = R["multi_node"]  # 16 GPUs = 2 nodes of 8: multi_node
    d = _json(run_tool, *DGX2, *STEP)
    assert d["allreduce"]["total_s"] == pytest.approx(T, rel=1e-12)
    assert d["allreduce"]["band_class"] == "multi_node"
    assert d["allreduce"]["band_ratios"] == [r_lo, r_hi]
    assert d["allreduce"]["band_s"] == pytest.approx([r_lo * T, r_hi * T], rel=1e-12)
    text = run_tool(*DGX2, *STEP).stdout
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if "measured band" in ln)
    line = lines[i]  # with the lines it wraps onto (80 columns off a terminal): indented deeper than it
    indent = len(line) - len(line.lstrip())
    for more in lines[i + 1:]:
        if len(more) - len(more.lstrip()) <= indent:
            break
        line += " " + more.strip()
    assert f"T = {format_seconds(r_lo * T)} - {format_seconds(r_hi * T)} on measured clusters of this class" in line
    assert "multi_node" in line and "above the prediction" not in line  # r_lo <= 1 <= r_hi: it brackets T


def test_budget_band_of_the_exposed_time_is_recomputed_not_scaled():
    comm, _, P = _dgx2()
    T = comm.cost("all_reduce", S, P).total_s
    tail = comm.cost("all_reduce", 25 * 2**20, P).total_s  # a full 25 MiB last bucket
    r_lo, r_hi = R["multi_node"]
    # a step whose backward window W = 2/3 step sits halfway between r_lo T and r_hi T:
    # W = (r_lo + r_hi)/2 T, step = 1.5 W. The point (T < W): first-order exposed = max(tail, T - W) = tail.
    W = (r_lo + r_hi) / 2 * T
    step_ms = 1.5 * W * 1e3
    d = _json(run_tool, *DGX2, "--params", "1.3", "--step-ms", repr(step_ms))
    st = d["step"]
    assert st["backward_window_s"] == pytest.approx(W, rel=1e-9)
    assert st["first_order_exposed_s"] == pytest.approx(max(tail, T - W), rel=1e-9)
    lo, hi = st["first_order_exposed_band_s"]
    # low edge: r_lo T < W, so the tail stays: r_lo tail. High edge: r_hi T - W = (r_hi - r_lo)/2 T > r_hi tail,
    # so the window overflows: not r_hi times the point's exposed time (which is only the tail)
    assert lo == pytest.approx(max(r_lo * tail, r_lo * T - W), rel=1e-9) == pytest.approx(r_lo * tail, rel=1e-9)
    assert hi == pytest.approx(max(r_hi * tail, r_hi * T - W), rel=1e-9) == pytest.approx(r_hi * T - W, rel=1e-9)
    assert hi > 1.5 * r_hi * st["first_order_exposed_s"]
    # the simulated exposed time at the same caps, re-simulated with every bucket's all-reduce at r
    sim = st["simulated"]
    inp = TimelineInputs(gpus=P, comm=comm, step_s=step_ms / 1e3, params=1.3e9)
    for key, first in (("default", sim["default_first_bucket_bytes"]), ("best", None)):
        cap = int(sim[f"{key}_bucket_bytes"])  # the best cap's first bucket is the cap (an explicit bucket_cap_mb)
        caps = DdpBucketCaps(bucket_cap_bytes=cap, first_bucket_cap_bytes=int(first or cap))
        want = [simulate_timeline(inp, caps, allreduce_s=lambda c, r=r: r * comm.cost("all_reduce", c, P).total_s)
                .exposed_s for r in (r_lo, r_hi)]
        assert sim[f"{key}_exposed_band_s"] == pytest.approx(want, rel=1e-9, abs=1e-15), key


def test_collective_and_budget_give_the_same_band_for_the_same_all_reduce():
    budget = _json(run_tool, *DGX2, *STEP)
    coll = _json(run_commcost, "collective", "--op", "all_reduce", "--size", "2600000000", *DGX2)
    assert coll["time_s"] == budget["allreduce"]["total_s"]
    assert coll["band_s"] == budget["allreduce"]["band_s"]  # one rule, one number: exactly equal


def test_multi_pod_band_is_worded_by_the_side_it_lies_on():
    # 20 NVL72 racks span 3 pods of 8: the multi_pod class
    d = _json(run_tool, "--system", "gb200-nvl72", "--nodes", "20", *STEP)
    assert d["allreduce"]["band_class"] == "multi_pod"
    r_lo, r_hi = R["multi_pod"]
    T = d["allreduce"]["total_s"]
    assert d["allreduce"]["band_s"] == pytest.approx([r_lo * T, r_hi * T], rel=1e-12)
    line = next(ln for ln in run_tool("--system", "gb200-nvl72", "--nodes", "20", *STEP).stdout.splitlines()
                if "measured band" in ln)
    # bands.json has r_lo = 0.996 today: the band brackets T and the line must not call it a lower bound;
    # were it re-derived above 1, the line must say so
    assert ("all above the prediction" in line) == (r_lo > 1)


# --- timeline --------------------------------------------------------------------------------------

def test_timeline_on_a_preset_prints_the_band_of_wire_exposed_and_step():
    comm, _, P = _dgx2()
    r_lo, r_hi = R["multi_node"]
    d = _json(run_commcost, "timeline", *DGX2, *STEP)
    # T_w independently: the fabric's all-reduce of every bucket the timeline lists, summed
    wire = sum(comm.cost("all_reduce", b["size_bytes"], P).total_s for b in d["buckets"])
    assert d["wire_s"] == pytest.approx(wire, rel=1e-9)
    assert d["band_class"] == "multi_node"
    assert d["wire_band_s"] == pytest.approx([r_lo * wire, r_hi * wire], rel=1e-9)
    # E and the step: the same caps (DDP's default) re-simulated with each bucket at r T(c)
    inp = TimelineInputs(gpus=P, comm=comm, step_s=0.4, params=1.3e9)
    edges = [simulate_timeline(inp, allreduce_s=lambda c, r=r: r * comm.cost("all_reduce", c, P).total_s)
             for r in (r_lo, r_hi)]
    assert d["exposed_band_s"] == pytest.approx([e.exposed_s for e in edges], rel=1e-9, abs=1e-15)
    # step = k t_c + E + t_opt: compute (0.4 s) unchanged
    assert d["step_band_s"] == pytest.approx([0.4 + e.exposed_s for e in edges], rel=1e-12)
    text = run_commcost("timeline", *DGX2, *STEP).stdout
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "measured band" in ln)
    line = lines[at]
    assert f"T_w = {format_seconds(r_lo * wire)} - {format_seconds(r_hi * wire)}" in line
    # the band's derivation follows on the next lines (wrapped to the terminal)
    assert "on measured clusters of this class" in " ".join(ln.strip() for ln in lines[at:at + 4])


def test_timeline_auto_band_is_the_best_caps():
    d = _json(run_commcost, "timeline", *DGX2, *STEP, "--bucket", "auto")
    r_lo, r_hi = R["multi_node"]
    assert d["wire_band_s"] == pytest.approx([r_lo * d["wire_s"], r_hi * d["wire_s"]], rel=1e-9)
    assert d["exposed_band_s"][0] <= d["exposed_band_s"][1]


# --- plan ------------------------------------------------------------------------------------------

# one micro-batch of 512 tokens: a forward short enough that ZeRO-1's weight all-gather is not wholly hidden
PLAN = ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "16", "--tp", "8", "--global-batch", "2",
        "--seq", "512", "--zero", "1", "--no-tp-comm-overlap")
"""TP without communication overlap (with no stack named a ZeRO-1 layout otherwise takes Megatron-Core's recipe
overlap, commcost.workload.recipes): every TP collective on the critical path, so its band scales wire and exposed
alike."""


def test_plan_on_a_preset_bands_each_collective_by_its_groups_class():
    comm, _, _ = _dgx2()
    d = _json(run_commcost, *PLAN)
    lines = {(c["dimension"], c["op"]): c for c in d["comm"]}
    tp, rs, ag = lines["tp", "all_reduce"], lines["dp", "reduce_scatter"], lines["dp", "all_gather"]
    # TP = 8 ranks inside one node: one_node; DP = 2 ranks, one per node: multi_node
    assert tp["band_class"] == "one_node" and rs["band_class"] == ag["band_class"] == "multi_node"
    assert d["band_ratios"] == {"one_node": list(R["one_node"]), "multi_node": list(R["multi_node"])}
    T_tp = comm.cost("all_reduce", tp["size_bytes"], 8, ranks_per_node=8).total_s
    assert tp["one_s"] == pytest.approx(T_tp, rel=1e-12)
    (lo1, hi1), (lo2, hi2) = R["one_node"], R["multi_node"]
    # TP is on the critical path: wire = exposed = count x T, and both scale by r exactly
    assert tp["time_band_s"] == pytest.approx([lo1 * tp["count_per_step"] * T_tp, hi1 * tp["count_per_step"] * T_tp],
                                              rel=1e-9)
    assert tp["exposed_band_s"] == pytest.approx(tp["time_band_s"], rel=1e-12)
    # ZeRO-1's weight all-gather hides behind the next forward: exposed = max(0, T_ag - t_fwd), so
    # t_fwd = T_ag - exposed at the point, and each edge is max(0, r T_ag - t_fwd), not r x exposed
    # issue 20: the all-gather across nodes has a band of its own (bands.json all_gather/multi_node), the
    # reduce-scatter the class's
    from commcost.comm.band import class_ratios

    lo_ag, hi_ag = class_ratios("all_gather", "multi_node")
    assert (lo_ag, hi_ag) != (lo2, hi2) and class_ratios("reduce_scatter", "multi_node") == (lo2, hi2)
    T_ag = comm.cost("all_gather", ag["size_bytes"], 2, ranks_per_node=1).total_s
    assert ag["one_s"] == pytest.approx(T_ag, rel=1e-12) and ag["exposed_s"] > 0
    t_fwd = T_ag - ag["exposed_s"]
    assert ag["exposed_band_s"] == pytest.approx([max(0.0, lo_ag * T_ag - t_fwd), max(0.0, hi_ag * T_ag - t_fwd)],
                                                 rel=1e-6, abs=1e-12)
    # totals: the wire is the sum of each line's scaled wire time (each collective by its own band where it has
    # one); with pp = 1 there is no bubble, so the step's edges are compute + optimizer + each edge's exposed
    # communication + the losses that grow with the job re-priced at that edge (step/losses.py): the straggler term
    # scales compute (unchanged at the edges), the contention and gradient-norm terms scale communication, so each
    # edge's losses lie between the straggler term and straggler + max band ratio x (contention + sync)
    for j in (0, 1):
        assert d["wire_band_s"][j] == pytest.approx(
            sum(class_ratios(c["op"], c["band_class"])[j] * c["time_s"] for c in d["comm"]), rel=1e-9)
        assert d["exposed_comm_band_s"][j] == pytest.approx(sum(c["exposed_band_s"][j] for c in d["comm"]), rel=1e-12)
        b = d["breakdown"]
        edge_losses = d["step_band_s"][j] - (b["compute_s"] + b["optimizer_s"] + d["exposed_comm_band_s"][j])
        L, r_max = b["losses"], max(hi1, hi2, hi_ag)
        assert L["straggler_s"] * (1 - 1e-9) <= edge_losses
        assert edge_losses <= L["straggler_s"] + r_max * (L["contention_s"] + L["sync_s"])
    text = run_commcost(*PLAN).stdout
    assert "measured band: on measured clusters of these classes" in text
    assert (f"step {format_seconds(d['step_band_s'][0])} - {format_seconds(d['step_band_s'][1])}, exposed comm "
            f"{format_seconds(d['exposed_comm_band_s'][0])} - {format_seconds(d['exposed_comm_band_s'][1])}") in text


def test_band_edge_model_classes_a_strided_group_by_its_ranks_per_node():
    comm, topo, _ = _dgx2()
    low, high = band_models(comm, topo)
    # 8 ranks packed on one node: one_node; the same 8 ranks one per node (8 nodes): multi_node
    packed = comm.cost("all_reduce", 2**26, 8).total_s
    assert low.cost("all_reduce", 2**26, 8).total_s == pytest.approx(R["one_node"][0] * packed, rel=1e-12)
    strided = comm.cost("all_reduce", 2**26, 8, ranks_per_node=1).total_s
    assert high.cost("all_reduce", 2**26, 8, ranks_per_node=1).total_s == pytest.approx(
        R["multi_node"][1] * strided, rel=1e-12)
    # composed_band runs the caller's code at both edges
    assert composed_band(lambda m: m.cost("all_reduce", 2**26, 8).total_s, comm, topo) == pytest.approx(
        (R["one_node"][0] * packed, R["one_node"][1] * packed), rel=1e-12)
    assert isinstance(low, BandEdgeModel) and low.edge == "low" and high.edge == "high"
    assert "low edge" in low.describe()


# --- no band off presets ---------------------------------------------------------------------------

DRILL = ("--gpus", "32", "--bw", "25", "--latency", "20")


def _no_band_keys(obj, path=""):
    """Every key with "band" in its name is null (a list of lines: in each)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if "band" in k and "bandwidth" not in k:
                assert v is None, f"{path}.{k} = {v!r}"
            else:
                _no_band_keys(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _no_band_keys(v, f"{path}[{i}]")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("profiles")
    flat, tiers = d / "ib.profile.json", d / "h100.tiers.json"
    assert run_commcost("fit", str(LOG), "-o", str(flat)).returncode == 0
    assert run_commcost("fit", str(ONE_NODE_LOG), str(LOG), "--tiers", "dgx-h100", "-o", str(tiers)).returncode == 0
    return flat, tiers


@pytest.mark.parametrize("cmd", [
    ("budget", *DRILL, *STEP, "--buckets", "1,8,16,25,100"),
    ("timeline", *DRILL, *STEP),
    ("timeline", *DRILL, *STEP, "--bucket", "auto"),
    ("plan", "--model", "llama2-7b", "--gpu", "h100-sxm", "--bw", "50", "--latency", "5", "--gpus", "32",
     "--global-batch", "256", "--zero", "1"),
], ids=["budget", "timeline", "timeline-auto", "plan"])
def test_the_drills_flat_link_prints_no_band(cmd):
    r = run_commcost(*cmd)
    assert r.returncode == 0, r.stderr
    assert "measured" not in r.stdout.replace("measured compute-only", "")
    _no_band_keys(_json(run_commcost, *cmd))


@pytest.mark.parametrize("which", ["flat", "tiers"])
def test_a_calibrated_profile_prints_no_band(profiles, which):
    path = str(profiles[0] if which == "flat" else profiles[1])
    nodes = () if which == "flat" else ("--nodes", "2")
    for cmd in (("budget", "--profile", path, *nodes, *STEP), ("timeline", "--profile", path, *nodes, *STEP),
                ("collective", "--op", "all_reduce", "--size", "64MiB", "--profile", path, *nodes)):
        r = run_commcost(*cmd)
        assert r.returncode == 0, r.stderr
        assert "on measured clusters" not in r.stdout and "measured band" not in r.stdout, cmd
        _no_band_keys(_json(run_commcost, *cmd))
    # a tier profile has the preset's topology (and protocols) but its own fitted tiers: still no band
    if which == "tiers":
        r = run_commcost("plan", "--model", "llama2-7b", "--gpu", "h100-sxm", "--profile", path, "--gpus", "16",
                         "--global-batch", "256", "--zero", "1", "--json")
        assert r.returncode == 0, r.stderr
        _no_band_keys(json.loads(r.stdout))


def test_drill_text_has_no_band_line_at_any_part():
    r = run_tool(*DRILL, *STEP, "--buckets", "1,8,16,25,100")
    assert r.returncode == 0 and "band" not in r.stdout.replace("bandwidth", "")
