"""MoE layers' TP collectives, the expert memory and layout a search keeps, and the grouped GEMM's cost;
worked by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.comm.collectives import Collective
from commcost.core.xp import SCALAR
from commcost.comm.model import FabricModel
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.plan.search import SearchInputs, SearchSpace, search
from commcost.comm.systems import system_group
from commcost.parallel.layout import Layout
from commcost.parallel.tensor import tensor_ops, tp_blocks_per_stage
from commcost.workload.operators import kernel_rates, local_sort_passes, micro_batch_operators
from commcost.workload.stacks import stack
from commcost.workload.transformer import TransformerSpec, model_spec

TINY_MOE = TransformerSpec(name="tiny-moe", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=768,
                           gated_mlp=True, vocab=2048, experts=8, top_k=2, expert_ffn_hidden=256, moe_layers=3)


# 1. MoE layers run attention's TP pair only (the experts' collectives are expert TP's)

def test_tp_blocks_on_moe_layers_by_hand():
    # 4 layers, 3 of them MoE, no shared experts: attention 4 + dense MLP 1 = 2 x 4 - 3 = 5 blocks
    assert tp_blocks_per_stage(layers_per_stage=4, moe_layers_per_stage=3, shared_experts=0) == 5
    # shared experts are a TP-split MLP: every layer keeps both pairs, 2 x 4 = 8
    assert tp_blocks_per_stage(layers_per_stage=4, moe_layers_per_stage=3, shared_experts=1) == 8
    # dense model: 2 per layer
    assert tp_blocks_per_stage(layers_per_stage=4, moe_layers_per_stage=0, shared_experts=0) == 8


def test_tp_ops_count_on_moe_layers():
    # b = 1, s = 1024, h = 512: S = 1 x 1024 x 512 x 2 = 1,048,576 B; m = 16 / (1 x 4) = 4; 4 layers of
    # which 3 MoE: 5 blocks; SP: one all-gather and one reduce-scatter per block and pass: 4 x 5 x 2 = 40
    L = Layout(dp=4, tp=2, global_batch=16, sequence_parallel=True)
    ag, rs = tensor_ops(layout=L, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8,
                        moe_layers_per_stage=3)
    assert (ag.op, rs.op) == (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    assert ag.size_bytes == 1_048_576 and ag.count_per_step == rs.count_per_step == 40
    # full recomputation, 3 passes: 4 x 5 x 3 = 60; without MoE layers 4 x 8 x 3 = 96
    Lf = Layout(dp=4, tp=2, global_batch=16, sequence_parallel=True, recompute="full")
    assert tensor_ops(layout=Lf, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2, gpus_per_node=8,
                      moe_layers_per_stage=3)[0].count_per_step == 60
    assert tensor_ops(layout=Lf, hidden=512, seq=1024, layers_per_stage=4, activation_bytes=2,
                      gpus_per_node=8)[0].count_per_step == 96


def test_plan_charges_no_dense_mlp_pair_on_moe_layers():
    # TINY_MOE (4 layers, 3 MoE), t = 2 with SP, e = 2, t_e = 1, b = 1, s = 512, d = 4, B = 16:
    # m = 16 / (1 x 4) = 4; TP per step 4 x (2 x 4 - 3) x 2 = 40 of each; the experts run no TP collective
    topo, _ = system_group("dgx-h100", nodes=1)
    L = Layout(dp=4, tp=2, ep=2, etp=1, sequence_parallel=True, global_batch=16)
    pr = plan(PlanInputs(spec=TINY_MOE, layout=L, seq=512, gpu="h100-sxm", gpus_per_node=8), FabricModel(topology=topo))
    tp = [line for line in pr.comm if line.comm.dimension == "tp"]
    assert [line.comm.count_per_step for line in tp] == [40, 40]
    ep = [line.comm for line in pr.comm if line.comm.dimension == "ep"]
    assert [c.op for c in ep] == [Collective.ALL_TO_ALL]


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 96), data=st.data(), shared=st.integers(0, 2))
def test_tp_blocks_between_one_and_two_per_layer(layers, data, shared):
    # every layer keeps attention's pair, and at most the MLP's too
    moe = data.draw(st.integers(0, layers))
    n = tp_blocks_per_stage(layers_per_stage=layers, moe_layers_per_stage=moe, shared_experts=shared)
    assert layers <= n <= 2 * layers
    assert (n == 2 * layers) == (shared > 0 or moe == 0)


# 2. the best layout of a published 235B run keeps expert parallelism

@pytest.mark.parametrize("precision, a2a, overlap", [
    ("bf16", "deepep", "none"),   # Megatron-MoE-ModelZoo, published_moe_runs.csv mz-h100-qwen3-235b-deepep
    ("fp8", "nccl", "1f1b"),      # Megatron-Bridge 25.11, published_runs.csv mb-h100-qwen3-235b (its recipe's overlap)
])
def test_unconstrained_search_of_a_published_235b_run_keeps_expert_parallelism(precision, a2a, overlap):
    # Qwen3-235B-A22B on 256 H100: GBS 2048, seq 4096, the run's precision, dispatcher and all-to-all
    # overlap, the stack both ran (Megatron-Core); nothing of the layout fixed. Every published layout of it
    # keeps EP > 1 (8 or 32); so must
    # the best one, and it must fit in memory
    topo, _ = system_group("dgx-h100", nodes=32)
    space = SearchSpace(spec=model_spec("qwen3-235b-a22b"), seq=4096, global_batch=2048, gpus=(256,), gpus_per_node=8)
    r = search(SearchInputs(space=space, gpu="h100-sxm", precision=precision, a2a=a2a, moe_overlap=overlap, top=1,
                            stack="megatron"),
               FabricModel(topology=topo))
    best = r.plans[0]
    assert best.inputs.layout.ep > 1 and best.memory.fits


# 3. the alltoall dispatcher's sort by local expert

def test_local_sort_passes_by_dispatcher_and_local_experts():
    # Megatron-Core's alltoall dispatcher sorts the received tokens by local expert when a rank holds
    # more than one (E/e > 1): E = 128, e = 8 -> 16 local experts, one pass; e = 128 -> 1, none;
    # the flex (DeepEP/HybridEP) dispatcher delivers per rank and permutes once: none
    assert local_sort_passes(SCALAR, a2a="nccl", experts=128, ep=8) == 1.0
    assert local_sort_passes(SCALAR, a2a="nccl", experts=128, ep=128) == 0.0
    assert local_sort_passes(SCALAR, a2a="deepep", experts=128, ep=8) == 0.0


def test_local_sort_adds_one_permutation_pair_of_hbm_traffic():
    # TINY_MOE: 4 layers, 3 MoE (share 0.75), k = 2, h = 256; n = 1024 tokens, t = 1, e = 2 (4 local
    # experts). The sort reads and writes the k copies after the dispatch and before the combine:
    # 2 bytes x n x 4 k h = 2 x 1024 x 4 x 2 x 256 = 4,194,304 B per MoE layer forward; x 0.75 x 4 layers
    # x 3 (forward, and twice that backward) = 37,748,736 B at the sustained HBM rate
    r = kernel_rates("h100-sxm", "bf16", stack("megatron"))
    kw = dict(tokens=1024, seq=1024, layers=4, tp=1, sp=False, ep=2, full=False, selective=False, micro_batches=1)
    nccl = micro_batch_operators(SCALAR, TINY_MOE, stack("megatron"), r, a2a="nccl", **kw)
    flex = micro_batch_operators(SCALAR, TINY_MOE, stack("megatron"), r, a2a="deepep", **kw)
    assert nccl.compute_s - flex.compute_s == pytest.approx(37_748_736 / r.hbm_bytes_per_s, rel=1e-9)
    assert nccl.elementwise_s - flex.elementwise_s == pytest.approx(37_748_736 / r.hbm_bytes_per_s, rel=1e-9)
    # one local expert per rank (e = 8): nothing to sort, the dispatchers' element-wise work is equal
    one = dict(kw, ep=8)
    assert micro_batch_operators(SCALAR, TINY_MOE, stack("megatron"), r, a2a="nccl", **one).compute_s == \
        pytest.approx(micro_batch_operators(SCALAR, TINY_MOE, stack("megatron"), r, a2a="deepep", **one).compute_s)
