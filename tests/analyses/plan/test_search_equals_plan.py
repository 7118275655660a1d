"""The grid composition equals ``plan`` on every configuration of several small spaces (one truth:
``search`` ranks with the numbers ``plan`` prints)."""

from __future__ import annotations

import math

import pytest

from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.comm.topology import Link
from commcost.analyses.plan.plan import plan
from commcost.comm.systems import system_group
from commcost.analyses.plan.search import SearchInputs, SearchSpace, evaluate_all, plan_inputs_of
from commcost.workload.transformer import TransformerSpec, model_spec

TINY = TransformerSpec(name="tiny", layers=6, hidden=512, heads=8, kv_heads=4, ffn_hidden=1536, gated_mlp=True,
                       vocab=4096)
TINY_MOE = TransformerSpec(name="tiny-moe", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=768,
                           gated_mlp=True, vocab=2048, experts=8, top_k=2, expert_ffn_hidden=256, moe_layers=3)
GPT = TransformerSpec(name="gpt-ish", layers=4, hidden=256, heads=4, vocab=1000, biases=True, dropout=True,
                      max_positions=512)


def _six_per_node(world: int) -> FabricModel:
    """A two-tier fabric of 6-GPU nodes: groups of 4 or 8 straddle nodes, so placement's rounding shows."""
    from commcost.comm.topology import Topology

    return FabricModel(topology=Topology(gpus_per_node=6, nodes=-(-world // 6),
                                         intra=Link(bandwidth_bytes_per_s=150e9, latency_s=2e-6),
                                         inter=Link(bandwidth_bytes_per_s=25e9, latency_s=6e-6)))


def _fabric(world: int) -> FabricModel:
    topo, _ = system_group("dgx-h100", nodes=max(1, -(-world // 8)))
    return FabricModel(topology=topo)


CASES = [
    # (spec, seq, global batch, world, comm model, flash, tp overlap, every k-th row checked)
    (TINY, 1024, 16, 16, _fabric(16), True, False, 3),
    (TINY_MOE, 512, 8, 16, _fabric(16), True, False, 11),
    (GPT, 512, 8, 8, FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9, latency_s=5e-6)), False, False, 1),
    (TINY, 1024, 16, 16, _fabric(16), True, True, 7),
    (model_spec("llama3-8b"), 8192, 64, 64, _fabric(64), True, False, 97),
    # named stacks: DeepSpeed's per-parameter ZeRO-3 gathers and per-micro-batch ZeRO-2 scatters, PyTorch's
    # op-level selective checkpointing and eager kernels, compiled; Transformer Engine's fp8 inputs in memory
    (TINY, 1024, 32, 16, _fabric(16), True, False, 5, dict(stack="deepspeed")),
    (TINY, 1024, 32, 16, _fabric(16), True, False, 5, dict(stack="torchtitan", compiled=True)),
    # (--stack fsdp enumerates data-parallel layouts only, hardware/stacks.json: every one is compared)
    (TINY, 1024, 64, 16, _fabric(16), True, False, 1, dict(stack="fsdp", precision="fp8")),
    (TINY, 1024, 32, 16, _fabric(16), True, True, 5, dict(stack="nemo", precision="fp8")),
    # Megatron-LM's Transformer Engine keeps the fp8 weights and transposes across micro-batches (ZeRO < 3)
    (TINY, 1024, 32, 16, _fabric(16), True, False, 5, dict(stack="megatron", precision="fp8")),
    # torchtitan's async TP: each TP collective beside the GEMM it is fused with (stacks.json tp_overlap_per_gemm)
    (TINY, 1024, 32, 16, _fabric(16), True, True, 5, dict(stack="torchtitan", precision="fp8")),
    # 6 GPUs per node (issue 21): tp 4 and the dp/ep groups straddle nodes
    (TINY, 1024, 24, 24, _six_per_node(24), True, False, 3),
    (TINY_MOE, 512, 24, 24, _six_per_node(24), True, False, 5),
    # MoE as practitioners run it: expert TP 1 or t, node-aware fp8 dispatch across nodes, 1F1B overlap, imbalance
    (TINY_MOE, 512, 16, 32, _fabric(32), True, False, 7,
     dict(a2a="deepep", fp8_dispatch=True, moe_overlap="1f1b", expert_load=1.25)),
    (TINY_MOE, 512, 16, 32, _fabric(32), True, False, 7, dict(moe_overlap="dualpipe")),
    # torchtitan's FSDP2 with EP: experts over efsdp, the stage gathered under PP, op-level checkpointing of MoE
    # layers (the dispatcher's saved outputs: all-to-all here, DeepEP below)
    (TINY_MOE, 512, 16, 16, _fabric(16), True, False, 5, dict(stack="torchtitan")),
    (TINY_MOE, 512, 16, 16, _fabric(16), True, False, 5, dict(stack="torchtitan", a2a="deepep")),
]


def test_every_llm_foundry_2023_configuration_equals_plan():
    # llm-foundry of 2023 prices attention with its own kernel (FlashAttention in Triton) and runs a small space
    # (ZeRO-2/3, data parallelism only, whole-block or no recomputation): every row is compared, all six kinds
    # (ZeRO-2 with and without a bucket cap, ZeRO-3, each with recompute none and full) among them
    inp = SearchInputs(space=SearchSpace(spec=TINY, seq=2048, global_batch=1024, gpus=(16,), gpus_per_node=8),
                       gpu="h100-sxm", stack="llm-foundry-2023")
    model = _fabric(16)
    rows, values = evaluate_all(inp, model, 16)
    n = len(rows["t"])
    assert n > 50
    kinds = set()
    for i in range(n):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        kinds.add((int(row["zero"]), int(row["rc"]), int(row["cap"]) > 0))
        for key, want in (("step_s", p.step_s), ("compute_s", p.compute_s), ("exposed_comm_s", p.exposed_comm_s),
                          ("optimizer_s", p.optimizer_s), ("memory_bytes", p.memory.total_bytes)):
            assert math.isclose(float(values[key][i]), want, rel_tol=1e-9, abs_tol=1e-15), (key, row)
    assert kinds == {(2, 0, False), (2, 0, True), (2, 2, False), (2, 2, True), (3, 0, False), (3, 2, False)}


def test_every_amd_fsdp_te_2025_fp8_configuration_equals_plan():
    # AMD's FSDP script over Transformer Engine layers in fp8 (stack amd-fsdp-te-2025): what TE's layers keep (fp8
    # GEMM inputs, fc1's bf16 output) in search's memory columns as in plan's; every row of its small space
    inp = SearchInputs(space=SearchSpace(spec=TINY, seq=2048, global_batch=1024, gpus=(16,), gpus_per_node=8),
                       gpu="h100-sxm", stack="amd-fsdp-te-2025", precision="fp8")
    model = _fabric(16)
    rows, values = evaluate_all(inp, model, 16)
    n = len(rows["t"])
    assert n > 10
    for i in range(n):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        for key, want in (("step_s", p.step_s), ("memory_bytes", p.memory.total_bytes),
                          ("device_low_bytes", p.memory.device_bytes[0])):
            assert math.isclose(float(values[key][i]), want, rel_tol=1e-9, abs_tol=1e-15), (key, row)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_configuration_equals_plan(case):
    spec, seq, B, W, model, flash, overlap, every, *extra = CASES[case]
    G = model.topology.gpus_per_node if isinstance(model, FabricModel) else 8
    inp = SearchInputs(space=SearchSpace(spec=spec, seq=seq, global_batch=B, gpus=(W,), gpus_per_node=G),
                       gpu="h100-sxm", flash_attention=flash, tp_comm_overlap=overlap, **(extra[0] if extra else {}))
    rows, values = evaluate_all(inp, model, W)
    n = len(rows["t"])
    assert n > 50
    kinds = set()
    algorithms = set()
    for i in range(0, n, every):
        row = {k: v[i] for k, v in rows.items()}
        p = plan(plan_inputs_of(inp, row), model)
        algorithms.update((line.algorithm, int(row["etp"])) for line in p.comm if line.comm.dimension == "ep")
        kinds.add((int(row["zero"]), int(row["sp"]), int(row["rc"]), int(row["c"]) > 1, int(row["p"]) > 1,
                   int(row["cap"]) > 0))
        for key, want in (("step_s", p.step_s), ("compute_s", p.compute_s), ("pipeline_bubble_s", p.pipeline_bubble_s),
                          ("exposed_comm_s", p.exposed_comm_s), ("optimizer_s", p.optimizer_s),
                          ("memory_bytes", p.memory.total_bytes), ("device_low_bytes", p.memory.device_bytes[0]),
                          ("memory_low_bytes", p.memory.allocated_bytes[0]), ("nccl_high_bytes", p.memory.nccl_bytes[1]),
                          ("device_high_bytes", p.memory.device_bytes[1])):
            got = float(values[key][i])
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), (key, row, got, want)
        # the grid's verdicts are the plan's MemoryBreakdown's (search ranks on them, it decides nothing itself)
        assert bool(values["fits"][i]) == p.memory.fits, row
        assert bool(values["fragile"][i]) == p.memory.fragile(inp.headroom), row
        for dim in ("tp", "cp", "ep", "pp", "dp"):
            want = p.exposed_by_dimension().get(dim, 0.0)
            assert math.isclose(float(values[f"exposed_{dim}_s"][i]), want, rel_tol=1e-9, abs_tol=1e-15), (dim, row)
    assert len(kinds) >= 8           # the check covered many kinds of configuration, not one
    if extra and extra[0].get("a2a") == "deepep":   # node-aware dispatch across nodes, and both expert TPs, were checked
        assert ("node-aware (deepep)", 2) in algorithms and any(etp == 1 for _, etp in algorithms)
