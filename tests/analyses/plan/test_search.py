"""commcost search: a space enumerated by hand, the memory filter, objective ordering, --fix, equality
with plan, progress and Ctrl-C, bad input."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, settings, strategies as st

from commcost.cli import main
from commcost.comm.model import FlatLinkModel
from commcost.comm.topology import Link
from commcost.core.errors import InputError
from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.search import (SearchInputs, SearchSpace, evaluate_all, parse_fix, plan_inputs_of,
                                           search, search_passes)
from commcost.analyses.plan.space import enumerate_space
from commcost.workload.transformer import TransformerSpec

FLAT = FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6))
TINY = TransformerSpec(name="tiny", layers=2, hidden=64, heads=2, vocab=128)


def _layouts(space: SearchSpace, world: int) -> set[tuple]:
    """Every layout search prices: under ``--stack auto`` the parts of the space each stack that runs them prices
    (:func:`commcost.analyses.plan.search.search_passes`), disjoint, together the layouts some stack runs."""
    out: set[tuple] = set()
    for pinp, part in search_passes(SearchInputs(space=space, gpu="h100-sxm")):
        base, cols = enumerate_space(space, world, "none", pinp.stack, part)
        got = {(int(base["t"][j]), int(base["p"][j]), int(base["v"][j]), int(base["c"][j]), int(base["d"][j]),
                int(base["b"][j]), int(sp), int(rc), int(z), int(cap))
               for j, sp, rc, z, cap in zip(cols.bi, cols.sp, cols.rc, cols.zero, cols.cap)}
        assert not got & out           # each layout is priced once, by one stack
        out |= got
    return out


def test_tiny_space_enumerated_by_hand():
    # 2 layers, 2 heads, seq 64, global batch 2, on 2 GPUs of a 2-GPU node. Structural layouts
    # (t, p, v, c, d, b): W = d t p c = 2; b d divides B = 2; p <= 2 layers; c = 2 needs 64 % 4 == 0.
    structural = [
        (1, 1, 1, 1, 2, 1),             # pure data parallel: d = 2, B/d = 1 -> b = 1
        (1, 1, 1, 2, 1, 1),             # context parallel: c = 2, d = 1, b = 1 (m = 2)
        (1, 1, 1, 2, 1, 2),             # ... b = 2 (m = 1)
        (1, 2, 1, 1, 1, 1),             # pipeline: p = 2 (v <= L/p = 1), b = 1
        (1, 2, 1, 1, 1, 2),             # ... b = 2
        (2, 1, 1, 1, 1, 1),             # tensor parallel: t = 2 divides 2 heads, b = 1
        (2, 1, 1, 1, 1, 2),             # ... b = 2
    ]
    MiB = 2 ** 20
    want = set()
    for t, p, v, c, d, b in structural:
        shared = d * c > 1                                  # some rank shares a weight shard
        for sp in ((0, 1) if t > 1 else (0,)):              # SP needs t > 1 and (s/c) % t == 0
            for rc in (0, 1, 2):                            # none, selective, full
                for z in ((0, 1, 2, 3) if shared else (0,)):
                    caps = (0, 100 * MiB, 400 * MiB) if shared and z < 3 else (0,)
                    for cap in caps:
                        want.add((t, p, v, c, d, b, sp, rc, z, cap))
    # 3 shared x 3 rc x (3 zero x 3 caps + ZeRO-3) = 90; 2 pipeline x 3 = 6; 2 tensor x 2 SP x 3 = 12
    assert len(want) == 108
    space = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=2)
    assert _layouts(space, 2) == want
    r = search(SearchInputs(space=space, gpu="h100-sxm", top=200), FLAT)
    assert r.evaluated == 108 and r.feasible == 108


def test_fix_restricts_and_can_pass_the_node_bound():
    space = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=2, fixed=parse_fix(["tp=2"]))
    got = _layouts(space, 2)
    assert got and all(x[0] == 2 for x in got) and len(got) == 12
    # t = 2 > G = 1 is left out unless fixed
    free = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=1)
    assert all(x[0] == 1 for x in _layouts(free, 2))
    fixed = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=1, fixed=(("tp", 2),))
    assert {x[0] for x in _layouts(fixed, 2)} == {2}
    pinned = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(1, 2), gpus_per_node=2, fixed=(("gpus", 2),))
    assert _layouts(pinned, 1) == set() and len(_layouts(pinned, 2)) == 108
    assert parse_fix(["recompute=full,sp=on", "mb=4"]) == (("recompute", 2), ("sp", 1), ("micro_batch", 4))
    for bad in ("foo=1", "tp", "zero=4", "recompute=some", "tp=x"):
        with pytest.raises(InputError):
            parse_fix([bad])


def test_memory_filter_counts_and_reasons():
    # llama2-7b on one 80 GB GPU: only t = p = c = d = 1 and ZeRO-0 exist; b in {1, 2, 4} x 3 recompute
    # = 9 layouts, and 16 bytes x 6.74e9 parameters = 107.8 GB of model states alone do not fit.
    from commcost.workload.transformer import model_spec

    space = SearchSpace(spec=model_spec("llama2-7b"), seq=4096, global_batch=4, gpus=(1,), gpus_per_node=8)
    r = search(SearchInputs(space=space, gpu="h100-sxm"), FLAT)
    assert (r.evaluated, r.feasible, r.over_by_states, r.over_by_activations) == (9, 0, 9, 0)
    assert r.plans == ()
    from commcost.report.search import render_search_text

    assert "model states alone exceed the GPU in every layout" in render_search_text(r)
    # on 8 GPUs some fit, some do not for activations only; the counts add up and every result fits
    space8 = SearchSpace(spec=model_spec("llama2-7b"), seq=4096, global_batch=64, gpus=(8,), gpus_per_node=8)
    inp8 = SearchInputs(space=space8, gpu="h100-sxm", top=5)
    r8 = search(inp8, FLAT)
    assert r8.feasible + r8.over_by_states + r8.over_by_activations == r8.evaluated
    assert r8.over_by_activations > 0 and r8.feasible > 0
    assert all(p.memory.fits for p in r8.plans)
    rows, values = evaluate_all(inp8, FLAT, 8)
    # fits = the low estimate of the card's use (allocated + CUDA context + NCCL, MemoryBreakdown.fits)
    fits = values["device_low_bytes"] <= values["capacity_bytes"]
    assert int(fits.sum()) == r8.feasible
    # the best plan is the fastest layout that fits, those that leave less than the headroom free at the upper
    # end of the card's use ranked last (SearchInputs.fragile_last)
    from commcost.analyses.plan.search_inputs import memory_fragile

    safe = fits & ~memory_fragile(values["memory_bytes"], values["capacity_bytes"], inp8.headroom,
                                  values["nccl_high_bytes"])
    assert safe.any()
    assert r8.grid_step_s[0] == pytest.approx(float(values["step_s"][safe].min()), rel=1e-12)
    _at_advised_caps(r8)


def _at_advised_caps(r) -> None:
    """Each result is the grid's row priced at its own bucket advice's cap (search.advised): at the cap it was
    ranked at, plan gives the grid's step; the cap printed is the advice's."""
    from dataclasses import replace

    for p, g, cap in zip(r.plans, r.grid_step_s, r.grid_cap_bytes):
        at_grid = plan(replace(p.inputs, bucket_cap_bytes=cap), FLAT) if cap != p.inputs.bucket_cap_bytes else p
        assert at_grid.step_s == pytest.approx(g, rel=1e-9)
        if p.bucket_advice is not None:
            assert p.inputs.bucket_cap_bytes == p.bucket_advice.recommended_bytes


def test_objective_ordering_over_a_gpu_range():
    spec = TransformerSpec(name="small", layers=8, hidden=1024, heads=16, vocab=32000, gated_mlp=True,
                           ffn_hidden=2816)
    space = SearchSpace(spec=spec, seq=2048, global_batch=64, gpus=(4, 8, 16), gpus_per_node=8)
    by = {}
    for objective in ("step", "tokens-per-gpu", "cost"):
        r = search(SearchInputs(space=space, gpu="h100-sxm", objective=objective, price_per_gpu_hour=2.5, top=8),
                   FLAT)
        by[objective] = r
        steps = [p.step_s for p in r.plans]
        tpg = [p.tokens_per_s_per_gpu for p in r.plans]
        if objective == "step":
            assert steps == sorted(steps)
        else:
            assert tpg == sorted(tpg, reverse=True)
    # the fastest step uses the most GPUs; the most tokens per GPU fewer
    assert by["step"].plans[0].inputs.layout.world == 16
    assert by["tokens-per-gpu"].plans[0].inputs.layout.world < 16
    # dollars per token = price / (3600 tokens/s/GPU): the cost ranking is the tokens-per-GPU ranking
    assert [p.inputs for p in by["cost"].plans] == [p.inputs for p in by["tokens-per-gpu"].plans]


@settings(max_examples=8, deadline=None)
@given(layers=st.sampled_from([2, 3, 4, 6]), heads=st.sampled_from([2, 4, 8]), batch=st.sampled_from([4, 6, 8, 16]),
       world=st.sampled_from([2, 4, 8]), seq=st.sampled_from([256, 1024]))
@example(layers=2, heads=8, batch=8, world=2, seq=256)   # the grid's fastest (TP 2) is not the best advised plan
def test_properties_best_is_the_minimum_and_counts_add_up(layers, heads, batch, world, seq):
    spec = TransformerSpec(name="h", layers=layers, hidden=64 * heads, heads=heads, vocab=1024)
    space = SearchSpace(spec=spec, seq=seq, global_batch=batch, gpus=(world,), gpus_per_node=4)
    inp = SearchInputs(space=space, gpu="a100-sxm4-80gb", top=3)
    r = search(inp, FLAT)
    assert r.feasible + r.over_by_states + r.over_by_activations == r.evaluated
    rows, values = evaluate_all(inp, FLAT, world)
    assert len(rows["t"]) == r.evaluated
    # search's own rules: it fits (fits_on_card at the memory's low end) and leaves the headroom (not fragile)
    import numpy as np
    from commcost.analyses.plan.search_inputs import memory_fragile
    from commcost.workload.memory import fits_on_card

    fits = np.asarray(fits_on_card(values["device_low_bytes"], values["capacity_bytes"]), dtype=bool)
    safe = fits & ~np.asarray(memory_fragile(values["memory_bytes"], values["capacity_bytes"], inp.headroom,
                                             values["nccl_high_bytes"]), dtype=bool)
    if safe.any():
        assert all(math.isfinite(p.step_s) and p.step_s > 0 for p in r.plans)
        assert [p.step_s for p in r.plans] == sorted(p.step_s for p in r.plans)
        # the grid's fastest safe configuration is among the layouts search plans; each is priced at its bucket
        # advice's cap, which exposes at most max(5%, 50 us) more than the least-exposed cap (commcost.step.
        # bucket_advice): so the best result is no slower than the grid's minimum by more than that
        i = int(np.argmin(np.where(safe, values["step_s"], np.inf)))
        slack = max(0.05 * float(values["exposed_comm_s"][i]), 50e-6)
        assert r.plans[0].step_s <= float(values["step_s"][i]) + slack + 1e-12
    # the grid step of each result is the plan's at the cap it was ranked at; printed at its advice's cap
    _at_advised_caps(r)


CLI = ["search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "64", "--seq", "8192"]


def test_plan_of_the_top_configuration_prints_what_search_printed(capsys):
    assert main([*CLI, "--top", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert d["evaluated"] > 0 and 0 < d["feasible"] <= d["evaluated"] and d["elapsed_s"] > 0
    top = d["results"][0]
    flags = top["plan_flags"].split()
    assert main(["plan", "--model", "llama3-8b", "--system", "dgx-h100", "--global-batch", "64", "--seq", "8192",
                 *flags, "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    for key in p:
        if key == "sensitivity":      # plan's re-plans of one layout; search ranks the whole space instead
            continue
        assert top[key] == p[key], key
    # the text: the best row's step, memory and layout as plan prints them
    assert main([*CLI, "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert main(["plan", "--model", "llama3-8b", "--system", "dgx-h100", "--global-batch", "64", "--seq", "8192",
                 *flags]) == 0
    ptext = capsys.readouterr().out
    from commcost.core.units import format_bytes, format_seconds

    row = [ln for ln in text.splitlines() if ln.strip().startswith("1 ")][0]
    assert format_seconds(p["step_s"]) in row and format_bytes(p["memory"]["total_bytes"]) in row
    assert f"step {format_seconds(p['step_s'])}" in ptext
    assert "best: " + top["plan_command"] in text.replace(" \\\n    ", " ") and "why:" in text
    assert top["plan_command"].endswith(top["plan_flags"])


def test_fix_on_the_command_line(capsys, tmp_path):
    csv_path = tmp_path / "top.csv"
    assert main([*CLI, "--fix", "tp=2", "--fix", "recompute=selective", "--top", "4", "--json", "--csv",
                 str(csv_path)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["fixed"] == {"tp": 2, "recompute": "selective"}
    assert all(r["layout"]["tp"] == 2 and r["layout"]["recompute"] == "selective" for r in d["results"])
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 5 and "layout.tp" in lines[0]


def test_why_best_names_the_term_that_differs():
    from dataclasses import replace

    from commcost.report.search import why_best
    from commcost.workload.transformer import model_spec

    space = SearchSpace(spec=model_spec("llama3-8b"), seq=8192, global_batch=64, gpus=(16,), gpus_per_node=8)
    inp = SearchInputs(space=space, gpu="h100-sxm")
    row = dict(W=16, t=1, p=1, v=1, c=1, e=1, d=16, b=1, uneven=0, sp=0, rc=0, zero=1, cap=0)
    a = plan(plan_inputs_of(inp, row), FLAT)
    b = plan(plan_inputs_of(inp, dict(row, p=2, d=8)), FLAT)          # same compute, plus a bubble
    best, runner = (a, b) if a.step_s < b.step_s else (b, a)
    text = why_best(best, runner)
    diffs = {"pipeline bubble": runner.pipeline_bubble_s - best.pipeline_bubble_s,
             "compute": runner.compute_s - best.compute_s}
    assert max(diffs, key=diffs.get) in text and "faster" in text
    assert "tie" in why_best(a, replace(a))


def test_ctrl_c_returns_the_best_so_far(monkeypatch):
    import commcost.analyses.plan.search as S
    from commcost.workload.transformer import model_spec

    monkeypatch.setattr(S, "CHUNK_ROWS", 512)
    calls = []

    def progress(done, total, elapsed_s):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    space = SearchSpace(spec=model_spec("llama3-8b"), seq=8192, global_batch=64, gpus=(16,), gpus_per_node=8)
    r = search(SearchInputs(space=space, gpu="h100-sxm", top=3), FLAT, progress=progress)
    assert r.interrupted and len(r.plans) == 3 and r.priced == 1024     # two passes of 512 priced
    full = search(SearchInputs(space=space, gpu="h100-sxm", top=3), FLAT)
    assert not full.interrupted and full.priced == full.feasible > r.priced
    assert full.plans[0].step_s <= r.plans[0].step_s


@pytest.mark.parametrize("argv, needle", [
    (["--objective", "cost"], "--price-per-gpu-hour"),
    (["--gpus-range", "8:64"], "--gpus N or --gpus-range"),
    (["--fix", "nope=1"], "--fix takes"),
    (["--precision", "fp3"], "unknown precision"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main([*CLI, *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_gpus_range_parsing():
    from commcost.cli.search import parse_gpus_range

    assert parse_gpus_range("256:2048") == (256, 512, 1024, 2048)
    assert parse_gpus_range("64:256:64") == (64, 128, 192, 256)
    with pytest.raises(SystemExit):
        parse_gpus_range("8:4")


def test_without_numpy_one_line_install_hint(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "numpy", None)
    space = SearchSpace(spec=TINY, seq=64, global_batch=2, gpus=(2,), gpus_per_node=2)
    with pytest.raises(InputError, match=r"pip install 'commcost\[sweep\]'"):
        search(SearchInputs(space=space, gpu="h100-sxm"), FLAT)


def test_pareto_plot(tmp_path, capsys):
    out = tmp_path / "p.png"
    assert main(["search", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus-range", "8:16", "--global-batch",
                 "64", "--seq", "8192", "--plot", str(out), "--top", "2"]) == 0
    assert out.stat().st_size > 10_000 and "plot:" in capsys.readouterr().out
    from commcost.report.search import pareto_front
    import numpy as np

    # hand case: (1, 5) (2, 3) (3, 4) (4, 1): (3, 4) is beaten by (2, 3)
    x, y = np.array([3.0, 1.0, 4.0, 2.0]), np.array([4.0, 5.0, 1.0, 3.0])
    assert list(pareto_front(x, y)) == [1, 3, 2]
