"""``search --stack NAME``: only the layouts that stack runs (hardware/stacks.json ``layouts``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from commcost.analyses.plan.search import SearchInputs, SearchSpace, search
from commcost.analyses.plan.space import Choices, enumerate_space
from commcost.cli import main
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Link
from commcost.core.errors import InputError
from commcost.hardware import load_preset_file
from commcost.workload.stacks import STACKS, layout_runs, stack, stack_layouts, stack_refuses
from commcost.workload.transformer import TransformerSpec, model_spec

FLAT = FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6))
SPEC = TransformerSpec(name="s", layers=8, hidden=512, heads=8, vocab=1024)
SPACE = SearchSpace(spec=SPEC, seq=1024, global_batch=16, gpus=(16,), gpus_per_node=8)


def _columns(stack_name: str) -> dict[str, np.ndarray]:
    """The layouts search prices under ``stack_name``; under ``auto`` every part (each layout under the stack that
    runs it: space.AUTO_PARTS), together every layout some stack runs."""
    from commcost.analyses.plan.space import AUTO_PARTS

    parts = [(stack_name, None)] if stack_name != "auto" else [("auto", None)] + [(n, n) for n in AUTO_PARTS[1:]]
    outs = []
    for name, part in parts:
        base, cols = enumerate_space(SPACE, 16, "none", name, part)
        out = {k: base[k][cols.bi] for k in ("t", "p", "v", "c", "e")}
        out.update(zero=cols.zero, sp=cols.sp, rc=cols.rc)
        outs.append(out)
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}


def test_every_named_stack_has_sourced_layouts():
    rows = load_preset_file("stacks.json")["stacks"]
    for name in STACKS[1:]:
        rules = stack_layouts(name)
        assert rules.source and len(rules.source) > 40, name
        assert set(rules.zero) <= {0, 1, 2, 3}
        assert "layouts" in rows[name]
        assert stack(name).name == name             # the pricing row still loads beside it
    assert stack_layouts("auto") is None


def test_layout_runs_by_hand():
    mega, titan, fsdp, ds = (stack_layouts(n) for n in ("megatron", "torchtitan", "fsdp", "deepspeed"))
    one = dict(tp=1, pp=1, vp=1, cp=1, ep=1, sp=0)
    # Megatron: the distributed optimizer (ZeRO-1) with a pipeline; ZeRO-3 (Megatron-FSDP) only without one
    assert layout_runs(mega, **{**one, "tp": 8, "pp": 4, "vp": 2, "cp": 2, "zero": 1, "sp": 1})
    assert not layout_runs(mega, **{**one, "pp": 4, "zero": 3})
    assert layout_runs(mega, **{**one, "tp": 2, "zero": 3})
    # torchtitan: no ZeRO-1; DDP only as 1-D parallelism; TP always with sequence parallelism
    assert not layout_runs(titan, **{**one, "zero": 1})
    assert layout_runs(titan, **{**one, "zero": 0}) and not layout_runs(titan, **{**one, "tp": 2, "zero": 0, "sp": 1})
    assert not layout_runs(titan, **{**one, "tp": 2, "zero": 3, "sp": 0})
    assert layout_runs(titan, **{**one, "tp": 2, "pp": 2, "vp": 2, "cp": 2, "zero": 3, "sp": 1})
    # FSDP: data parallelism only, ZeRO 0, 2, 3
    assert [bool(layout_runs(fsdp, **{**one, "zero": z})) for z in range(4)] == [True, False, True, True]
    assert not layout_runs(fsdp, **{**one, "tp": 2, "zero": 3})
    # DeepSpeed: ZeRO-2/3 are incompatible with its pipeline engine; no interleaving, no ring CP
    assert layout_runs(ds, **{**one, "tp": 4, "pp": 4, "zero": 1})
    assert not layout_runs(ds, **{**one, "pp": 4, "zero": 2})
    assert not layout_runs(ds, **{**one, "pp": 4, "vp": 2, "zero": 0})
    assert not layout_runs(ds, **{**one, "cp": 2, "zero": 0})
    # array-safe: one boolean per row
    got = layout_runs(ds, tp=np.array([1, 1]), pp=np.array([4, 1]), vp=1, cp=1, ep=1, zero=np.array([2, 2]), sp=0)
    assert got.tolist() == [False, True]


@pytest.mark.parametrize("name", ["megatron", "torchtitan", "fsdp", "deepspeed"])
def test_enumerated_layouts_are_the_stack_s(name):
    every, only = _columns("auto"), _columns(name)
    rules = stack_layouts(name)
    ok = layout_runs(rules, tp=every["t"], pp=every["p"], vp=every["v"], cp=every["c"], ep=every["e"],
                     zero=every["zero"], sp=every["sp"])
    # the stack's space is exactly the rows of the whole space it runs, and is smaller
    assert len(only["t"]) == int(ok.sum()) < len(every["t"])
    assert layout_runs(rules, tp=only["t"], pp=only["p"], vp=only["v"], cp=only["c"], ep=only["e"],
                       zero=only["zero"], sp=only["sp"]).all()


def test_megatron_2021_space_has_no_sp_cp_zero1_or_selective():
    only = _columns("megatron-2021")
    assert len(only["t"]) > 0
    assert set(only["zero"].tolist()) == {0} and set(only["sp"].tolist()) == {0}
    assert set(only["c"].tolist()) == {1} and set(only["rc"].tolist()) == {0, 2}   # none and full
    assert set(only["t"].tolist()) > {1} and set(only["p"].tolist()) > {1} and set(only["v"].tolist()) > {1}
    # v2.6 interleaves only over pp > 2 (arguments.py asserts it): no pp 2 with vp > 1
    assert not ((only["p"] == 2) & (only["v"] > 1)).any() and ((only["p"] == 4) & (only["v"] > 1)).any()
    # by hand: the rows of the whole space with ZeRO-0, no SP, no CP, recompute none, less those interleaving
    # over 2 stages -- once for none and once for full (the two recompute codes multiply the same rows)
    fixed = (("zero", 0), ("sp", 0), ("cp", 1), ("recompute", 0))
    space = SearchSpace(spec=SPEC, seq=1024, global_batch=16, gpus=(16,), gpus_per_node=8, fixed=fixed)
    base, cols = enumerate_space(space, 16, "none", "auto")
    p, v = base["p"][cols.bi], base["v"][cols.bi]
    assert len(only["t"]) == 2 * int(((v == 1) | (p > 2)).sum()) > 0


def test_plan_equals_search_under_megatron_2021():
    from commcost.analyses.plan.plan import plan
    r = search(SearchInputs(space=SPACE, gpu="a100-sxm4-80gb", stack="megatron-2021", top=8), FLAT)
    assert r.plans
    for p in r.plans:
        L = p.inputs.layout
        assert L.zero == 0 and not L.sequence_parallel and L.cp == 1 and L.recompute in ("none", "full")
        again = plan(p.inputs, FLAT)
        assert again.step_s == pytest.approx(p.step_s, rel=1e-12)
        assert again.memory.total_bytes == pytest.approx(p.memory.total_bytes, rel=1e-12)


def test_torchtitan_0_0_space_accumulates_only_through_a_pipeline():
    base, cols = enumerate_space(SPACE, 16, "none", "torchtitan-0.0")
    p, m, b, d = (base[k][cols.bi] for k in ("p", "m", "b", "d"))
    assert len(p) > 0 and (m[p == 1] == 1).all() and (m[p > 1] > 1).any()
    # without a pipeline the micro-batch is the local batch B / d (global batch 16)
    assert (b[p == 1] * d[p == 1] == 16).all()
    # by hand: today's torchtitan's rows less those without a pipeline and m > 1
    tb, tc = enumerate_space(SPACE, 16, "none", "torchtitan")
    tp_, tm = tb["p"][tc.bi], tb["m"][tc.bi]
    past = stack_layouts("torchtitan-0.0")
    kept = layout_runs(past, tp=tb["t"][tc.bi], pp=tp_, vp=tb["v"][tc.bi], cp=tb["c"][tc.bi],
                       ep=tb["e"][tc.bi], zero=tc.zero, sp=tc.sp)      # its ZeRO rule without a pipeline
    assert len(p) == int((kept & ((tp_ > 1) | (tm == 1))).sum())
    r = search(SearchInputs(space=SPACE, gpu="h100-sxm", stack="torchtitan-0.0", top=8), FLAT)
    assert r.plans and all(q.inputs.layout.pp > 1 or q.inputs.layout.micro_batches == 1 for q in r.plans)


def _assert_refused(capsys, argv, stack_name, words):
    """``main(argv)`` exits 2 with one line on stderr naming ``--stack stack_name`` and saying ``words``."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"commcost: error: --stack {stack_name} ") and words in err[0]


def test_cli_refuses_what_megatron_2021_cannot_run(capsys):
    plan_argv = ["plan", "--model", "megatron-gpt-18.4b", "--system", "dgx-a100", "--gpus", "256",
                 "--global-batch", "1024", "--seq", "2048", "--precision", "fp16", "--stack", "megatron-2021",
                 "--tp", "8"]
    for extra, words in ((["--sequence-parallel"], "does not run sequence parallelism"),
                         (["--recompute", "selective"], "does not run selective recomputation"),
                         (["--zero", "1"], "does not run ZeRO-1"), (["--cp", "2"], "does not run cp > 1")):
        _assert_refused(capsys, [*plan_argv, *extra], "megatron-2021", words)
    assert main([*plan_argv, "--recompute", "full", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "megatron-2021"
    search_argv = ["search", "--model", "megatron-gpt-1.7b", "--system", "dgx-a100", "--gpus", "32",
                   "--global-batch", "512", "--seq", "2048", "--precision", "fp16", "--top", "3",
                   "--stack", "megatron-2021", "--no-progress"]
    with pytest.raises(SystemExit) as e:
        main([*search_argv, "--fix", "recompute=selective"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not run selective recomputation" in err[0]


def test_llm_foundry_2023_space_is_sharded_data_parallelism_by_hand():
    # llm-foundry v0.0.4: Composer FSDP FULL_SHARD / SHARD_GRAD_OP, data parallelism only, whole-block
    # checkpointing or none: the whole space's rows with tp = pp = cp = ep = 1 and ZeRO 2 or 3, each once for
    # recompute none and once for full
    only = _columns("llm-foundry-2023")
    assert len(only["t"]) > 0
    assert set(only["zero"].tolist()) == {2, 3} and set(only["rc"].tolist()) == {0, 2}
    for k in ("t", "p", "v", "c", "e"):
        assert set(only[k].tolist()) == {1}, k
    fixed = (("tp", 1), ("pp", 1), ("cp", 1), ("sp", 0), ("recompute", 0))
    space = SearchSpace(spec=SPEC, seq=1024, global_batch=16, gpus=(16,), gpus_per_node=8, fixed=fixed)
    base, cols = enumerate_space(space, 16, "none", "auto")
    z, e = cols.zero, base["e"][cols.bi]
    assert len(only["t"]) == 2 * int((((z == 2) | (z == 3)) & (e == 1)).sum()) > 0


def test_plan_equals_search_under_llm_foundry_2023():
    from commcost.analyses.plan.plan import plan
    r = search(SearchInputs(space=SPACE, gpu="a100-sxm4-80gb", stack="llm-foundry-2023", top=8), FLAT)
    assert r.plans
    for p in r.plans:
        L = p.inputs.layout
        assert L.zero in (2, 3) and L.tp == L.pp == L.cp == 1 and L.recompute in ("none", "full")
        again = plan(p.inputs, FLAT)
        assert again.step_s == pytest.approx(p.step_s, rel=1e-12)
        assert again.memory.total_bytes == pytest.approx(p.memory.total_bytes, rel=1e-12)


def test_cli_refuses_what_llm_foundry_2023_cannot_run(capsys):
    plan_argv = ["plan", "--model", "mpt-7b", "--system", "dgx-h100", "--gpus", "8", "--global-batch", "48",
                 "--micro-batch", "6", "--stack", "llm-foundry-2023"]
    for extra, words in ((["--zero", "3", "--recompute", "selective"], "does not run selective recomputation"),
                         (["--zero", "1"], "does not run ZeRO-1"), (["--zero", "3", "--tp", "2"], "does not run tp > 1")):
        _assert_refused(capsys, [*plan_argv, *extra], "llm-foundry-2023", words)
    assert main([*plan_argv, "--zero", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"] == "llm-foundry-2023"


def test_search_under_a_stack_returns_only_its_layouts():
    r = search(SearchInputs(space=SPACE, gpu="h100-sxm", stack="fsdp", top=20), FLAT)
    assert r.plans
    for p in r.plans:
        L = p.inputs.layout
        assert (L.tp, L.pp, L.cp) == (1, 1, 1) and L.zero in (0, 2, 3)
    r = search(SearchInputs(space=SPACE, gpu="h100-sxm", stack="torchtitan", top=20), FLAT)
    for p in r.plans:
        L = p.inputs.layout
        assert L.zero != 1 and (L.tp == 1 or L.sequence_parallel)


def test_a_fixed_dimension_the_stack_cannot_run_is_refused():
    assert stack_refuses(stack_layouts("fsdp"), {"tp": 2}) == "--stack fsdp does not run tp > 1 (hardware/stacks.json)"
    assert "does not run ZeRO-1" in stack_refuses(stack_layouts("torchtitan"), {"zero": 1})
    assert stack_refuses(None, {"zero": 1}) is None
    fixed = SearchSpace(spec=SPEC, seq=1024, global_batch=16, gpus=(16,), gpus_per_node=8, fixed=(("zero", 1),))
    with pytest.raises(InputError, match="ZeRO-1"):
        SearchInputs(space=fixed, gpu="h100-sxm", stack="fsdp")


def test_cli_stack_flag(capsys):
    argv = ["search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--seq", "4096", "--top", "3", "--stack", "torchtitan"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stack"] == "torchtitan"
    for r in d["results"]:
        assert r["layout"]["zero"] in (0, 2, 3) and "--stack torchtitan" in r["plan_command"]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--fix", "zero=1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not run ZeRO-1" in err[0]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(STACKS),
       rows=st.lists(st.tuples(st.sampled_from([1, 2, 8]), st.sampled_from([1, 4]), st.sampled_from([1, 2]),
                               st.sampled_from([1, 2]), st.sampled_from([1, 8]), st.integers(0, 3),
                               st.integers(0, 1)), min_size=1, max_size=12))
def test_layout_runs_on_columns_is_the_rule_row_by_row(name, rows):
    rules = stack_layouts(name)
    cols = np.array(rows).T
    got = layout_runs(rules, tp=cols[0], pp=cols[1], vp=cols[2], cp=cols[3], ep=cols[4], zero=cols[5], sp=cols[6])
    for i, (tp, pp, vp, cp, ep, zero, sp) in enumerate(rows):
        one = bool(layout_runs(rules, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, zero=zero, sp=sp))
        assert bool(got[i]) == one
        if rules is not None:   # the rule in words (stacks.json), row by row
            want = (zero in rules.zero and (pp == 1 or zero in rules.zero_with_pp)
                    and ((tp, pp, cp) == (1, 1, 1) or zero in rules.zero_with_model_parallel)
                    and all(d == 1 or getattr(rules, k) for k, d in
                            (("tp", tp), ("pp", pp), ("vp", vp), ("cp", cp), ("ep", ep)))
                    and (tp == 1 or {"optional": True, "always": sp == 1, "never": sp == 0}[rules.sequence_parallel])
                    and (rules.sequence_parallel != "never" or sp == 0))
            assert one == want


def test_stacks_running_names_who_runs_a_layout(capsys):
    from commcost.parallel.layout import Layout
    from commcost.workload.stacks import stacks_running

    # ZeRO-2 with a pipeline: only torchtitan (FSDP2 without resharding after forward, with PP)
    L = Layout(dp=32, tp=2, pp=2, vp=4, cp=4, zero=2, sequence_parallel=True, global_batch=1024)
    assert stacks_running(L) == ("torchtitan", "torchtitan-0.0")
    # the distributed optimizer with TP and PP: Megatron, NeMo and Megatron-DeepSpeed, today's and 2022's (Megatron-LM
    # of 2021 ran DDP only)
    assert stacks_running(Layout(dp=8, tp=8, pp=4, zero=1, global_batch=64)) == (
        "megatron", "nemo", "deepspeed", "megatron-2022", "megatron-2023", "megatron-2024", "nemo-2024", "nemo-2024h1",
        "deepspeed-2022")
    # DDP with TP and PP: the 2021 release too; with selective recomputation not the 2021-22 releases that recompute
    # none or full (Megatron-LM of 2021, Megatron-DeepSpeed of 2022)
    assert stacks_running(Layout(dp=8, tp=8, pp=4, zero=0, global_batch=64)) == (
        "megatron", "nemo", "deepspeed", "megatron-2021", "megatron-2022", "megatron-2023", "megatron-2024", "nemo-2024",
        "nemo-2024h1", "deepspeed-2022")
    assert stacks_running(Layout(dp=8, tp=8, pp=4, zero=0, recompute="selective", global_batch=64)) == (
        "megatron", "nemo", "deepspeed", "megatron-2022", "megatron-2023", "megatron-2024", "nemo-2024", "nemo-2024h1")
    # FSDP alone: every stack but the Megatrons before Megatron-FSDP (2021-2024 and NeMo 24.01-25.02: ZeRO 0/1
    # only); with selective recomputation not llm-foundry of 2023 (whole blocks only) nor Megatron-DeepSpeed of 2022
    assert stacks_running(Layout(dp=64, zero=3, global_batch=64)) == ("megatron", "nemo", "deepspeed", "torchtitan",
                                                                         "fsdp", "torchtitan-0.0", "deepspeed-2022",
                                                                         "llm-foundry-2023", "amd-fsdp-te-2025")
    assert stacks_running(Layout(dp=64, zero=3, recompute="selective", global_batch=64)) == (
        "megatron", "nemo", "deepspeed", "torchtitan", "fsdp", "torchtitan-0.0", "amd-fsdp-te-2025")
    argv = ["search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--seq", "4096", "--top", "2", "--json"]
    assert main(argv) == 0
    for r in json.loads(capsys.readouterr().out)["results"]:
        L = r["layout"]
        want = stacks_running(Layout(dp=L["dp"], tp=L["tp"], pp=L["pp"], vp=L["vp"], cp=L["cp"], zero=L["zero"],
                                     sequence_parallel=L["sequence_parallel"], recompute=L["recompute"],
                                     global_batch=64))
        assert r["stacks_that_run"] == list(want)


def test_stack_behaviour_enters_the_grid_as_per_row_columns_from_the_stacks_file():
    """``grid_memory.stack_column``: under ``auto`` a row takes the field of the stack that prices it
    (ZeRO-3 without TP, PP or CP: fsdp; ZeRO-3 with any of them: torchtitan; every other row: megatron); one value
    where the stacks agree."""
    from commcost.analyses.plan.grid_memory import stack_column, stack_value

    spec = model_spec("llama2-7b")
    inp = SearchInputs(space=SearchSpace(spec=spec, seq=4096, global_batch=64, gpus=(8,), gpus_per_node=8),
                       gpu="h100-sxm")
    base = {"t": np.array([1, 2, 1, 1]), "p": np.array([1, 1, 2, 1]), "c": np.array([1, 1, 1, 2])}
    none = np.zeros(5, dtype=np.int64)
    cols = Choices(bi=np.array([0, 0, 1, 2, 3]), sp=none, rc=none, zero=np.array([3, 0, 3, 3, 3]))
    # rows: (t1 p1 c1 z3) fsdp; (t1 p1 c1 z0) megatron; (t2 p1 z3), (t1 p2 z3), (t1 p1 c2 z3) torchtitan
    want = [stack(n).zero2_scatter_per_micro_batch for n in ("fsdp", "megatron", "torchtitan", "torchtitan", "torchtitan")]
    assert stack_column(cols, base, inp, "zero2_scatter_per_micro_batch").tolist() == want
    assert len({stack(n).zero2_scatter_per_micro_batch for n in ("megatron", "torchtitan")}) == 2   # else it shows nothing
    want = [stack(n).grad_bytes for n in ("fsdp", "megatron", "torchtitan", "torchtitan", "torchtitan")]
    assert stack_column(cols, base, inp, "grad_bytes").tolist() == want
    assert stack("megatron").grad_bytes != stack("fsdp").grad_bytes      # else the test shows nothing
    assert stack_column(cols, base, inp, "zero3_gathers_per_layer") == stack("megatron").zero3_gathers_per_layer
    named = SearchInputs(space=inp.space, gpu="h100-sxm", stack="deepspeed")
    assert stack_value(named, "zero3_live_params") == stack("deepspeed").zero3_live_params
    with pytest.raises(ValueError, match="grad_bytes"):
        stack_value(inp, "grad_bytes")
