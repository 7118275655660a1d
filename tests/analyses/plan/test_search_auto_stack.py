"""search and plan price each layout only under a stack that runs it (auto resolves it per layout), and search's plan_command reproduces the result."""

from __future__ import annotations

import json

import pytest

from commcost.cli import main
from commcost.parallel.layout import Layout
from commcost.workload.stacks import auto_masks, resolve_stack, stacks_running

CASES = [
    ["--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "256", "--seq", "8192", "--global-batch", "512"],
    ["--model", "mixtral-8x7b", "--system", "dgx-h100", "--gpus", "64", "--seq", "4096", "--global-batch", "256"],
]


@pytest.mark.parametrize("argv", CASES, ids=["llama3-70b-256", "mixtral-8x7b-64"])
def test_winner_runs_on_its_stack_and_its_plan_command_reproduces_it(argv, capsys):
    assert main(["search", *argv, "--top", "1", "--no-progress", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["results"][0]
    assert best["stack"] in best["stacks_that_run"]
    # one bucket rule: the cap the command carries is the advice's (DDP: int(bucket_cap_mb * 2**20))
    cmd = best["plan_command"].split()
    if best["bucket_advice"] is not None:
        mb = float(cmd[cmd.index("--bucket-mb") + 1])
        assert int(mb * 2**20) == best["bucket_advice"]["recommended_bytes"]
    assert main([*cmd[1:], "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["step_s"] == best["step_s"] and p["memory"]["total_bytes"] == best["memory"]["total_bytes"]
    assert p["stack"] == best["stack"]


def test_auto_resolves_a_layout_megatron_does_not_run_to_the_stack_that_runs_it():
    # ZeRO-2 with a pipeline: Megatron-Core runs ZeRO-2 only through Megatron-FSDP, without a pipeline
    # (stacks.json megatron layouts zero_with_pp [0, 1]); torchtitan's FSDP2 runs it (zero_with_pp [2, 3])
    L = Layout(dp=16, tp=2, pp=2, vp=40, cp=4, zero=2, sequence_parallel=True, recompute="none", micro_batch=1,
               global_batch=512)
    name, why = resolve_stack("auto", L)
    assert name == "torchtitan" and name in stacks_running(L) and "megatron does not run" in why
    # a layout Megatron-Core runs stays megatron
    M = Layout(dp=16, tp=8, pp=2, vp=40, cp=1, zero=1, sequence_parallel=True, recompute="none", micro_batch=1,
               global_batch=512)
    assert resolve_stack("auto", M)[0] == "megatron"


def test_auto_masks_partition_the_layouts():
    import numpy as np

    zero = np.array([0, 1, 2, 3, 2, 3, 3])
    tp = np.array([1, 8, 1, 1, 2, 1, 2])
    pp = np.array([1, 2, 1, 1, 2, 1, 4])
    one = np.ones(7, dtype=int)
    m = auto_masks(tp=tp, pp=pp, vp=one, cp=one, ep=one, zero=zero, sp=(tp > 1).astype(int))
    total = sum(mask.astype(int) for mask in m.values())
    assert (total == 1).all()          # each layout resolves exactly one way
    # ZeRO-3 with TP and PP (the last) is torchtitan's by auto's rule (auto_kinds), so it is auto's own part; ZeRO-2
    # with a pipeline (the fifth) is Megatron-Core's by the rule, which does not run it: the first stack that does
    assert list(m["auto"]) == [True, True, True, True, False, True, True]
    assert list(m["torchtitan"]) == [False, False, False, False, True, False, False]


@pytest.mark.parametrize("asked", [False, True], ids=["recipe-overlap", "overlap-asked"])
def test_auto_grid_takes_each_row_s_stack_and_overlap_as_plan_does(asked):
    # under --stack auto one grid holds ZeRO 0-2 rows (Megatron-Core: its recipes' TP overlap, a quarter of the pass)
    # and ZeRO-3 rows with TP (torchtitan: no overlap from its recipes; asked, its async TP's per-GEMM pairing);
    # plan on each row, with the overlap the row carries, prices the same step
    import math

    import numpy as np

    from commcost.analyses.plan.plan import plan
    from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
    from commcost.comm.model import FabricModel
    from commcost.comm.systems import system_group
    from commcost.workload.transformer import model_spec

    space = SearchSpace(spec=model_spec("llama3-8b"), seq=4096, global_batch=16, gpus=(8,), gpus_per_node=8,
                        fixed=(("tp", 2), ("pp", 1), ("cp", 1), ("sp", 1), ("micro_batch", 1)))
    inp = SearchInputs(space=space, gpu="h100-sxm", tp_comm_overlap=asked)
    model = FabricModel(topology=system_group("dgx-h100", nodes=1)[0])
    rows, values = evaluate_all(inp, model, 8)
    zero = np.asarray(rows["zero"])
    assert set(zero.tolist()) == {0, 1, 2, 3}
    # the overlap each row carries: the recipe's (megatron's, ZeRO 0-2) unless asked, then every row's
    assert np.asarray(rows["tpo"]).tolist() == (np.ones(len(zero), bool) if asked else zero < 3).tolist()
    for i in range(len(zero)):
        p = plan(plan_inputs_of(inp, {k: v[i] for k, v in rows.items()}), model)
        assert p.stack == ("torchtitan" if zero[i] == 3 else "megatron")
        assert math.isclose(float(values["step_s"][i]), p.step_s, rel_tol=1e-9), (i, zero[i])
        assert math.isclose(float(values["exposed_tp_s"][i]), p.exposed_by_dimension().get("tp", 0.0),
                            rel_tol=1e-9, abs_tol=1e-15)
