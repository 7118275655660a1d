"""Invariants of plan: ZeRO-3 memory and dp, bubbles and stages, and the pure-DP equalities with the
CommModel and the DDP timeline."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from commcost.comm.model import FabricModel
from commcost.workload.memory import memory_per_gpu
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, operator_times, plan
from commcost.comm.systems import system_group
from commcost.step.ddp_buckets import ddp_bucket_caps
from commcost.step.timeline import TimelineInputs, exposed_at, simulate_timeline
from commcost.workload.transformer import TransformerSpec

SPEC = TransformerSpec(layers=16, hidden=2048, heads=16, kv_heads=8, ffn_hidden=8192, gated_mlp=True, vocab=32000)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(0, 5), tp=st.sampled_from([1, 2, 4]))
def test_zero3_memory_falls_as_dp_grows(k, tp):
    dp = 2 ** k
    mem = [memory_per_gpu(SPEC, Layout(dp=d, tp=tp, zero=3, global_batch=64), seq=2048, capacity_bytes=80e9).total_bytes
           for d in (dp, 2 * dp)]
    assert mem[1] < mem[0]


@settings(max_examples=25, deadline=None)
@given(m=st.sampled_from([8, 16, 32]), p=st.sampled_from([1, 2, 4, 8]))
def test_more_stages_with_fixed_micro_batches_raise_the_bubble(m, p):
    topo, _ = system_group("dgx-h100", nodes=4)
    model = FabricModel(topology=topo)

    def bubble_share(stages):
        inp = PlanInputs(spec=SPEC, layout=Layout(dp=1, pp=stages, global_batch=m), seq=2048, gpu="h100-sxm",
                         gpus_per_node=8)
        r = plan(inp, model)
        return r.pipeline_bubble_s / (r.compute_s + r.pipeline_bubble_s)

    assert bubble_share(2 * p) > bubble_share(p)


@settings(max_examples=20, deadline=None)
@given(nodes=st.sampled_from([1, 2, 4, 8]), gb=st.sampled_from([1, 2, 4]), zero=st.just(0))
def test_pure_dp_reproduces_comm_model_and_timeline(nodes, gb, zero):
    topo, P = system_group("dgx-h100", nodes=nodes)
    model = FabricModel(topology=topo)
    inp = PlanInputs(spec=SPEC, layout=Layout(dp=P, global_batch=P * gb), seq=2048, gpu="h100-sxm", gpus_per_node=8)
    r = plan(inp, model)
    (line,) = [c for c in r.comm if c.comm.dimension == "dp"]
    S = SPEC.params * 2.0
    assert line.comm.size_bytes == S
    # one all-reduce of the whole gradient: exactly the CommModel's
    assert line.one_s == model.cost("all_reduce", S, P, ranks_per_node=min(P, 8)).total_s

    def cost(c):
        return model.cost("all_reduce", c, P, ranks_per_node=min(P, 8)).total_s
    ops = operator_times(inp)          # the operator model: the forward's share of the micro-batch's time
    fwd_share = ops.forward_s / ops.compute_s
    t_c = r.micro_batch_s
    tl_inp = TimelineInputs(gpus=P, comm=model, step_s=t_c,
                            params=SPEC.params, backward_fraction=1.0 - fwd_share, grad_accum=gb)
    # exactly the timeline's exposed time (exposed_at, what budget and the bucket sweep use) ...
    assert line.exposed_s == exposed_at(tl_inp, ddp_bucket_caps(None), allreduce_s=cost)
    # ... and the bucket-by-bucket simulation's, to rounding; the wire time is the buckets' sum
    tl = simulate_timeline(tl_inp, ddp_bucket_caps(None), allreduce_s=cost)
    assert abs(line.exposed_s - tl.exposed_s) <= 1e-12 * t_c
    assert line.time_s == pytest.approx(tl.wire_s, rel=1e-12)
