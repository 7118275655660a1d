"""DeepSpeed's bounded ZeRO-3 buffers (stage3_max_live_parameters, reduce_bucket_size): search's memory
column equals plan's where the bound binds (one truth)."""

from __future__ import annotations

import math

from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
from commcost.comm.model import FabricModel
from commcost.comm.systems import system_group
from commcost.workload.transformer import TransformerSpec

# two layers of h = 12,288 (a layer: 12 h^2 = 1.8e9 parameters, over DeepSpeed's 1e9 live bound at t = 1)
WIDE = TransformerSpec(name="wide", layers=2, hidden=12288, heads=96, ffn_hidden=49152, vocab=1024)


def test_search_memory_equals_plan_with_deepspeed_bounds():
    topo, _ = system_group("dgx-a100", nodes=1)
    model = FabricModel(topology=topo)
    space = SearchSpace(spec=WIDE, seq=1024, global_batch=8, gpus=(8,), gpus_per_node=8, fixed=(("zero", 3),))
    inp = SearchInputs(space=space, gpu="a100-sxm4-80gb", stack="deepspeed")
    rows, values = evaluate_all(inp, model, 8)
    bound = 0
    for i in range(len(rows["t"])):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        got = float(values["memory_bytes"][i])
        assert math.isclose(got, p.memory.total_bytes, rel_tol=1e-12), (row, got, p.memory.total_bytes)
        # t = 1: the bound binds (1e9 live + 6.04e8 largest-matrix gradients, not 2 x 1.8e9 + 1.8e9)
        bound += int(row["t"]) == 1 and p.memory.buffers_bytes < 3 * 2 * 1.8e9
    assert bound > 0
