"""Mixture-of-experts as practitioners run it: expert TP and placement by order, NCCL and node-aware
dispatch bytes, fp8 dispatch, the overlap bound, tokens per expert, token buffers; worked by hand."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.comm.collectives import Collective
from commcost.analyses.plan.compose import ep_exposed_s, ep_paired_share
from commcost.core.errors import InputError
from commcost.workload.memory import buffer_bytes
from commcost.workload.operators import expert_rows
from commcost.parallel.dispatch import FP8_DISPATCH_BYTES, a2a_one_s, a2a_parts, comm_sm_share, nodes_hit
from commcost.parallel.expert import expert_ops
from commcost.parallel.layout import Layout, group_placement, layout_group
from commcost.core.xp import SCALAR


# placement of the expert groups (Megatron-Core's expert RankGenerator over the same order)

def test_etp1_keeps_ep8_inside_one_node_with_tp2():
    # W = 64, t = 2, d = 32, e = 8. Default t_e = t = 2: expert sizes tp->2, cp->1, ep->8, so the EP
    # stride is 2 and 8 ranks at stride 2 cover 16 ranks: min(8, 8/2) = 4 per node, 2 nodes.
    default = Layout(dp=32, tp=2, ep=8, global_batch=64)
    assert default.expert_tp == 2 and default.expert_stride("ep") == 2
    assert group_placement(default, "ep", 8) == (8, 4, 2)
    # --etp 1: the EP stride is t_e = 1, ranks 0..7: one node; expert DP d_e = 64 / (8 x 1) = 8 at stride 8
    etp1 = Layout(dp=32, tp=2, ep=8, etp=1, global_batch=64)
    assert etp1.expert_tp == 1 and etp1.expert_dp == 8
    assert group_placement(etp1, "ep", 8) == (8, 8, 1)
    assert etp1.expert_stride("edp") == 8 and group_placement(etp1, "edp", 8) == (8, 1, 8)


def test_order_places_ep_where_megatron_does():
    # order ep-tp-cp-dp-pp: ep innermost, stride 1 even with t_e = 2; the expert TP group then varies
    # at stride e = 8: 2 ranks 8 apart, one per node
    L = Layout(dp=32, tp=2, ep=8, global_batch=64, order="ep-tp-cp-dp-pp")
    assert L.expert_stride("ep") == 1 and group_placement(L, "ep", 8) == (8, 8, 1)
    assert L.expert_stride("etp") == 8 and group_placement(L, "etp", 8) == (2, 1, 2)
    # the default order keeps the old placement (stride t for EP when t_e = t)
    D = Layout(dp=32, tp=2, ep=8, global_batch=64)
    assert layout_group(D, "ep", 8) == (8, 4)


def test_etp_must_fold_onto_the_ranks():
    # t d c = 2 x 4 x 1 = 8; e t_e = 8 x 2 = 16 does not divide it
    with pytest.raises(InputError, match=r"ep x etp = 8 x 2 = 16 must divide tp x dp x cp = 2 x 4 x 1 = 8"):
        Layout(dp=4, tp=2, ep=8, etp=2, global_batch=8)


# dispatch bytes: NCCL all-to-all and node-aware

def test_nccl_dispatch_bytes_and_count():
    # b = 2, s = 4096, c = 1, no SP: T = 8192 tokens; k = 2, h = 4096, bf16: S = 8192 x 2 x 4096 x 2
    # = 134,217,728 B; m = 64 / (2 x 8) = 4, 32 MoE layers, 2 transfers x 2 passes: 4 x 32 x 4 = 512
    L = Layout(dp=8, ep=8, micro_batch=2, global_batch=64)
    (op,) = expert_ops(layout=L, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                       gpus_per_node=8)
    assert op.op is Collective.ALL_TO_ALL and op.size_bytes == 134_217_728 and op.count_per_step == 512


def test_fp8_dispatch_and_imbalance_split_the_forward_dispatch():
    # q_d = 1 + 4/128 = 1.03125; I = 1.25: the forward dispatch 8192 x 2 x 4096 x 1.25 x 1.03125 =
    # 86,507,520 B, 4 x 32 x 1 = 128 of them; the other three 8192 x 2 x 4096 x 1.25 x 2 = 167,772,160 B,
    # 4 x 32 x 3 = 384
    L = Layout(dp=8, ep=8, micro_batch=2, global_batch=64)
    d, rest = expert_ops(layout=L, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                         gpus_per_node=8, dispatch_bytes=FP8_DISPATCH_BYTES, expert_load=1.25)
    assert FP8_DISPATCH_BYTES == 1.03125
    assert d.size_bytes == 86_507_520 and d.count_per_step == 128
    assert rest.size_bytes == 167_772_160 and rest.count_per_step == 384


def test_expert_tp_collectives_by_hand():
    # d = 4, t = 2, e = 4: default t_e = 2 (e divides d c). SP: T = 1 x 4096 / 2 = 2048 tokens;
    # T k h q = 2048 x 2 x 4096 x 2 = 33,554,432 B, gathered over t_e = 2: all-gather (output) and
    # reduce-scatter (input) of 67,108,864 B; m = 8 / (1 x 4) = 2, 32 layers, 2 passes: 2 x 32 x 2 = 128 each
    L = Layout(dp=4, tp=2, ep=4, sequence_parallel=True, global_batch=8)
    a2a, ag, rs = expert_ops(layout=L, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                             gpus_per_node=8)
    assert a2a.size_bytes == 33_554_432 and (ag.op, rs.op) == (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    assert ag.size_bytes == rs.size_bytes == 67_108_864 and ag.count_per_step == rs.count_per_step == 128
    assert ag.group_size == 2 and ag.ranks_per_node == 2
    # without SP the pair holds the same 4096 tokens: one all-reduce of 4096 x 2 x 4096 x 2 = 67,108,864 B
    L0 = Layout(dp=4, tp=2, ep=4, global_batch=8)
    _, ar = expert_ops(layout=L0, hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                       gpus_per_node=8)
    assert ar.op is Collective.ALL_REDUCE and ar.size_bytes == 67_108_864 and ar.count_per_step == 128
    # expert TP 1: the all-to-all alone
    assert len(expert_ops(layout=Layout(dp=4, tp=2, ep=4, etp=1, sequence_parallel=True, global_batch=8),
                          hidden=4096, seq=4096, top_k=2, moe_layers_per_stage=32, activation_bytes=2,
                          gpus_per_node=8)) == 1


def test_nodes_hit_by_hand():
    # E = 8 experts on n = 2 nodes (4 each), k = 2: a token misses a node with C(4,2)/C(8,2) = 6/28,
    # so it reaches 2 (1 - 6/28) = 22/14 = 11/7 nodes
    assert nodes_hit(SCALAR, experts=8, top_k=2, nodes=2) == pytest.approx(11 / 7, rel=1e-15)
    # one node: always 1; k = 1: always 1 node
    assert nodes_hit(SCALAR, experts=8, top_k=2, nodes=1) == pytest.approx(1.0)
    assert nodes_hit(SCALAR, experts=64, top_k=1, nodes=8) == pytest.approx(1.0)


def test_deepep_parts_by_hand():
    # EP 16 over 2 nodes of 8, E = 32 (2 per rank), k = 2, S = 1e6. NVLink part: one copy per token and
    # destination rank: r_hit = 16 (1 - C(30,2)/C(32,2)) = 16 (1 - 435/496) = 61/31 ranks, S r_hit / k =
    # 1e6 x 61/62 over the node's 8 ranks. Network part among the 2 same-index GPUs: a token misses a node
    # (16 experts) with C(16,2)/C(32,2) = 120/496, n_hit = 2 (1 - 120/496) = 47/31, S n_hit / k = 1e6 x 47/62
    (intra, inter) = a2a_parts("deepep", size_bytes=1e6, group=16, ranks_per_node=8, experts=32, top_k=2)
    assert intra[1:] == (8, 8) and intra[0] == pytest.approx(1e6 * 61 / 62, rel=1e-12)
    assert inter[1:] == (2, 1) and inter[0] == pytest.approx(1e6 * 47 / 62, rel=1e-12)
    # NCCL sends every (token, expert) copy
    assert a2a_parts("nccl", size_bytes=1e6, group=16, ranks_per_node=8, experts=32, top_k=2) == ((1e6, 16, 8),)
    # inside one node with one expert per rank the k = 2 experts are on 2 ranks: S, as NCCL
    (one,) = a2a_parts("deepep", size_bytes=1e6, group=8, ranks_per_node=8, experts=8, top_k=2)
    assert one[1:] == (8, 8) and one[0] == pytest.approx(1e6)
    # two experts per rank (E = 16, e = 8): r_hit = 8 (1 - C(14,2)/C(16,2)) = 8 (1 - 91/120) = 29/15, S x 29/30
    (two,) = a2a_parts("deepep", size_bytes=1e6, group=8, ranks_per_node=8, experts=16, top_k=2)
    assert two[1:] == (8, 8) and two[0] == pytest.approx(1e6 * 29 / 30, rel=1e-12)


def test_deepep_time_is_the_slower_part():
    # a price of S / 1e9 s per byte on NVLink (rpn > 1), S / 1e8 through the NICs (rpn = 1):
    # NVLink 1e6 x 61/62 / 1e9 = 0.98 ms, network 1e6 x 47/62 / 1e8 = 7.58 ms -> 7.58 ms
    def price(op, S, P, r):
        assert op is Collective.ALL_TO_ALL
        return S / (1e9 if r > 1 else 1e8)

    t = a2a_one_s(price, "deepep", size_bytes=1e6, group=16, ranks_per_node=8, experts=32, top_k=2)
    assert t == pytest.approx(1e6 * 47 / 62 / 1e8, rel=1e-12)


def test_plan_prices_deepep_across_nodes(capsys):
    from commcost.cli import main

    base = ["plan", "--model", "mixtral-8x7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
            "--micro-batch", "2", "--tp", "2", "--sequence-parallel", "--zero", "1", "--ep", "8", "--json"]
    assert main([*base, "--a2a", "nccl"]) == 0   # a MoE flag named: the code defaults, as with --a2a deepep
    nccl = json.loads(capsys.readouterr().out)
    assert main([*base, "--a2a", "deepep"]) == 0
    deepep = json.loads(capsys.readouterr().out)
    (ep_n,) = [r for r in nccl["comm"] if r["op"] == "all_to_all"]
    (ep_d,) = [r for r in deepep["comm"] if r["op"] == "all_to_all"]
    # EP 8 at stride 2: 2 nodes of 4 ranks; Mixtral E = 8, k = 2: n_hit = 11/7 < k, fewer bytes leave the node
    assert ep_d["algorithm"] == "node-aware (deepep)" and ep_d["one_s"] < ep_n["one_s"]
    assert [g["nodes"] for g in nccl["expert_groups"] if g["group"] == "ep"] == [2]
    assert main([*base, "--etp", "1"]) == 0
    etp1 = json.loads(capsys.readouterr().out)
    assert [g["nodes"] for g in etp1["expert_groups"] if g["group"] == "ep"] == [1]
    assert etp1["layout"]["expert_tp"] == 1


# overlap

def test_paired_share_by_hand():
    # 1F1B, p = 1, v = 1, m = 4: warm-up w = 2(0) + 0 + 1 - 0 = 1 chunk alone: (4 - 1)/4
    assert ep_paired_share(SCALAR, overlap="1f1b", pp=1, vp=1, micro_batches=4) == 0.75
    # p = 4, v = 2, m = 8: 16 chunks, w = 2 x 3 + 1 x 4 + 1 = 11: (16 - 11)/16 = 5/16
    assert ep_paired_share(SCALAR, overlap="1f1b", pp=4, vp=2, micro_batches=8) == 5 / 16
    assert ep_paired_share(SCALAR, overlap="dualpipe", pp=4, vp=1, micro_batches=8) == 1.0
    assert ep_paired_share(SCALAR, overlap="none", pp=4, vp=2, micro_batches=8) == 0.0


def test_exposed_bound_by_hand():
    # W = 10 s over N = 2 pairs: 5 s per pair; t_f = 1 s, 2 passes: K = (2 - 1 + 2) x 1 = 3 s hidden
    # behind the other micro-batch, 2 s left, plus sigma = 0.1 of the 3 s overlapped: 2 x (2 + 0.3) = 4.6 s
    assert ep_exposed_s(SCALAR, wire_s=10.0, pairs=2.0, layer_fwd_s=1.0, passes=2, paired_share=1.0,
                        sm_share=0.1) == pytest.approx(4.6)
    # half the pairs overlapped: 0.5 x 10 + 0.5 x 4.6 = 7.3
    assert ep_exposed_s(SCALAR, wire_s=10.0, pairs=2.0, layer_fwd_s=1.0, passes=2, paired_share=0.5,
                        sm_share=0.1) == pytest.approx(7.3)
    # H100: 20 of 132 SMs
    assert comm_sm_share("h100-sxm") == pytest.approx(20 / 132)


@settings(max_examples=200, deadline=None)
@given(wire=st.floats(0, 100), pairs=st.floats(1, 1e4), t_f=st.floats(0, 1), f=st.floats(0, 1),
       sigma=st.floats(0, 1), passes=st.sampled_from([2, 3]))
def test_exposed_between_the_bounds(wire, pairs, t_f, f, sigma, passes):
    # never below max(0, W - N K) (everything the compute can hide is hidden), never above W
    x = ep_exposed_s(SCALAR, wire_s=wire, pairs=pairs, layer_fwd_s=t_f, passes=passes, paired_share=f,
                     sm_share=sigma)
    K = (passes + 1) * t_f
    assert max(0.0, wire - pairs * K) - 1e-9 * (1 + wire) <= x <= wire + 1e-9 * (1 + wire)


@settings(max_examples=200, deadline=None)
@given(per_node=st.integers(1, 32), nodes=st.integers(1, 16), k=st.integers(1, 8))
def test_nodes_hit_between_one_and_min_nodes_k(per_node, nodes, k):
    E = per_node * nodes
    k = min(k, E)
    x = nodes_hit(SCALAR, experts=E, top_k=k, nodes=nodes)
    assert 1.0 - 1e-9 <= x <= min(nodes, k) + 1e-9
    if nodes > 1:   # spreading the same experts over more nodes never lowers the nodes a token reaches
        assert nodes_hit(SCALAR, experts=E, top_k=k, nodes=1) <= x + 1e-9


# tokens per expert, buffers, options

def test_expert_rows_by_hand():
    # n = 8192 tokens, t = 2 with SP: a rank dispatches 4096; k e / E = 2 x 8 / 8 = 2 copies per local expert
    # t_e = 1: 4096 x 2 = 8192 rows; t_e = 2: the expert-TP pair gathers, 16384; I = 1.5: 12288
    assert expert_rows(SCALAR, n=8192, tp=2, sp=True, ep=8, expert_tp=1, experts=8, top_k=2) == 8192
    assert expert_rows(SCALAR, n=8192, tp=2, sp=True, ep=8, expert_tp=2, experts=8, top_k=2) == 16384
    assert expert_rows(SCALAR, n=8192, tp=2, sp=True, ep=8, expert_tp=1, experts=8, top_k=2,
                       expert_load=1.5) == 12288
    # without SP the TP ranks hold the same tokens: 8192 x 2 = 16384 for t_e <= t
    assert expert_rows(SCALAR, n=8192, tp=2, sp=False, ep=8, expert_tp=2, experts=8, top_k=2) == 16384
    # t = 1, t_e = 2, e = 4: the expert-TP pair spans two data-parallel ranks, g = max(1, 2/1) = 2;
    # k e / E = 2 x 4 / 8 = 1: 8192 x 2 x 1 = 16384
    assert expert_rows(SCALAR, n=8192, tp=1, sp=False, ep=4, expert_tp=2, experts=8, top_k=2) == 16384


def test_token_buffers_by_hand():
    # k = 2, s' = 4096, b = 1, h = 4096, I = 1, SP over t = 2: 4 x 2 x 4096 x 4096 / 2 = 67,108,864 B
    # (plus SP's gathered input 2 x 4096 x 4096 = 33,554,432 B)
    kw = dict(pp=1, micro_batch=1, seq_local=4096, hidden=4096, tp=2, zero3=False, layer_params=0.0,
              sequence_parallel=True)
    assert buffer_bytes(SCALAR, **kw, top_k=2) - buffer_bytes(SCALAR, **kw) == 67_108_864


def test_moe_option_errors():
    from commcost.analyses.plan.plan import check_moe_options

    ok = dict(a2a="nccl", fp8_dispatch=False, moe_overlap="none", expert_load=1.0, pp=1, vp=1)
    check_moe_options(**ok)
    for bad, msg in ((dict(fp8_dispatch=True), "needs --a2a deepep"),
                     (dict(moe_overlap="1f1b", pp=4), "interleaved schedule"),
                     (dict(moe_overlap="dualpipe", pp=3), "even number"),
                     (dict(expert_load=0.5), "at least 1"),
                     (dict(a2a="mpi"), "unknown all-to-all")):
        with pytest.raises(InputError, match=msg):
            check_moe_options(**{**ok, **bad})


def test_overlap_lowers_the_step_and_stays_above_everything_hidden():
    from commcost.comm.model import FabricModel
    from commcost.analyses.plan.plan import PlanInputs, plan
    from commcost.comm.systems import system_group
    from commcost.workload.transformer import model_spec

    topo, _ = system_group("dgx-h100", nodes=8)
    model = FabricModel(topology=topo)
    L = Layout(dp=32, tp=2, ep=8, sequence_parallel=True, micro_batch=1, global_batch=256, zero=1)
    base = dict(spec=model_spec("mixtral-8x7b"), layout=L, seq=4096, gpu="h100-sxm", gpus_per_node=8)
    none = plan(PlanInputs(**base), model)
    f1b = plan(PlanInputs(**base, moe_overlap="1f1b"), model)
    ep_none, ep_1f1b = none.exposed_by_dimension()["ep"], f1b.exposed_by_dimension()["ep"]
    assert ep_1f1b < ep_none
    # the bound: no less than what the compute cannot cover, the sigma share of the hidden part included
    assert ep_1f1b >= 0 and f1b.step_s >= f1b.compute_s + f1b.optimizer_s
    assert math.isclose(none.step_s - f1b.step_s, ep_none - ep_1f1b, rel_tol=1e-9)


def test_search_keeps_expert_parallelism_of_a_published_run():
    # Megatron-Bridge's Qwen3-235B on 256 H100 (published_runs.csv mb-h100-qwen3-235b): TP 2, PP 8, the
    # distributed optimizer (ZeRO-1), EP 32. With the recipe's fixed parts the best layout keeps
    # expert parallelism, with expert TP 1 (EP inside a node, as the recipes' intra-node strategy)
    from commcost.comm.model import FabricModel
    from commcost.comm.systems import system_group
    from commcost.analyses.plan.search import SearchInputs, SearchSpace, search
    from commcost.workload.transformer import model_spec

    topo, _ = system_group("dgx-h100", nodes=32)
    space = SearchSpace(spec=model_spec("qwen3-235b-a22b"), seq=4096, global_batch=2048, gpus=(256,), gpus_per_node=8,
                        fixed=(("zero", 1), ("tp", 2), ("pp", 8)))
    r = search(SearchInputs(space=space, gpu="h100-sxm", precision="fp8", top=3), FabricModel(topology=topo))
    best = r.plans[0].inputs.layout
    assert best.ep > 1 and best.expert_tp == 1
    assert all(p.inputs.layout.ep > 1 for p in r.plans)
