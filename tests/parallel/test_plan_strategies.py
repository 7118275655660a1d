"""Hand-computed bytes and counts of each parallel dimension, the schedule, memory and validation."""

from __future__ import annotations

import json

import pytest

from commcost.comm.collectives import Collective
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.topology import Link
from commcost.core.errors import InputError
from commcost.workload.memory import layer_activation_bytes, model_state_bytes, in_flight_layers
from commcost.parallel.context import context_ops
from commcost.parallel.expert import expert_ops
from commcost.parallel.layout import Layout, check_layout, group_ranks_per_node, layout_group
from commcost.parallel.pipeline import exposed_p2p_count, pipeline_ops
from commcost.parallel.tensor import tensor_ops
from commcost.parallel.zero import zero_ops
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.hardware.registry import system_group
from commcost.step.schedule import bubble_fraction, pipeline_s
from commcost.workload.transformer import TransformerSpec, model_spec, model_spec_names


def test_tp_all_reduce_bytes_and_count():
    # b=1, s=1024, h=512, bf16: S = 1*1024*512*2 = 1,048,576 B; m = 16/(1*4) = 4 micro-batches,
    # 4 layers, 2 all-reduces per layer each way: 4 * 4 * 2 * 2 = 64
    L = Layout(dp=4, tp=2, global_batch=16)
    (op,) = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8)
    assert op.op is Collective.ALL_REDUCE and op.size_bytes == 1_048_576 and op.count_per_step == 64
    assert op.group_size == 2 and op.ranks_per_node == 2 and op.critical


def test_tp_sequence_parallel_and_full_recompute():
    # SP: all-gather + reduce-scatter of the same S; full recomputation: 3 passes -> 4 * 4 * 2 * 3 = 96 each
    L = Layout(dp=4, tp=2, global_batch=16, sequence_parallel=True, recompute="full")
    ag, rs = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8)
    assert (ag.op, rs.op) == (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    assert ag.size_bytes == rs.size_bytes == 1_048_576 and ag.count_per_step == rs.count_per_step == 96


def test_pp_send_bytes_and_count():
    # S = b s h q / t = 2 * 2048 * 4096 * 2 / 4 = 8,388,608; m = 64/(2*2) = 16, v = 2: 2 m v = 64 sends
    L = Layout(dp=2, tp=4, pp=4, vp=2, micro_batch=2, global_batch=64)
    (op,) = pipeline_ops(layout=L, hidden=4096, seq=2048, activation_bytes=2, gpus_per_node=8)
    assert op.size_bytes == 8_388_608 and op.count_per_step == 64 and op.group_size == 2
    # stride of pp = tp * cp * dp = 8 >= G: the stage pair crosses nodes
    assert op.ranks_per_node == 1
    assert exposed_p2p_count(4, 16, 1) == 2 * (16 + 3) and exposed_p2p_count(4, 16, 2) == 2 * 3


def test_cp_ring_bytes_and_count():
    # s/c = 8192/4 = 2048 tokens; K and V heads on this TP rank: max(1, 8/2) = 4 of d = 128:
    # S = 2 * 1 * 2048 * 512 * 2 = 4,194,304; m = 8/(1*2) = 4, 10 layers, c-1 = 3 steps, 3 passes: 360
    L = Layout(dp=2, tp=2, cp=4, global_batch=8)
    (op,) = context_ops(layout=L, kv_heads=8, head_dim=128, seq=8192, layers_per_stage=10, activation_bytes=2,
                        gpus_per_node=8)
    assert op.size_bytes == 4_194_304 and op.count_per_step == 360
    # the cp group (stride 2, 4 ranks) sits in one node of 8
    assert op.ranks_per_node == 2


def test_ep_all_to_all_bytes_and_count():
    # tokens per rank b s / c = 2 * 4096 = 8192, k = 2, h = 4096: S = 8192 * 2 * 4096 * 2 = 134,217,728;
    # m = 64/(2*8) = 4, 32 MoE layers, dispatch + combine both ways: 4 * 32 * 4 = 512
    L = Layout(dp=8, ep=8, micro_batch=2, global_batch=64)
    (op,) = expert_ops(layout=L, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                       gpus_per_node=8)
    assert op.op is Collective.ALL_TO_ALL and op.size_bytes == 134_217_728 and op.count_per_step == 512
    assert op.group_size == 8 and op.ranks_per_node == 8


def test_zero_collectives():
    # ZeRO-1: reduce-scatter of gradients (N q_g) and all-gather of weights (N q_w), once per step
    L = Layout(dp=8, zero=1, global_batch=32)
    rs, ag = zero_ops(layout=L, dense_params_per_gpu=1e9, expert_params_per_gpu=0, layers_per_stage=10,
                      grad_bytes=2, weight_bytes=2, gpus_per_node=8)
    assert (rs.op, rs.size_bytes, rs.count_per_step) == (Collective.REDUCE_SCATTER, 2e9, 1)
    assert (ag.op, ag.size_bytes, ag.count_per_step) == (Collective.ALL_GATHER, 2e9, 1)
    # ZeRO-3: 10 layers + the ends = 11 units of 1e9/11 params; m = 32/8 = 4: gathers 2*4*11 = 88, scatters 44
    L3 = Layout(dp=8, zero=3, global_batch=32)
    ag3, rs3 = zero_ops(layout=L3, dense_params_per_gpu=1e9, expert_params_per_gpu=0, layers_per_stage=10,
                        grad_bytes=2, weight_bytes=2, gpus_per_node=8)
    assert ag3.count_per_step == 88 and rs3.count_per_step == 44
    assert ag3.size_bytes == pytest.approx(2e9 / 11)


def test_placement_strides():
    L = Layout(dp=4, tp=8, pp=2, global_batch=8)
    assert layout_group(L, "tp", 8) == (8, 8)       # tp innermost: a whole node
    assert layout_group(L, "dp", 8) == (4, 1)       # stride 8: one rank per node
    assert group_ranks_per_node(4, 2, 8) == 4 and group_ranks_per_node(8, 2, 8) == 4
    Lt = Layout(dp=4, tp=8, pp=2, global_batch=8, order="dp-tp-cp-ep-pp")
    assert layout_group(Lt, "dp", 8) == (4, 4) and layout_group(Lt, "tp", 8) == (8, 2)


def test_bubble_formulas():
    # 1F1B (p-1)/m = 3/8; interleaved (p-1)/(v m) = 3/16; pipeline = m t + (p-1) t / v
    assert bubble_fraction(4, 8) == 3 / 8 and bubble_fraction(4, 8, 2) == 3 / 16
    assert pipeline_s(4, 8, 2, 1.0) == 8 + 1.5


def test_model_states_by_zero_stage():
    # N = 1e9, D = 8: 2+2+12 = 16 GB; ZeRO-1: 2+2+1.5; ZeRO-2: 2+0.25+1.5; ZeRO-3: 0.25+0.25+1.5
    assert model_state_bytes(1e9, 0, 8) == (2e9, 2e9, 12e9)
    assert model_state_bytes(1e9, 1, 8) == (2e9, 2e9, 1.5e9)
    assert model_state_bytes(1e9, 2, 8) == (2e9, 0.25e9, 1.5e9)
    assert model_state_bytes(1e9, 3, 8) == (0.25e9, 0.25e9, 1.5e9)


def _gpt_layer(**kw):
    base = dict(seq_local=2048, micro_batch=1, hidden=12288, heads=96, kv_heads=96, qk_head_dim=128, head_dim=128,
                mlp_width=4 * 12288, gated=False, dropout=True, flash=False)
    base.update(kw)
    return layer_activation_bytes(**base)


def test_activations_reproduce_korthikanti():
    s, b, h, a = 2048, 1, 12288, 96
    # Korthikanti et al. 2022 eq. (1): s b h (34 + 5 a s / h); eq. (2) with t = 8: s b h (10 + 24/t + 5 a s / (h t))
    assert _gpt_layer(tp=1, sequence_parallel=False, recompute="none") == s * b * h * (34 + 5 * a * s / h)
    assert _gpt_layer(tp=8, sequence_parallel=False, recompute="none") == pytest.approx(
        s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8)))
    # sequence parallelism: s b h / t (34 + 5 a s / h); selective: s b h 34 / t; full: 2 s b h / t
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="none") == pytest.approx(
        s * b * h / 8 * (34 + 5 * a * s / h))
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="selective") == pytest.approx(s * b * h * 34 / 8)
    assert _gpt_layer(tp=8, sequence_parallel=True, recompute="full") == 2 * s * b * h / 8


def test_in_flight_layers():
    # 1F1B with m >= p: L layers' worth; interleaved: L (1 + (p-1)/(p v)) = 96 (1 + 7/32) = 117
    assert in_flight_layers(layers=96, pp=8, vp=1, micro_batches=64) == 96
    assert in_flight_layers(layers=96, pp=8, vp=4, micro_batches=64) == pytest.approx(117)
    assert in_flight_layers(layers=96, pp=8, vp=1, micro_batches=2) == 24


def test_registry_counts_agree_with_published():
    # Mixtral 8x7B: 46.7B total, 12.9B active (Jiang et al. 2024); DeepSeek-V3 671B / 37B (without MTP)
    mx, ds = model_spec("mixtral-8x7b"), model_spec("deepseek-v3")
    assert round(mx.params / 1e9, 1) == 46.7 and round(mx.active_params / 1e9, 1) == 12.9
    assert round(ds.params / 1e9) == 671 and round(ds.active_params / 1e9) == 38 - 1 + 1  # 37.55B
    assert model_spec("llama3-8b").params == 8_030_261_248
    for name in model_spec_names():
        assert model_spec(name).source


def test_layout_errors_show_the_arithmetic():
    with pytest.raises(InputError, match=r"1 x 16 = 16"):
        Layout(dp=16, global_batch=8)
    with pytest.raises(InputError, match=r"2 x 8 x 4 x 1 = 64 != gpus \(32\)"):
        check_layout(Layout(dp=2, tp=8, pp=4, global_batch=8), gpus=32, layers=32, heads=32, kv_heads=8, seq=4096)
    with pytest.raises(InputError, match=r"pp x vp = 4 x 3 = 12"):
        check_layout(Layout(dp=1, pp=4, vp=3, global_batch=12), gpus=4, layers=32, heads=32, kv_heads=8, seq=4096)
    with pytest.raises(InputError, match="needs a mixture-of-experts"):
        check_layout(Layout(dp=8, ep=2, global_batch=8), gpus=8, layers=32, heads=32, kv_heads=8, seq=4096)


def _small_spec() -> TransformerSpec:
    return TransformerSpec(layers=8, hidden=1024, heads=16, kv_heads=4, ffn_hidden=4096, gated_mlp=True, vocab=32000)


def test_plan_breakdown_adds_up_and_json_is_strict():
    from commcost.report.plan import render_plan_json

    topo, _ = system_group("dgx-h100", nodes=2)
    inp = PlanInputs(spec=_small_spec(), layout=Layout(dp=4, tp=2, pp=2, vp=2, zero=1, sequence_parallel=True,
                                                        global_batch=32), seq=2048, gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, FabricModel(topology=topo))
    assert p.step_s == pytest.approx(p.compute_s + p.pipeline_bubble_s + p.exposed_comm_s + p.optimizer_s, rel=1e-12)
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
    assert p.compute_s + p.pipeline_bubble_s + p.optimizer_s <= p.step_s <= p.no_overlap_s


def _flat(bw=10e9, lat=0.0):
    return FlatLinkModel(link=Link(bandwidth_bytes_per_s=bw, latency_s=lat))


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
    # T = S / 1 GB/s = 16.78 ms; exposed per layer and pass max(0, T - t_attention), 3 passes, 8 layers, m = 1
    spec = TransformerSpec(layers=8, hidden=1024, heads=8, vocab=32000)
    inp = PlanInputs(spec=spec, layout=Layout(dp=1, cp=2, global_batch=1), seq=8192, gpu="h100-sxm",
                     gpus_per_node=8, efficiency=0.5)
    p = plan(inp, _flat(bw=1e9))
    (cp,) = [c for c in p.comm if c.comm.dimension == "cp"]
    T = 16_777_216 / 1e9
    t_attn = _flops(inp)[3] / (989.4e12 * 0.5)
    assert cp.one_s == pytest.approx(T)
    assert cp.exposed_s == pytest.approx(8 * 3 * max(0.0, T - t_attn))
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
