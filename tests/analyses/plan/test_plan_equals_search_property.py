"""Property (issue 21, "One kernel"): ``plan`` on one row equals the search grid's row (both run
:mod:`commcost.analyses.plan.kernel`; the rest, collectives priced and compute, each its own way), over random
systems (GPUs per node 1-72, 6 among them; custom two-tier fabrics, system presets with their nodes
shrunk, flat links), random models of models.json (dense and MoE), random layouts and options, every
stack that runs the layout (past releases included) and random rank orders.

Each example draws a structural row (``W t p v c e d b t_e``) of the whole space, fixes it, lets the
grid price every categorical variant of it (SP, recomputation, ZeRO, bucket cap) and re-prices a few
of them with :func:`commcost.analyses.plan.plan.plan`: step, its parts and memory agree to 1e-9.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
from commcost.analyses.plan.space import _base_rows
from commcost.comm.fabric_model import FabricModel
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Topology
from commcost.hardware.registry import systems
from commcost.comm.systems import system_group
from commcost.parallel.layout import DEFAULT_ORDER, DIMENSIONS
from commcost.workload.stacks import KNOWN_STACKS, stack_layouts, stack_refuses
from commcost.workload.transformer import model_spec, model_spec_names

MODELS = tuple(n for n in model_spec_names() if n not in ("megatron-gpt-1008b",))
PRESETS = ("dgx-h100", "dgx-a100", "gb200-nvl72", "hgx-b200", "aws-p5", "mi300x-roce", "pcie-l40s", "gb300-nvl72")
GPUS = ("h100-sxm", "a100-sxm4-80gb", "b200", "gb200", "mi300x")
KEYS = ("step_s", "compute_s", "pipeline_bubble_s", "exposed_comm_s", "optimizer_s", "micro_batch_s")

gpus_per_node = st.one_of(st.just(6), st.sampled_from((3, 6, 12, 24, 72)), st.integers(1, 72))


@st.composite
def comm_models(draw, kind: str, G: int, W: int, preset: str):
    """A flat link, a custom two-tier fabric of ``G``-GPU nodes, or a preset with ``G`` GPUs per node."""
    nodes = -(-W // G)
    bw = st.floats(1e9, 900e9)
    lat = st.floats(5e-7, 3e-5)
    if kind == "flat":
        return FlatLinkModel(link=Link(bandwidth_bytes_per_s=draw(bw), latency_s=draw(lat)))
    if kind == "custom":
        return FabricModel(topology=Topology(
            gpus_per_node=G, nodes=nodes + draw(st.integers(0, 2)),
            intra=Link(bandwidth_bytes_per_s=draw(bw), latency_s=draw(lat)),
            inter=Link(bandwidth_bytes_per_s=draw(bw), latency_s=draw(lat)),
            oversubscription=draw(st.sampled_from((1.0, 1.0, 2.0))),
            nics_per_gpu=draw(st.sampled_from((1, 1, 2)))))
    topo, _ = system_group(preset, nodes=nodes, gpus_per_node=G)
    return FabricModel(topology=topo)


def _groups(row) -> tuple[tuple[int, int], ...]:
    """``(size, stride)`` of a structural row's groups under the default order (cp, dp, pp, ep, expert dp)."""
    _, t, p, _, c, e, d, _, _, te = row
    return (c, t), (c * d, t), (p, t * c * d), (e, te), (t * d * c // (e * te), te * e)


@st.composite
def cases(draw):
    spec = model_spec(draw(st.sampled_from(MODELS)))
    kind = draw(st.sampled_from(("flat", "custom", "custom", "preset", "preset")))
    preset = draw(st.sampled_from(PRESETS))
    G = draw(gpus_per_node)
    if kind == "preset":        # a preset's nodes may be lowered, not raised
        G = min(G, int(systems()[preset]["gpus_per_node"]))
    W = draw(st.one_of(st.integers(1, 8).map(lambda n: n * G), st.integers(1, 96)))
    seq = draw(st.sampled_from((1024, 2048, 4096)))
    B = draw(st.sampled_from((W, 2 * W, 16, 48, 64, 256)))
    gpu = draw(st.sampled_from(GPUS))
    options = dict(gpu=gpu, precision=draw(st.sampled_from(("bf16",) if gpu.startswith("a100") else ("bf16", "fp8"))),
                   efficiency=draw(st.sampled_from((None, None, 0.45))), flash_attention=draw(st.booleans()),
                   tp_comm_overlap=draw(st.booleans()),
                   compiled=draw(st.booleans()),
                   # the rank order: Megatron's default half the time, else any arrangement (plan's --order)
                   order=draw(st.one_of(st.just(DEFAULT_ORDER),
                                        st.permutations(DIMENSIONS).map("-".join))))
    if spec.is_moe:
        a2a = draw(st.sampled_from(("nccl", "deepep")))
        options.update(a2a=a2a, fp8_dispatch=a2a == "deepep" and draw(st.booleans()),
                       moe_overlap=draw(st.sampled_from(("none", "none", "1f1b", "dualpipe"))),
                       expert_load=draw(st.sampled_from((1.0, 1.3))))
    space = SearchSpace(spec=spec, seq=seq, global_batch=B, gpus=(W,), gpus_per_node=G)
    cols = _base_rows(space, W, options.get("moe_overlap", "none"))
    rows = list(zip(*(cols[k].tolist() for k in ("W", "t", "p", "v", "c", "e", "d", "b", "uneven", "etp"))))
    assume(rows)
    # half the time a layout with a group whose stride does not divide G (it straddles nodes; rounding shows)
    straddle = [r for r in rows if any(n > 1 and 0 < k < G and G % k for n, k in _groups(r))]
    if straddle and draw(st.booleans()):
        rows = straddle
    _, t, p, v, c, e, d, b, _, te = draw(st.sampled_from(rows))
    fixed = (("tp", t), ("pp", p), ("vp", v), ("cp", c), ("ep", e), ("micro_batch", b), ("etp", te))
    space = SearchSpace(spec=spec, seq=seq, global_batch=B, gpus=(W,), gpus_per_node=G, fixed=fixed)
    # a stack that runs the drawn layout (--stack refuses a --fix it cannot run), past releases included
    options["stack"] = draw(st.sampled_from([s for s in KNOWN_STACKS if stack_refuses(stack_layouts(s), dict(fixed)) is None]))
    return SearchInputs(space=space, **options), draw(comm_models(kind, G, W, preset)), W, draw(st.randoms(use_true_random=False))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases())
def test_plan_on_a_row_equals_the_search_grid(case):
    inp, model, W, rnd = case
    rows, values = evaluate_all(inp, model, W)
    n = len(rows["t"])
    assert n > 0 or inp.stack != "auto"  # every drawn layout exists; a named stack may run none of its ZeRO/SP options
    assume(n > 0)
    for i in rnd.sample(range(n), min(n, 4)):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        for key, want in (*((k, getattr(p, k)) for k in KEYS), ("memory_bytes", p.memory.total_bytes),
                          ("memory_low_bytes", p.memory.allocated_bytes[0]),
                          ("device_low_bytes", p.memory.device_bytes[0])):
            got = float(values[key][i])
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (key, row, got, want)
        by_dim = p.exposed_by_dimension()
        for dim in ("tp", "cp", "ep", "pp", "dp"):
            got, want = float(values[f"exposed_{dim}_s"][i]), by_dim.get(dim, 0.0)
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (dim, row, got, want)
        # the lines (kernel.explain) share out the kernel's exposed seconds: they sum to the step's
        assert math.isclose(sum(line.exposed_s for line in p.comm), p.exposed_comm_s, rel_tol=1e-12, abs_tol=1e-15)
