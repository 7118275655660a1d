"""plan with the operator model: the stack it names, the compute split, the MFU frontier, the
sensitivity of unstated inputs, and the same numbers from plan and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from commcost.comm.model import FabricModel
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, operator_times, plan
from commcost.comm.systems import system_group
from commcost.analyses.plan.sensitivity import SensitivityRow, sensitivity
from commcost.workload.stacks import resolve_stack
from commcost.workload.transformer import model_spec
from conftest import run_commcost

SPEC = model_spec("llama3-8b")


def _inp(**layout) -> tuple[PlanInputs, FabricModel]:
    topo, _ = system_group("dgx-h100", nodes=1)
    kw = dict(dp=8, global_batch=32)
    kw.update(layout)
    return PlanInputs(spec=SPEC, layout=Layout(**kw), seq=8192, gpu="h100-sxm", gpus_per_node=8), \
        FabricModel(topology=topo)


def test_auto_stack_follows_the_layout():
    assert resolve_stack("auto", Layout(dp=8, zero=3, global_batch=8))[0] == "fsdp"
    assert resolve_stack("auto", Layout(dp=4, tp=2, zero=3, global_batch=8))[0] == "megatron"
    assert resolve_stack("auto", Layout(dp=8, zero=1, global_batch=8))[0] == "megatron"
    assert resolve_stack("torchtitan", Layout(dp=8, global_batch=8)) == ("torchtitan", "given (--stack)")


def test_compute_by_operator_sums_to_compute():
    inp, model = _inp(zero=3)
    p = plan(inp, model)
    ops = operator_times(inp)
    # compute = m x t_c, and t_c is the operators' sum (4 micro-batches: 32 / (1 x 8))
    assert p.compute_s == pytest.approx(4 * ops.compute_s, rel=1e-12)
    assert sum(p.compute_by_operator.values()) == pytest.approx(p.compute_s, rel=1e-12)
    assert p.stack == "fsdp"


def test_eager_stacks_are_slower_than_fused_and_compile_helps():
    inp, model = _inp(zero=3)
    steps = {s: plan(replace(inp, stack=s), model).step_s for s in ("megatron", "torchtitan")}
    compiled = plan(replace(inp, stack="torchtitan", compiled=True), model).step_s
    assert steps["torchtitan"] > compiled > steps["megatron"] * 0.9
    assert steps["torchtitan"] > steps["megatron"]


def test_fp8_attention_only_when_asked():
    inp, model = _inp(zero=1)
    bf16_attn = operator_times(replace(inp, precision="fp8")).attention_s
    fp8_attn = operator_times(replace(inp, precision="fp8", fp8_attention=True)).attention_s
    # the fp8 peak is twice the bf16 peak on H100 (1,979 vs 989.4 TFLOP/s): attention takes half the time
    assert fp8_attn == pytest.approx(bf16_attn * 989.4 / 1979, rel=1e-9)
    assert operator_times(replace(inp, precision="bf16")).attention_s == pytest.approx(bf16_attn, rel=1e-12)


def test_a_plan_above_the_best_published_mfu_says_so():
    inp, model = _inp(zero=1)
    p = plan(replace(inp, efficiency=0.95), model)
    assert p.mfu > 0.47
    assert any("above the best published 47.0%" in w and "Megatron-LM README" in w for w in p.warnings)
    assert not any("best published" in w for w in plan(replace(inp, efficiency=0.3), model).warnings)


def test_sensitivity_spread_by_hand():
    row = SensitivityRow(input="--micro-batch", values=("1", "2"), step_s=(2.0, 3.0), fits=(True, True), current="1")
    # (3 - 2) / 2 = 0.5
    assert row.spread == 0.5


def test_sensitivity_steps_are_plans_steps():
    inp, model = _inp(zero=1)
    rows = {r.input: r for r in sensitivity(inp, model)}
    mb = rows["--micro-batch"]
    for v, s in zip(mb.values, mb.step_s):
        assert s == plan(replace(inp, layout=replace(inp.layout, micro_batch=int(v))), model).step_s
    assert "--vp" not in rows            # no pipeline: no virtual stages
    # the plan runs --stack auto: auto's own step first (its kernels at auto_sustained's fraction), then each stack
    st = rows["--stack"]
    assert st.current == "auto" and st.values == ("auto", "megatron", "nemo", "deepspeed", "torchtitan", "fsdp")
    assert st.step_s[0] == plan(inp, model).step_s
    assert st.step_s[1] == plan(replace(inp, stack="megatron"), model).step_s
    named = {r.input: r for r in sensitivity(replace(inp, stack="nemo"), model)}["--stack"]
    assert named.current == "nemo" and "auto" not in named.values


def test_sensitivity_prices_the_plan_itself_once(monkeypatch):
    # issue 37: every row holds the current value, the plan's own inputs again; priced once (or not at
    # all when the caller passes its plan), the rows unchanged
    import commcost.analyses.plan.sensitivity as S

    inp, model = _inp(zero=1)
    calls = []

    def counting(i, m):
        calls.append(i)
        return plan(i, m)

    monkeypatch.setattr(S, "plan", counting)
    alone = S.sensitivity(inp, model)
    n_alone = len(calls)
    calls.clear()
    given = S.sensitivity(inp, model, plan(inp, model))
    assert given == alone
    assert inp not in calls                  # the plan given is not priced again
    assert n_alone == len(calls) + 1         # alone: priced once, for the first row
    # tried: micro-batch 1, 2, 4, 8 (4 values), recompute 3, stack 6 (no pipeline, no --vp row); each of
    # the 3 rows holds the current value once: 4 + 3 + 6 - 3 = 10 other inputs; the layout refuses
    # micro-batch 8 before any plan, so 9 are priced, each once, and listed
    assert len(calls) == len(set(calls)) == 9
    assert sum(len(r.values) for r in given) - len(given) == 9


def test_cli_prints_the_same_step_and_keys():
    inp, model = _inp(zero=3)
    p = plan(inp, model)
    r = run_commcost("plan", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "32",
                     "--zero", "3", "--seq", "8192", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["step_s"] == p.step_s
    assert d["stack"] == "fsdp" and set(d["compute_by_operator"]) >= {"gemm_s", "attention_s", "elementwise_s"}
    assert d["memory"]["verdict"] in ("fits", "may not fit", "does not fit")
    assert {r["input"] for r in d["sensitivity"]} >= {"--micro-batch", "--recompute", "--stack"}


def test_zero2_scatters_every_micro_batch_where_the_stack_shards_gradients():
    from commcost.analyses.plan.compose import zero2_micro_batch_exposed_s
    from commcost.core.xp import SCALAR

    # (m - 1) max(0, T_rs - W): 3 earlier micro-batches, 50 ms scatters behind 20 ms windows -> 3 x 30 ms = 90 ms
    assert zero2_micro_batch_exposed_s(SCALAR, extra=3, scatter_s=0.05, window_s=0.02) == pytest.approx(0.09)
    assert zero2_micro_batch_exposed_s(SCALAR, extra=3, scatter_s=0.01, window_s=0.02) == 0.0
    inp, model = _inp(zero=2)                      # 32 / (1 x 8) = 4 micro-batches
    ds = plan(replace(inp, stack="deepspeed"), model)
    extra = [c for c in ds.comm if c.comm.count_per_step == 3.0 and c.comm.op.value == "reduce_scatter"]
    assert len(extra) == 1
    total = sum(c.comm.size_bytes for c in ds.comm if c.comm.op.value == "reduce_scatter" and c is not extra[0])
    T_rs = model.cost("reduce_scatter", total, 8, ranks_per_node=8).total_s
    assert extra[0].one_s == pytest.approx(T_rs, rel=1e-12) and extra[0].time_s == pytest.approx(3 * T_rs, rel=1e-12)
    # Megatron's distributed optimizer keeps full gradients until the last micro-batch: no such line
    meg = plan(replace(inp, stack="megatron"), model)
    assert not [c for c in meg.comm if c.comm.count_per_step == 3.0]


def test_every_command_takes_the_registry_aliases():
    # budget took --model 7b; plan and search now resolve the same alias to the same registry entry
    from commcost.workload.transformer import model_spec

    assert model_spec("7b") == model_spec("llama2-7b")
    r = run_commcost("plan", "--model", "7b", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "8",
                     "--zero", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"] == "llama2-7b"


def test_fsdp_under_pipeline_gathers_once_per_step_where_the_stack_does():
    # torchtitan keeps each stage gathered through the step under PP: one gather and one scatter per unit
    # (L/p + 1 = 32/2 + 1 = 17) per step, against 2 m and m rounds (m = 32 / (1 x 4) = 8 micro-batches)
    topo, _ = system_group("dgx-h100", nodes=1)
    model = FabricModel(topology=topo)
    base = PlanInputs(spec=SPEC, layout=Layout(dp=4, pp=2, zero=3, global_batch=32), seq=8192, gpu="h100-sxm",
                      gpus_per_node=8)
    counts = {}
    for st in ("torchtitan", "megatron"):
        p = plan(replace(base, stack=st), model)
        counts[st] = {c.comm.op.value: c.comm.count_per_step for c in p.comm if c.comm.dimension == "dp"}
        counts[st]["weights"] = p.memory.weights_bytes
    assert counts["torchtitan"]["all_gather"] == 17 and counts["torchtitan"]["reduce_scatter"] == 17
    assert counts["megatron"]["all_gather"] == 2 * 8 * 17 and counts["megatron"]["reduce_scatter"] == 8 * 17
    # and the stage's bf16 weights are held whole: + 2 bytes x the stage's parameters
    from commcost.workload.memory import params_per_gpu

    dense, expert = params_per_gpu(SPEC, base.layout)
    assert counts["torchtitan"]["weights"] - counts["megatron"]["weights"] == pytest.approx(2 * (dense + expert),
                                                                                           rel=1e-12)


def _split_inputs(vocab: int, ends: bool, **kw) -> tuple[PlanInputs, FabricModel]:
    # 10 layers on 4 stages: 10 + 2 = 12 slots, 3 a middle stage; the plain split (uneven) puts ceil(10/4) = 3
    # layers and the head on the last stage
    from commcost.workload.transformer import TransformerSpec
    spec = TransformerSpec(layers=10, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=vocab, gated_mlp=True)
    topo, _ = system_group("dgx-h100", nodes=1)
    L = Layout(dp=2, pp=4, global_batch=16, uneven_pipeline=not ends, split_counts_ends=ends)
    return PlanInputs(spec=spec, layout=L, seq=4096, gpu="h100-sxm", gpus_per_node=8, **kw), FabricModel(topology=topo)


def test_a_split_that_counts_the_ends_takes_a_layer_or_the_head_off_the_slowest_stage():
    # a heavy head (V = 1,048,576: 2 V h = 8.6 GFLOP a token against a layer's ~0.44): the last stage, 2 layers and
    # the head, is the slowest: every layer operator 2/3 of the plain split's, the head unchanged
    plain, ends = (operator_times(_split_inputs(1 << 20, e)[0]) for e in (False, True))
    for name in ("gemm_s", "attention_s", "elementwise_s", "casts_s", "recompute_s"):
        assert getattr(ends, name) == pytest.approx(getattr(plain, name) * 2 / 3, rel=1e-12)
    assert ends.head_s == plain.head_s > 0
    # a light head (V = 1,024): a middle stage, 3 layers and no head
    plain, ends = (operator_times(_split_inputs(1024, e)[0]) for e in (False, True))
    assert ends.gemm_s == plain.gemm_s and ends.head_s == 0.0
    assert ends.compute_s == pytest.approx(plain.compute_s - plain.head_s, rel=1e-12)


def test_a_split_that_counts_the_ends_in_executed_flops_by_hand():
    # one rate for every FLOP (--efficiency): the light head's logits leave the slowest stage, F_mb falls by
    # 3 x 2 V h tokens / t = 3 x 2 x 1024 x 4096 x 4096 = 103,079,215,104 FLOPs per micro-batch (m = 16 / 2 = 8)
    (a, model), (b, _) = (_split_inputs(1024, e, efficiency=0.5) for e in (False, True))
    pa, pb = plan(a, model), plan(b, model)
    assert pa.executed_flops_per_gpu - pb.executed_flops_per_gpu == pytest.approx(8 * 103_079_215_104, rel=1e-9)
    # two stages have no middle one: 10 + 2 = 12 slots, 6 a stage, each end stage 5 layers and an end: the plain split
    topo, _ = system_group("dgx-h100", nodes=1)
    two = [PlanInputs(spec=a.spec, layout=Layout(dp=4, pp=2, global_batch=16, split_counts_ends=e), seq=4096,
                      gpu="h100-sxm", gpus_per_node=8) for e in (False, True)]
    assert plan(two[1], model).step_s == plan(two[0], model).step_s


def test_cli_takes_split_counts_ends():
    args = ["plan", "--model", "llama3-8b", "--system", "dgx-h100", "--pp", "4", "--gpus", "8", "--global-batch",
            "16", "--split-counts-ends", "--uneven-pipeline", "--json"]
    with_ends = json.loads(run_commcost(*args).stdout)
    plain = json.loads(run_commcost(*[a for a in args if a != "--split-counts-ends"]).stdout)
    # 32 + 2 = 34 slots on 4 stages (uneven: ceil(34/4) = 9 a middle stage) against ceil(32/4) = 8 and the head
    assert with_ends["step_s"] != plain["step_s"]


@pytest.mark.parametrize("layout, kind", [(dict(dp=8, zero=3), "fsdp"),
                                          (dict(dp=4, tp=2, zero=3, sequence_parallel=True), "torchtitan"),
                                          (dict(dp=4, tp=2, zero=1), "megatron")])
def test_auto_prices_compute_at_the_fraction_of_its_kind(layout, kind):
    # every compute term is max(FLOPs / (u peak eff), bytes / (u HBM eff)) or u x peak for attention, so the
    # compute of --stack auto is the resolved stack's x u_stack / u_auto, u_auto = stacks.json auto_sustained[kind]
    # (ZeRO-3 with TP resolves to torchtitan, priced at auto_sustained["torchtitan"]; ZeRO-3 alone to fsdp)
    from commcost.hardware import load_preset_file

    table = load_preset_file("stacks.json")
    inp, model = _inp(**layout)
    auto = plan(inp, model)
    name = resolve_stack("auto", inp.layout)[0]
    named = plan(replace(inp, stack=name), model)
    ratio = table["stacks"][name]["sustained"] / table["auto_sustained"][kind]
    assert auto.compute_s == pytest.approx(named.compute_s * ratio, rel=1e-12)
    assert auto.stack == name and "what published runs of it sustain" in auto.stack_source
