"""``analyses/plan/plan.py`` with each parallel strategy: the breakdown adds up, the step lies between its
bounds, and the exposed part of each dimension's communication by hand."""

from __future__ import annotations

import json

import pytest

from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.topology import Link
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.parallel.zero import zero_ops
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.comm.systems import system_group
from commcost.workload.transformer import TransformerSpec


def _small_spec() -> TransformerSpec:
    return TransformerSpec(layers=8, hidden=1024, heads=16, kv_heads=4, ffn_hidden=4096, gated_mlp=True, vocab=32000)


def _flat(bw=10e9, lat=0.0):
    return FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw, latency_s=lat))


def test_plan_breakdown_adds_up_and_json_is_strict():
    from commcost.report.plan import render_plan_json

    topo, _ = system_group("dgx-h100", nodes=2)
    inp = PlanInputs(spec=_small_spec(), layout=Layout(dp=4, tp=2, pp=2, vp=2, zero=1, sequence_parallel=True,
                                                        global_batch=32), seq=2048, gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, FabricModel(topology=topo))
    assert p.step_s == pytest.approx(p.compute_s + p.pipeline_bubble_s + p.exposed_comm_s + p.optimizer_s
                                     + p.losses.total_s, rel=1e-12)
    d = json.loads(render_plan_json(p))
    for key in ("step_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"):
        assert d[key] > 0
    assert set(d["breakdown"]) >= {"compute_s", "pipeline_bubble_s", "exposed_comm_s", "optimizer_s"}
    assert {c["dimension"] for c in d["comm"]} == {"tp", "pp", "dp"}
    for c in d["comm"]:
        assert set(c) >= {"dimension", "op", "size_bytes", "group_size", "count_per_step", "time_s", "exposed_s"}
    assert set(d["memory"]) >= {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                                "total_bytes", "capacity_bytes", "fits"}
    assert d["layout"]["dp"] == 4 and d["layout"]["vp"] == 2 and d["layout"]["zero"] == 1
    # tokens/s/GPU = B s / (step W) = 32 * 2048 / (step * 16)
    assert d["tokens_per_s_per_gpu"] == pytest.approx(32 * 2048 / (p.step_s * 16))


def test_flat_link_model_plans():
    inp = PlanInputs(spec=_small_spec(), layout=Layout(dp=8, global_batch=8), seq=1024, gpu="a100-sxm4-80gb",
                     gpus_per_node=8)
    p = plan(inp, FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6)))
    assert p.memory.fits and p.step_s > p.compute_s


def test_hybrid_sharding_bytes_counts_and_memory():
    from commcost.workload.memory import params_per_gpu, memory_per_gpu
    # dp 32 sharded in groups of 8 (4 replicas): weights 2 N / 8; 10 layers + ends = 11 units, m = 32/32 = 1:
    # gathers 2 * 11, scatters 11 over 8 ranks, and 11 all-reduces of the 1/8 shard over the 4 replicas
    spec = TransformerSpec(layers=10, hidden=1024, heads=16, vocab=32000)
    L = Layout(dp=32, zero=3, shard_group=8, global_batch=32)
    dense, _ = params_per_gpu(spec, L)
    ag, rs, ar = zero_ops(layout=L, dense_params_per_gpu=dense, expert_params_per_gpu=0, layers_per_stage=10,
                          grad_bytes=2, weight_bytes=2, gpus_per_node=8)
    assert (ag.group_size, rs.group_size, ar.group_size) == (8, 8, 4)
    assert (ag.count_per_step, rs.count_per_step, ar.count_per_step) == (22, 11, 11)
    assert ar.size_bytes == pytest.approx(rs.size_bytes / 8)
    assert ag.ranks_per_node == 8 and ar.ranks_per_node == 1
    mem = memory_per_gpu(spec, L, seq=2048, capacity_bytes=80e9)
    assert mem.weights_bytes == pytest.approx(2 * dense / 8) and mem.optimizer_bytes == pytest.approx(12 * dense / 8)
    with pytest.raises(InputError, match="needs ZeRO-3"):
        Layout(dp=32, zero=1, shard_group=8, global_batch=32)
    with pytest.raises(InputError, match=r"32 x 1 = 32"):
        Layout(dp=32, zero=3, shard_group=12, global_batch=32)


def test_modelled_step_lies_between_its_bounds():
    topo, _ = system_group("dgx-h100", nodes=4)
    inp = PlanInputs(spec=_small_spec(), layout=Layout(dp=8, tp=2, pp=2, zero=3, global_batch=64), seq=2048,
                     gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, FabricModel(topology=topo))
    assert p.compute_s + p.pipeline_bubble_s + p.optimizer_s <= p.step_s <= p.overlap.no_overlap_s
    # the one overlap vocabulary: C = compute + bubble, T = wire, W = C, t_o = optimizer + losses, the step as
    # its simulation; no overlap C + T + t_o, perfect C + max(0, T - C) + t_o
    o = p.overlap
    C = p.compute_s + p.pipeline_bubble_s
    assert (o.compute_s, o.window_s, o.comm_s, o.simulated_s) == (C, C, p.wire_s, p.step_s)
    assert o.no_overlap_s == pytest.approx(C + p.wire_s + p.optimizer_s + p.losses.total_s, rel=1e-12)
    assert o.perfect_overlap_s == pytest.approx(C + max(0.0, p.wire_s - C) + p.optimizer_s + p.losses.total_s,
                                                rel=1e-12)
    assert o.perfect_overlap_s <= o.simulated_s <= o.no_overlap_s


def test_pp_exposed_transfers_by_hand():
    # 1F1B, p = 4, m = 8: 2 (m + p - 1) = 22 transfers of S = b s h q / t = 1 * 1024 * 1024 * 2 = 2,097,152 B,
    # each S / B on a flat 10 GB/s link with no latency: 209.7152 us -> 22 * 209.7152 us = 4.6137 ms
    spec = TransformerSpec(layers=8, hidden=1024, heads=16, vocab=32000)
    inp = PlanInputs(spec=spec, layout=Layout(dp=1, pp=4, global_batch=8), seq=1024, gpu="h100-sxm",
                     gpus_per_node=8, efficiency=0.5)
    (pp,) = [c for c in plan(inp, _flat()).comm if c.comm.dimension == "pp"]
    assert pp.one_s == pytest.approx(2_097_152 / 10e9)
    assert pp.exposed_s == pytest.approx(22 * 2_097_152 / 10e9)
    assert pp.time_s == pytest.approx(2 * 8 * 2_097_152 / 10e9)      # 2 m v sends on the wire


def test_cp_ring_exposed_is_what_attention_cannot_hide():
    from commcost.analyses.plan.plan import _flops
    # c = 2, one ring step per pass of S = 2 b (s/c) n_kv d q = 2 * 1 * 4096 * 1024 * 2 = 16,777,216 B:
    # T = S / 1 GB/s = 16.78 ms; exposed per layer and pass (c-1) max(0, T - t_attention/c), 3 passes, 8 layers,
    # m = 1
    spec = TransformerSpec(layers=8, hidden=1024, heads=8, vocab=32000)
    inp = PlanInputs(spec=spec, layout=Layout(dp=1, cp=2, global_batch=1), seq=8192, gpu="h100-sxm",
                     gpus_per_node=8, efficiency=0.5)
    p = plan(inp, _flat(bw=1e9))
    (cp,) = [c for c in p.comm if c.comm.dimension == "cp"]
    T = 16_777_216 / 1e9
    t_attn = _flops(inp)[3] / (989.4e12 * 0.5)
    assert cp.one_s == pytest.approx(T)
    assert cp.exposed_s == pytest.approx(8 * 3 * 1 * max(0.0, T - t_attn / 2))
    assert cp.comm.count_per_step == 8 * 3


def test_tp_overlap_hides_behind_a_quarter_of_the_pass():
    from commcost.analyses.plan.plan import _flops
    spec = TransformerSpec(layers=4, hidden=4096, heads=32, vocab=32000)
    base = dict(spec=spec, layout=Layout(dp=1, tp=2, global_batch=1), seq=2048, gpu="h100-sxm", gpus_per_node=8,
                efficiency=0.5)
    plain = plan(PlanInputs(**base), _flat(bw=50e9))
    over = plan(PlanInputs(**base, tp_comm_overlap=True), _flat(bw=50e9))
    (a,), (b,) = ([c for c in r.comm if c.comm.dimension == "tp"] for r in (plain, over))
    T = a.one_s
    t_f = _flops(PlanInputs(**base))[2] / (989.4e12 * 0.5)
    # 4 layers x 2 = 8 forward and 8 backward all-reduces: without overlap 16 T;
    # with it 8 max(0, T - t_f/4) + 8 max(0, T - t_b/4), t_b = 2 t_f
    assert a.exposed_s == pytest.approx(16 * T)
    assert b.exposed_s == pytest.approx(8 * max(0.0, T - t_f / 4) + 8 * max(0.0, T - t_f / 2))
    assert b.exposed_s < a.exposed_s
