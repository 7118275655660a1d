"""Direct tests of ``workload/stacks.py``: every stack of the data file loads, ``auto`` resolves by the
layout, unknown names list the valid ones."""

from __future__ import annotations

import numpy as np
import pytest

from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.hardware import load_preset_file
from commcost.workload.stacks import AUTO_KINDS, STACKS, auto_is_fsdp, auto_kind, resolve_stack, stack


@pytest.mark.parametrize("name", [s for s in STACKS if s != "auto"])
def test_every_stack_loads_with_a_source(name):
    s = stack(name)
    assert s.name == name and s.source and not s.compiled
    assert s.grad_bytes in (2, 4) and 0 < s.sustained <= 1
    assert stack(name, compiled=True).compiled


def test_auto_is_fsdp_only_for_zero3_without_tp_pp_or_cp():
    assert resolve_stack("auto", Layout(dp=8, zero=3, global_batch=8))[0] == "fsdp"
    # ZeRO-3 with TP: FSDP2 with TP, torchtitan's recipe, which always shards the sequence under TP; without
    # --sequence-parallel torchtitan does not run it and the first stack that does (megatron) prices it
    assert resolve_stack("auto", Layout(dp=4, tp=2, zero=3, sequence_parallel=True, global_batch=8))[0] == "torchtitan"
    assert resolve_stack("auto", Layout(dp=4, tp=2, zero=3, global_batch=8))[0] == "megatron"
    assert resolve_stack("auto", Layout(dp=4, cp=2, zero=3, global_batch=8))[0] == "torchtitan"
    assert resolve_stack("auto", Layout(dp=8, zero=1, global_batch=8))[0] == "megatron"
    assert resolve_stack("auto", Layout(dp=4, tp=2, zero=1, sequence_parallel=True, global_batch=8))[0] == "megatron"
    assert resolve_stack("deepspeed", Layout(dp=8, global_batch=8)) == ("deepspeed", "given (--stack)")
    # the rule is array-safe: elementwise & of the four conditions
    assert [bool(auto_is_fsdp(z, t, p, c)) for z, t, p, c in ((3, 1, 1, 1), (3, 2, 1, 1), (3, 1, 2, 1), (3, 1, 1, 2),
                                                              (2, 1, 1, 1))] == [True, False, False, False, False]
    z = np.array([3, 3, 3, 1])
    assert auto_is_fsdp(z, np.array([1, 2, 1, 1]), np.ones(4), np.array([1, 1, 2, 1])).tolist() == [
        True, False, False, False]


def test_auto_kinds_by_hand():
    # ZeRO-3 alone: FSDP; ZeRO-3 with TP, PP or CP: FSDP2 composed with them, torchtitan's recipe; ZeRO 0-2:
    # Megatron-Core (DDP, its distributed optimizer, Megatron-FSDP's optim_grads)
    cases = ((3, 1, 1, 1), (3, 2, 1, 1), (3, 1, 4, 1), (3, 1, 1, 2), (2, 1, 1, 1), (2, 2, 1, 1), (0, 8, 4, 2))
    assert [auto_kind(z, t, p, c) for z, t, p, c in cases] == [
        "fsdp", "torchtitan", "torchtitan", "torchtitan", "megatron", "megatron", "megatron"]
    table = load_preset_file("stacks.json")
    assert set(table["auto_sustained"]) == set(AUTO_KINDS)
    for kind in AUTO_KINDS:
        assert 0 < table["auto_sustained"][kind] <= 1
        assert stack("megatron", auto_kind=kind).sustained == table["auto_sustained"][kind]
    assert table["auto_stacks"] == {"megatron": "megatron", "torchtitan": "torchtitan", "fsdp": "fsdp"}
    assert stack("fsdp").sustained == table["stacks"]["fsdp"]["sustained"]   # a named stack keeps its own
    with pytest.raises(InputError, match="auto kind"):
        stack("megatron", auto_kind="jax")


def test_unknown_stack_lists_the_valid_ones():
    with pytest.raises(InputError, match=r"unknown stack 'jax' \(valid: auto, megatron, nemo, deepspeed"):
        stack("jax")
    with pytest.raises(InputError, match="unknown stack 'jax'"):
        resolve_stack("jax", Layout(dp=1, global_batch=1))


def test_torchtitan_before_0_1_keeps_weights_gathered_only_under_a_pipeline():
    # torchtitan before PR #822 (2025-02-06) resharded after the forward unless pp_enabled: ZeRO-2
    # (weights kept gathered) only with pp > 1; today's torchtitan runs it either way
    from commcost.workload.stacks import layout_runs, stack_layouts
    old, new = stack_layouts("torchtitan-0.0"), stack_layouts("torchtitan")
    one = dict(tp=1, vp=1, cp=1, ep=1, sp=0)
    assert not layout_runs(old, pp=1, zero=2, **one)
    assert layout_runs(old, pp=1, zero=3, **one)
    assert layout_runs(old, pp=2, zero=2, **one)
    assert layout_runs(new, pp=1, zero=2, **one)
    assert old.zero_without_pp == (0, 3) and new.zero_without_pp == new.zero


def _priced_as_today(release: str, family: str) -> None:
    """A past release is a stack ``--stack`` accepts, priced field for field as today's ``family``: only
    its layout rules (``hardware/stacks.json`` ``layouts``) differ."""
    from dataclasses import fields

    from commcost.workload.stacks import PAST_RELEASES
    assert release in PAST_RELEASES
    old, new = stack(release), stack(family)
    for f in fields(old):
        if f.name not in ("name", "source"):
            assert getattr(old, f.name) == getattr(new, f.name), f.name


def test_megatron_2021_is_megatron_priced_with_2021_layouts():
    # Megatron-LM v2.6 (2021-08): DDP only, TP, PP and interleaving, no SP / selective (2022-04/05),
    # no distributed optimizer (2022-02), no CP (2023-10), no experts; kernels and loop as megatron
    from commcost.workload.stacks import stack_layouts
    _priced_as_today("megatron-2021", "megatron")
    rules = stack_layouts("megatron-2021")
    assert rules.zero == rules.zero_with_pp == rules.zero_with_model_parallel == (0,)
    assert (rules.tp, rules.pp, rules.vp, rules.cp, rules.ep) == (True, True, True, False, False)
    assert rules.sequence_parallel == "never" and rules.recompute == ("none", "full")
    for name in ("v2.6", "2022-02-10", "2022-04-28", "2022-05-16", "2023-10-12"):
        assert name in rules.source
    # stacks without a recompute entry run all three
    assert stack_layouts("megatron").recompute == ("none", "selective", "full")


def test_megatron_2021_refuses_by_hand():
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    rules = stack_layouts("megatron-2021")
    one = dict(tp=8, pp=4, vp=2, cp=1, ep=1, zero=0, sp=0)
    assert layout_runs(rules, **one, recompute="full") and layout_runs(rules, **one, recompute="none")
    assert not layout_runs(rules, **one, recompute="selective")
    assert not layout_runs(rules, **{**one, "sp": 1}) and not layout_runs(rules, **{**one, "zero": 1})
    assert not layout_runs(rules, **{**one, "cp": 2})
    # interleaving over 2 stages: v2.6 asserts pipeline-model-parallel-size > 2
    assert rules.vp_min_pp == 3 and not layout_runs(rules, **{**one, "pp": 2})
    assert layout_runs(rules, **{**one, "pp": 2, "vp": 1}) and layout_runs(stack_layouts("megatron"), **{**one, "pp": 2})

    def L(**kw):
        return Layout(**{"dp": 1, "global_batch": 8, **kw})
    assert layout_refusal("megatron-2021", L(tp=8, pp=4, vp=2, recompute="full")) is None
    assert layout_refusal("megatron-2021", L(tp=8, sequence_parallel=True)) == (
        "--stack megatron-2021 does not run sequence parallelism (hardware/stacks.json)")
    assert layout_refusal("megatron-2021", L(tp=8, recompute="selective")) == (
        "--stack megatron-2021 does not run selective recomputation (it runs none, full; hardware/stacks.json)")
    assert layout_refusal("megatron-2021", L(dp=8, zero=1)) == (
        "--stack megatron-2021 does not run ZeRO-1 (it runs ZeRO-0; hardware/stacks.json)")
    assert layout_refusal("megatron-2021", L(dp=2, cp=2)) == (
        "--stack megatron-2021 does not run cp > 1 (hardware/stacks.json)")
    assert layout_refusal("megatron-2021", L(pp=2, vp=2)) == (
        "--stack megatron-2021 interleaves (vp > 1) only over 3 or more pipeline stages (hardware/stacks.json)")
    # the other layout rules, in words: megatron's ZeRO-3 under a pipeline, torchtitan's TP without SP
    assert layout_refusal("megatron", L(dp=2, pp=2, zero=3)) == (
        "--stack megatron does not run ZeRO-3 with a pipeline (pp > 1) (hardware/stacks.json)")
    assert layout_refusal("torchtitan", L(tp=2)) == (
        "--stack torchtitan runs tp > 1 only with sequence parallelism (--sequence-parallel; hardware/stacks.json)")
    assert layout_refusal("auto", L(tp=8, sequence_parallel=True, recompute="selective")) is None


def test_deepspeed_2022_is_deepspeed_without_sp_or_selective():
    # Megatron-DeepSpeed as MT-NLG (2021) and BLOOM (2022) ran it: no --sequence-parallel and no
    # --recompute-granularity before microsoft's upstream merge of 2023-07-04; kernels and loop as deepspeed, but
    # DeepSpeed before v0.6.0 synchronised the host before each ZeRO-3 parameter all-gather (PR #1188, #1453)
    from dataclasses import replace

    from commcost.workload.stacks import layout_runs, stack_layouts
    old, new = stack("deepspeed-2022"), stack("deepspeed")
    assert old.zero3_gather_host_sync and not new.zero3_gather_host_sync
    assert replace(old, name="deepspeed", source=new.source, zero3_gather_host_sync=False) == new
    rules, today = stack_layouts("deepspeed-2022"), stack_layouts("deepspeed")
    assert rules.sequence_parallel == "never" and rules.recompute == ("none", "full")
    assert (rules.zero, rules.zero_with_pp, rules.vp, rules.cp) == (today.zero, today.zero_with_pp, False, False)
    one = dict(tp=8, pp=35, vp=1, cp=1, ep=1, zero=1)
    assert layout_runs(rules, **one, sp=0, recompute="full") and not layout_runs(rules, **one, sp=1)
    assert not layout_runs(rules, **one, sp=0, recompute="selective")
    assert layout_runs(today, **one, sp=1, recompute="selective")


def test_torchtitan_0_0_accumulates_only_through_a_pipeline():
    # torchtitan before PR #1238 (2025-06-05): a step is one forward and backward of the local batch B / d
    # without a pipeline; a pipeline schedule splits it into micro-batches (issue #292, 2024-11-05)
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    rules = stack_layouts("torchtitan-0.0")
    assert not rules.accumulation and stack_layouts("torchtitan").accumulation and stack_layouts("megatron").accumulation
    one = dict(tp=1, vp=1, cp=1, ep=1, zero=3, sp=0)
    assert layout_runs(rules, pp=1, micro_batches=1, **one)
    assert not layout_runs(rules, pp=1, micro_batches=2, **one)
    assert layout_runs(rules, pp=2, micro_batches=8, **one)       # the pipeline splits the local batch
    assert layout_runs(rules, pp=1, **one)                          # m not asked
    assert layout_runs(stack_layouts("torchtitan"), pp=1, micro_batches=2, **one)
    got = layout_runs(rules, pp=np.array([1, 1, 4]), micro_batches=np.array([1, 4, 4]), **one)
    assert got.tolist() == [True, False, True]
    # global batch 16 over dp 8: the local batch 16 / 8 = 2 is the micro-batch
    assert layout_refusal("torchtitan-0.0", Layout(dp=8, zero=3, micro_batch=2, global_batch=16)) is None
    assert layout_refusal("torchtitan-0.0", Layout(dp=8, zero=3, micro_batch=1, global_batch=16)) == (
        "--stack torchtitan-0.0 does not accumulate gradients without a pipeline: each step is one forward and "
        "backward of the local batch, micro-batch = global batch / dp = 16 / 8 = 2 (--micro-batch 2), not 1 "
        "(hardware/stacks.json)")
    assert layout_refusal("torchtitan", Layout(dp=8, zero=3, micro_batch=1, global_batch=16)) is None



def test_megatron_2022_is_megatron_without_cp_ep_or_megatron_fsdp():
    # Megatron-LM of 2022-06 (Korthikanti et al. 2022's code): distributed optimizer, SP and selective recomputation
    # in; CP (2023-10), expert parallelism and Megatron-FSDP (ZeRO-2/3) not yet; interleaving still over pp > 2
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    _priced_as_today("megatron-2022", "megatron")
    rules = stack_layouts("megatron-2022")
    assert (rules.zero, rules.cp, rules.ep, rules.vp_min_pp) == ((0, 1), False, False, 3)
    assert rules.sequence_parallel == "optional" and rules.recompute == ("none", "selective", "full")
    one = dict(tp=8, pp=8, vp=1, cp=1, ep=1, zero=1, sp=1)
    assert layout_runs(rules, **one, recompute="selective") and not layout_runs(rules, **{**one, "zero": 3})
    assert not layout_runs(rules, **{**one, "cp": 2}) and not layout_runs(rules, **{**one, "pp": 2, "vp": 2})
    assert layout_refusal("megatron-2022", Layout(dp=4, cp=2, global_batch=8)) == (
        "--stack megatron-2022 does not run cp > 1 (hardware/stacks.json)")


@pytest.mark.parametrize("release, family, vp_min_pp", [("megatron-2024", "megatron", 3), ("nemo-2024", "nemo", 2)])
def test_the_2024_megatrons_have_no_megatron_fsdp(release, family, vp_min_pp):
    # Megatron-FSDP (--use-custom-fsdp) first shipped in Megatron-Core 0.12.0 (2025-05-06): FlagPerf's Megatron-Core
    # 0.6.0 / FlagScale of 2023-12 and NeMo 24.09-25.02 ran DDP or the distributed optimizer; core 0.6.0 still
    # interleaved only over pp > 2 (PP = 2 came 2024-05-31)
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    _priced_as_today(release, family)
    rules, today = stack_layouts(release), stack_layouts(family)
    assert rules.zero == (0, 1) and today.zero == (0, 1, 2, 3) and rules.vp_min_pp == vp_min_pp
    assert (rules.cp, rules.ep, rules.sequence_parallel, rules.recompute) == (today.cp, today.ep,
                                                                              today.sequence_parallel, today.recompute)
    one = dict(tp=1, pp=1, vp=1, cp=2, ep=1, sp=0)
    assert layout_runs(rules, **one, zero=1) and not layout_runs(rules, **one, zero=3)
    assert layout_runs(today, **one, zero=3)
    assert layout_runs(rules, tp=1, pp=2, vp=2, cp=1, ep=1, zero=1, sp=0) == (vp_min_pp == 2)
    assert layout_refusal(release, Layout(dp=8, zero=3, global_batch=8)) == (
        f"--stack {release} does not run ZeRO-3 (it runs ZeRO-0, ZeRO-1; hardware/stacks.json)")
def test_megatron_2023_is_the_local_transformer_in_megatrons_loop():
    # Megatron-LM before e7b74a4b7e (2024-04-02) and FlagScale 6fc099c: the legacy local transformer's kernels
    # (FlashAttention-2, eager RMSNorm / SwiGLU / rotary), Megatron's training loop, fp32 main gradients
    from commcost.workload.stacks import PAST_RELEASES, stack_layouts
    assert "megatron-2023" in PAST_RELEASES
    old, new = stack("megatron-2023"), stack("megatron")
    assert old.attention_kernel == "fa2" and new.attention_kernel == "fa3"
    for name in ("selective", "loss_accesses_per_vocab", "loss_bytes_per_vocab", "main_grad_bytes", "grad_bytes",
                 "sustained", "zero3_gathers_per_layer"):
        assert getattr(old, name) == getattr(new, name), name
    # what the eager modules keep: the fp32 copy of a norm's input and its bf16 output (4 + 2), the pre-rotary
    # tensor and its rotate_half (2 copies), gate, up and SiLU outputs (6)
    assert (old.norm_saved_bytes, old.rotary_saved_copies, old.gated_mlp_saved_bytes) == (6, 2, 6)
    for name in ("e7b74a4b7e", "2024-04-02", "6fc099c", "flash_attn_varlen_func"):
        assert name in old.source
    rules = stack_layouts("megatron-2023")
    assert rules.zero == rules.zero_with_pp == rules.zero_with_model_parallel == (0, 1)
    assert (rules.tp, rules.pp, rules.vp, rules.cp, rules.ep) == (True, True, True, False, True)
    assert rules.sequence_parallel == "optional" and rules.recompute == ("none", "selective", "full")
    assert rules.vp_min_pp == 3


def test_megatron_2023_refuses_by_hand():
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    rules = stack_layouts("megatron-2023")
    one = dict(tp=8, pp=4, vp=2, cp=1, ep=1, zero=1, sp=1)
    assert layout_runs(rules, **one, recompute="selective")
    assert not layout_runs(rules, **{**one, "cp": 2}) and not layout_runs(rules, **{**one, "zero": 3})

    def L(**kw):
        return Layout(**{"dp": 1, "global_batch": 8, **kw})
    assert layout_refusal("megatron-2023", L(tp=8, pp=4, sequence_parallel=True)) is None
    assert layout_refusal("megatron-2023", L(dp=2, cp=2)) == (
        "--stack megatron-2023 does not run cp > 1 (hardware/stacks.json)")
    assert layout_refusal("megatron-2023", L(dp=8, zero=3)) == (
        "--stack megatron-2023 does not run ZeRO-3 (it runs ZeRO-0, ZeRO-1; hardware/stacks.json)")


def test_llm_foundry_2023_is_fsdp_calling_flashattention_in_triton():
    # llm-foundry v0.0.4 as its MPT benchmark sweep ran it (sweep.sh at 061f2c7): Composer FSDP, the yamls'
    # attn_impl triton; everything else as fsdp, whose u_stack it shares
    from dataclasses import fields

    from commcost.workload.stacks import PAST_RELEASES, stack_layouts
    assert "llm-foundry-2023" in PAST_RELEASES
    old, new = stack("llm-foundry-2023"), stack("fsdp")
    assert (old.attention_kernel, new.attention_kernel) == ("triton", "fa2")
    for f in fields(old):
        if f.name not in ("name", "attention_kernel", "source"):
            assert getattr(old, f.name) == getattr(new, f.name), f.name
    for name in ("061f2c7", "v0.0.4", "attn_impl triton", "flash_attn_triton"):
        assert name in old.source
    rules = stack_layouts("llm-foundry-2023")
    assert rules.zero == rules.zero_without_pp == (2, 3)
    assert rules.zero_with_pp == rules.zero_with_model_parallel == ()
    assert (rules.tp, rules.pp, rules.vp, rules.cp, rules.ep) == (False, False, False, False, False)
    assert rules.sequence_parallel == "never" and rules.recompute == ("none", "full")


def test_llm_foundry_2023_refuses_by_hand():
    from commcost.workload.stacks import layout_refusal, layout_runs, stack_layouts
    rules = stack_layouts("llm-foundry-2023")
    one = dict(tp=1, pp=1, vp=1, cp=1, ep=1, zero=3, sp=0)
    assert layout_runs(rules, **one, recompute="full") and layout_runs(rules, **one, recompute="none")
    assert layout_runs(rules, **{**one, "zero": 2})
    assert not layout_runs(rules, **one, recompute="selective")
    assert not layout_runs(rules, **{**one, "zero": 0}) and not layout_runs(rules, **{**one, "zero": 1})
    assert not layout_runs(rules, **{**one, "tp": 2}) and not layout_runs(rules, **{**one, "pp": 2})

    def L(**kw):
        return Layout(**{"dp": 8, "global_batch": 8, **kw})
    assert layout_refusal("llm-foundry-2023", L(zero=3, recompute="full")) is None
    assert layout_refusal("llm-foundry-2023", L(zero=0)) == (
        "--stack llm-foundry-2023 does not run ZeRO-0 (it runs ZeRO-2, ZeRO-3; hardware/stacks.json)")
    assert layout_refusal("llm-foundry-2023", L(dp=4, tp=2, zero=3)) == (
        "--stack llm-foundry-2023 does not run tp > 1 (hardware/stacks.json)")
    assert layout_refusal("llm-foundry-2023", L(zero=3, recompute="selective")) == (
        "--stack llm-foundry-2023 does not run selective recomputation (it runs none, full; hardware/stacks.json)")


def test_amd_fsdp_te_2025_is_fsdp_with_transformer_engine_layers():
    # AMD's train_fsdp.py with enable_fp8: FSDP over TE TransformerLayers. Everything that prices a step is fsdp's
    # (its u_stack is fsdp's: benchmarks/_sustained.py); what a layer keeps is TE's: the norms' bf16 inputs (2),
    # fc1's output as SwiGLU's input (4 per element of f), GEMM inputs saved in fp8, the fused rotary (0 copies)
    from dataclasses import fields

    from commcost.workload.stacks import PAST_RELEASES, stack_layouts
    assert "amd-fsdp-te-2025" in PAST_RELEASES
    te, fsdp = stack("amd-fsdp-te-2025"), stack("fsdp")
    memory = ("norm_saved_bytes", "gated_mlp_saved_bytes", "fp8_saves_inputs", "rotary_saved_copies")
    assert tuple(getattr(te, n) for n in memory) == (2, 4, True, 0)
    assert fsdp.gated_mlp_saved_bytes == 6 and not fsdp.fp8_saves_inputs
    for f in fields(te):
        if f.name not in ("name", "source") + memory:
            assert getattr(te, f.name) == getattr(fsdp, f.name), f.name
    for name in ("7112e272", "TransformerLayer", "ctx.save_for_backward", "fused=True"):
        assert name in te.source
    assert stack_layouts("amd-fsdp-te-2025").zero == stack_layouts("fsdp").zero


def test_nemo_2024h1_is_nemo_2024_with_flashattention2():
    # the NeMo launcher's NVTE_FUSED_ATTN=0 (tags 24.01-24.07) changes only which attention kernel runs
    from commcost.workload.stacks import PAST_RELEASES, stack
    assert "nemo-2024h1" in PAST_RELEASES
    early, late = stack("nemo-2024h1"), stack("nemo-2024")
    assert (early.attention_kernel, late.attention_kernel) == ("fa2", "fa3")
    assert early.sustained == late.sustained and early.selective == late.selective
    assert early.norm_accesses == late.norm_accesses and early.grad_bytes == late.grad_bytes


def _stack_rows() -> dict:
    return load_preset_file("stacks.json")["stacks"]


def test_today_releases_state_every_key_and_past_ones_name_an_earlier_base():
    from commcost.workload.stacks import KNOWN_STACKS, PAST_RELEASES, STACK_KEYS

    rows = _stack_rows()
    assert tuple(rows) == KNOWN_STACKS[1:]           # names come from the file, in its order
    for name in STACKS[1:]:
        assert set(rows[name]) == {*STACK_KEYS, "layouts"}, name
        assert rows[name]["layouts"]["source"], name
    assert PAST_RELEASES
    for name in PAST_RELEASES:
        base = rows[name]["base"]
        assert list(rows).index(base) < list(rows).index(name), (name, base)   # no forward reference, no loop
        assert rows[name]["source"], name


def test_a_past_release_gives_only_the_keys_that_differ_each_with_its_source():
    from commcost.workload.stacks import PAST_RELEASES, STACK_KEYS, stack_row

    rows = _stack_rows()
    for name in PAST_RELEASES:
        row = rows[name]
        base = stack_row(row["base"])
        given = set(row) - {"base", "source", "sources", "layouts"}
        assert given <= set(STACK_KEYS), (name, given - set(STACK_KEYS))
        for key in given:
            assert row[key] != base[key], f"{name}.{key} equals its base's: drop it"
        assert set(row.get("sources", {})) == given, name
        assert all(len(text) > 40 for text in row.get("sources", {}).values()), name
        layouts = row.get("layouts", {})
        for key in set(layouts) - {"source"}:
            assert layouts[key] != base["layouts"].get(key), f"{name}.layouts.{key} equals its base's: drop it"
        assert not layouts or layouts["source"], name
        if not given:   # a release that changes no behaviour key is only a layouts restriction
            assert set(row) == {"base", "source", "layouts"}, name


def test_a_release_prices_as_its_base_except_for_its_own_keys():
    # megatron-2023 changes the attention kernel (fa2) and element-wise accesses; nemo-2024h1's base is nemo-2024,
    # which is nemo's: its one change is fa2; megatron-2021 changes no behaviour key at all
    from dataclasses import replace

    from commcost.workload.stacks import stack_family

    assert stack("megatron-2021") == replace(stack("megatron"), name="megatron-2021", source=stack("megatron-2021").source)
    h1, nemo = stack("nemo-2024h1"), stack("nemo")
    assert h1.attention_kernel == "fa2" and nemo.attention_kernel == "fa3"
    assert replace(h1, name="nemo", source=nemo.source, attention_kernel="fa3") == nemo
    assert stack("megatron-2023").norm_accesses == 18 and stack("megatron").norm_accesses == 2
    assert stack_family("nemo-2024h1") == "nemo" and stack_family("fsdp") == "fsdp"


def test_a_row_missing_a_key_is_refused_not_defaulted(monkeypatch):
    import commcost.workload.stacks as stacks

    table = {**stacks._table(), "stacks": dict(stacks._table()["stacks"])}
    table["stacks"]["megatron"] = {k: v for k, v in table["stacks"]["megatron"].items() if k != "grad_bytes"}
    monkeypatch.setattr(stacks, "_table", lambda: table)
    stacks.stack.cache_clear()
    try:
        with pytest.raises(InputError, match="stacks.json megatron: missing grad_bytes"):
            stacks.stack("megatron")
        with pytest.raises(InputError, match="stacks.json megatron-2021: missing grad_bytes"):
            stacks.stack("megatron-2021")       # inherits the gap: no silent default either
    finally:
        stacks.stack.cache_clear()


def stack_name_tuples(source: str, names: frozenset[str]) -> list[int]:
    """Lines of ``source`` holding a tuple, list or set literal of two or more stack names."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(named) >= 2:
                lines.append(node.lineno)
    return lines


def test_no_stack_names_written_as_a_literal_tuple_in_the_library():
    from commcost.workload.stacks import KNOWN_STACKS
    from conftest import ROOT

    names = frozenset(KNOWN_STACKS)
    # formats/ lists file formats (one reader or writer each: EMIT_KINDS, FORMATS), named after their frameworks
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "src" / "commcost").rglob("*.py"))
             if "formats" not in p.relative_to(ROOT).parts for line in stack_name_tuples(p.read_text(), names)]
    assert not found, found
    assert stack_name_tuples('X = ("megatron", "nemo")\nY = ["fsdp"]\n', names) == [1]   # the check can fail
