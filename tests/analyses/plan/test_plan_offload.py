"""``plan --cpu-offload-layers``: the copies' wait joins the compute, search prices it identically (one truth),
and the rules are checked once for both."""

from __future__ import annotations

import math

import pytest

from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
from commcost.comm.model import FabricModel
from commcost.core.errors import InputError
from commcost.comm.systems import system_group
from commcost.parallel.layout import Layout
from commcost.workload.transformer import TransformerSpec

TINY = TransformerSpec(name="tiny", layers=6, hidden=512, heads=8, kv_heads=4, ffn_hidden=1536, gated_mlp=True,
                       vocab=4096)


def _fabric(world: int) -> FabricModel:
    topo, _ = system_group("dgx-a100", nodes=max(1, -(-world // 8)))
    return FabricModel(topology=topo)


def _inputs(n: int, **kw) -> PlanInputs:
    L = Layout(dp=8, tp=1, pp=1, zero=kw.pop("zero", 1), micro_batch=2, global_batch=32)
    return PlanInputs(spec=TINY, layout=L, seq=4096, gpu="a100-sxm4-80gb", gpus_per_node=8, cpu_offload_layers=n, **kw)


def test_the_wait_for_copies_joins_compute():
    # h = 512: a layer's activations take longer over PCIe Gen4 (32 GB/s) than its compute on an A100,
    # so the copies stall the step; the stall is the operator line offload_s and compute is still their sum
    base, off = plan(_inputs(0), _fabric(8)), plan(_inputs(4), _fabric(8))
    stall = off.compute_by_operator["offload_s"]
    assert stall > 0 and "offload_s" not in base.compute_by_operator
    assert off.compute_s == pytest.approx(base.compute_s + stall, rel=1e-12)
    assert sum(off.compute_by_operator.values()) == pytest.approx(off.compute_s, rel=1e-12)
    assert off.memory.activations_bytes < base.memory.activations_bytes
    # a given efficiency prices the same wait (no operator lines to show it)
    g0, g4 = plan(_inputs(0, efficiency=0.5), _fabric(8)), plan(_inputs(4, efficiency=0.5), _fabric(8))
    assert g4.compute_s > g0.compute_s


def test_rules_and_host_link_are_checked():
    with pytest.raises(InputError, match="pipeline"):
        PlanInputs(spec=TINY, layout=Layout(dp=4, tp=1, pp=2, global_batch=32), seq=1024, gpu="h100-sxm",
                   gpus_per_node=8, cpu_offload_layers=2)
    with pytest.raises(InputError, match="host link"):
        PlanInputs(spec=TINY, layout=Layout(dp=8, global_batch=32), seq=1024, gpu="b300", gpus_per_node=8,
                   cpu_offload_layers=2)
    space = SearchSpace(spec=TINY, seq=1024, global_batch=32, gpus=(8,), gpus_per_node=8)
    with pytest.raises(InputError, match="--fix pp=1,recompute=none"):
        SearchInputs(space=space, gpu="h100-sxm", cpu_offload_layers=2)


def test_search_prices_offloading_as_plan_does():
    space = SearchSpace(spec=TINY, seq=4096, global_batch=32, gpus=(16,), gpus_per_node=8,
                        fixed=(("pp", 1), ("recompute", 0)))
    inp = SearchInputs(space=space, gpu="a100-sxm4-80gb", cpu_offload_layers=3)
    model = _fabric(16)
    rows, values = evaluate_all(inp, model, 16)
    n = len(rows["t"])
    assert n > 20
    stalled = 0
    for i in range(n):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        stalled += p.compute_by_operator.get("offload_s", 0.0) > 0
        for key, want in (("step_s", p.step_s), ("compute_s", p.compute_s), ("exposed_comm_s", p.exposed_comm_s),
                          ("memory_bytes", p.memory.total_bytes)):
            got = float(values[key][i])
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (key, row, got, want)
    assert stalled > 0


def test_plan_command_with_offloading_that_does_not_fit(capsys):
    # the memory advice offers no recomputation while activations are offloaded (Megatron-Core forbids both):
    # asking for it must not turn into an error
    from commcost.cli import main

    rc = main(["plan", "--model", "llama3-70b", "--system", "gb200-nvl72", "--gpus", "64", "--zero", "1",
               "--micro-batch", "2", "--global-batch", "256", "--seq", "8192", "--cpu-offload-layers", "10"])
    out = capsys.readouterr().out
    assert rc == 0 and "DOES NOT FIT" in out and "10 layers' activations offloaded" in out
    assert "--recompute" not in out.split("advice:")[1].split("\n\n")[0]
