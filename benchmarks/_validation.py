"""Validation that cannot flatter itself: the out-of-sample figures of benchmarks/plan_accuracy.py.

Every figure here predicts a run with constants fitted without it:

* **leave-one-project-out** (the headline): a *project* is a framework's or a paper's documents taken together
  (every torchtitan document, pytorch/ao's torchtitan runs among them, is one project; NeMo's performance
  summaries, its long-sequence page, Megatron-Bridge's summaries and the DGX Cloud recipes of NeMo are one;
  Narayanan et al.'s two tables and Korthikanti et al.'s are Megatron-LM), read from the ``project`` column of
  tests/data/run_projects.csv, one line per run, never from the id. Each project's runs are predicted with the
  sustained fractions (benchmarks/_sustained.py) fitted on the other projects' dense runs.
* **time split**: the fractions fitted on the runs published before :data:`TIME_SPLIT` (column ``published``
  of the same file, year and month, with how each date is known in ``published_from``), every later run scored.
* **no stack named**: each held-out dense run as a new user would plan it: ``--stack auto``, the GPU's default
  system preset (:func:`default_system`: the first preset in systems.json with that GPU, the vendor's reference
  node), and none of the recipe's flags: what the implied stack's published recipes run in their place
  (:mod:`commcost.workload.recipes`, as ``commcost plan`` assumes with no ``--stack``: TP communication overlap
  and Megatron-Core's data-parallel bucket where the layout is Megatron-Core's, PyTorch DDP's bucket elsewhere),
  the model's preset rather than the run's variant, the pipeline split without the embedding and head counted as
  layers; the layout, batch, sequence, precision, recomputation, FlashAttention, compile and offload stay as the
  run's; MoE runs take what the implied stack's MoE recipes run (expert TP 1, the all-to-all dispatcher,
  Megatron-Core's 1F1B overlap where the schedule allows).

In the first two a **past release** of a stack (a ``stacks.json`` entry with a ``base``, or one of
:data:`_sustained.STACK_FAMILY`'s versions) whose every run is among the scored ones is priced as its base (:func:`release_base`): a release that serves
one project (or only runs published after the cut) was written while looking at those runs, so it is scored
as what the project would have been priced as without it.

The residuals of the leave-one-project-out give the prediction interval (:func:`interval`; shipped in
``hardware/step_interval.json``, read by :mod:`commcost.analyses.interval`). Every run's signed error under
each figure is written to ``benchmarks/plan_accuracy_rows.csv`` (``--write-rows``), committed, so that a change
that helps one project and hurts others shows in review.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import replace
from pathlib import Path

import _sustained as S

from commcost.comm.model import FabricModel
from commcost.comm.systems import system_group
from commcost.hardware.registry import systems
from commcost.workload.recipes import assumed_line, dense_items, dense_recipe_defaults, moe_items, moe_recipe_defaults
from commcost.workload.stacks import resolve_stack
from commcost.workload import stacks
from commcost.workload.transformer import model_spec

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = ROOT / "tests" / "data" / "run_projects.csv"
ROWS_CSV = Path(__file__).resolve().with_name("plan_accuracy_rows.csv")
TIME_SPLIT = "2024-09"
"""Runs published before this month fit; the runs of this month and later are scored."""
COVERAGE_PERCENT = 80
"""The interval's stated coverage: from the 10th to the 90th percentile of the held-out ratios."""
NO_STACK = ("jax",)
"""``stack`` values with no commcost stack (MaxText, Pax): reported apart, as in plan_accuracy."""


def attach_projects(results: list[dict]) -> None:
    """``r["project"]``, ``r["published"]`` of every result from :data:`PROJECTS`; a run missing there stops the
    benchmark (every run must say which project it belongs to)."""
    table = {row["id"]: row for row in csv.DictReader(PROJECTS.open(encoding="utf-8"))}
    missing = [r["row"]["id"] for r in results if r["row"]["id"] not in table]
    if missing:
        raise SystemExit(f"{PROJECTS.name} has no line for {', '.join(missing)}: add each run's project and date")
    for r in results:
        r["project"] = table[r["row"]["id"]]["project"]
        r["published"] = table[r["row"]["id"]]["published"]


def release_base(name: str) -> str:
    """The stack a past release differs from: stacks.json's ``base`` where the entry names one, else the stack
    whose training loop it shares (:func:`_sustained.family`)."""
    return stacks._table()["stacks"].get(name, {}).get("base") or S.family(name)


def lone_releases(results: list[dict], scored: list[dict]) -> set[str]:
    """The past releases every run of which is in ``scored`` (priced as their base while those are scored)."""
    users: dict[str, list[int]] = {}
    for r in results:
        if r["inp"].stack != "auto" and release_base(r["inp"].stack) != r["inp"].stack:   # a past release
            users.setdefault(r["inp"].stack, []).append(id(r))
    ids = {id(r) for r in scored}
    return {name for name, rs in users.items() if all(i in ids for i in rs)}


def default_system(gpu: str) -> str:
    """The system preset a new user with ``gpu`` picks: the first in systems.json with that GPU."""
    return next(name for name, s in systems().items() if s["gpu"] == gpu)


def auto_inputs(inp):
    """``inp`` as ``commcost plan`` prices it with no ``--stack`` and no recipe flag: ``--stack auto``, and the TP
    overlap and data-parallel bucket of the implied stack's recipes (:func:`commcost.workload.recipes.dense_recipe_defaults`)
    in place of the run's; with the words of its ``assumed:`` line. ``stacks.json`` ``auto_sustained`` is fitted on
    the runs priced this way (:func:`plan_accuracy.fit_fractions`), the inputs it prices."""
    L = inp.layout
    implied = resolve_stack("auto", L)[0]
    d = dense_recipe_defaults(stack=implied, tp=L.tp, dp=L.dp, cp=L.cp, zero=L.zero, grad_bytes=inp.grad_bytes)
    return replace(inp, stack="auto", **d), implied, dense_items(d, grad_bytes=inp.grad_bytes)


def new_user_inputs(row: dict, inp):
    """``(PlanInputs, FabricModel)`` of ``row`` as a new user plans it (module docstring)."""
    spec = model_spec(row["model"])
    name = default_system(inp.gpu)
    G = int(systems()[name]["gpus_per_node"])
    L = inp.layout
    topo, _ = system_group(name, nodes=-(-L.world // G))
    L = replace(L, split_counts_ends=False, uneven_pipeline=spec.layers % (L.pp * L.vp) != 0)
    # no recipe flag: what the implied stack's recipes run (TP overlap, DP bucket), as `commcost plan` assumes
    new, implied, items = auto_inputs(replace(inp, spec=spec, layout=L, gpus_per_node=G))
    if spec.is_moe:   # no MoE flag either: what the implied stack's MoE recipes run, as `commcost plan` assumes
        m = moe_recipe_defaults(stack=implied, tp=L.tp, dp=L.dp, cp=L.cp, ep=L.ep, pp=L.pp, vp=L.vp)
        new = replace(new, layout=replace(L, etp=m["etp"]), a2a=m["a2a"], moe_overlap=m["moe_overlap"],
                      fp8_dispatch=False)
        items += moe_items(m)
    return replace(new, defaults_note=assumed_line(implied, items)), FabricModel(topology=topo)


def _err(r: dict, inp, model, fit) -> float:
    return (S.predict(inp, model, *fit) - r["measured"]) / r["measured"]


def _as_base(inp, lone: set[str]):
    return replace(inp, stack=release_base(inp.stack)) if inp.stack in lone else inp


def leave_one_project_out(results: list[dict], fits: list[dict]) -> None:
    """``r["lopo"]`` and ``r["no_stack"]`` (every run): signed errors with the fractions fitted on
    the other projects' dense runs."""
    for project in sorted({r["project"] for r in results}):
        train = [x for x in fits if x["r"]["project"] != project]
        fit = S.fit(train)
        held = [r for r in results if r["project"] == project]
        lone = lone_releases(results, held)
        for r in held:
            inp = _as_base(r["inp"], lone)
            r["lopo"] = _err(r, inp, r["model"], fit)
            r["lopo_fallback"] = S.fallbacks(inp, train, fit)
            r["no_stack"] = _err(r, *new_user_inputs(r["row"], r["inp"]), fit)
    S.restore()


def time_split(results: list[dict], fits: list[dict], cut: str = TIME_SPLIT) -> None:
    """``r["time_split"]`` of every run published in ``cut`` or later, fitted on the runs published before."""
    train = [x for x in fits if x["r"]["published"] < cut]
    fit = S.fit(train)
    later = [r for r in results if r["published"] >= cut]
    lone = lone_releases(results, later)
    for r in later:
        inp = _as_base(r["inp"], lone)
        r["time_split"] = _err(r, inp, r["model"], fit)
        r["time_split_fallback"] = S.fallbacks(inp, train, fit)
    S.restore()


def p90(xs: list[float]) -> float:
    """Nearest rank: the ``ceil(0.9 n)``-th smallest."""
    xs = sorted(xs)
    return xs[-(-9 * len(xs) // 10) - 1]


def summary(signed: list[float]) -> dict:
    """n, median |error|, p90 |error|, median signed error, share too fast (signed < 0)."""
    a = [abs(e) for e in signed]
    return {"n": len(signed), "median": statistics.median(a), "p90": p90(a), "signed": statistics.median(signed),
            "too_fast": sum(e < 0 for e in signed) / len(signed)}


def line(signed: list[float]) -> str:
    s = summary(signed)
    return (f"n={s['n']}, median |err| {s['median']:.1%}, p90 {s['p90']:.1%}, median signed {s['signed']:+.1%}, "
            f"too fast {s['too_fast']:.0%}")


def headline_sets(results: list[dict]) -> dict[str, list[float]]:
    """The three headline figures' signed errors: dense runs on PyTorch stacks (the JAX rows apart)."""
    dense = [r for r in results if not r["inp"].spec.is_moe and r["row"]["stack"] not in NO_STACK]
    return {"lopo": [r["lopo"] for r in dense], "time_split": [r["time_split"] for r in dense if "time_split" in r],
            "no_stack": [r["no_stack"] for r in dense]}


def print_headline(results: list[dict]) -> None:
    """Leave-one-project-out, time split, no stack named: in that order, each with p90 and the share too fast."""
    dense = [r for r in results if not r["inp"].spec.is_moe and r["row"]["stack"] not in NO_STACK]
    sets = headline_sets(results)
    projects = sorted({r["project"] for r in dense})
    print(f"OUT OF SAMPLE, dense runs on PyTorch stacks ({len(dense)} runs, {len(projects)} projects):")
    print(f"  leave-one-project-out  {line(sets['lopo'])}")
    fallback_lines(dense, "lopo", "in the other projects")
    print(f"  time split             {line(sets['time_split'])}")
    print(f"    (fitted on the {sum(r['published'] < TIME_SPLIT for r in dense)} runs published before "
          f"{TIME_SPLIT}, scored on the later ones)")
    fallback_lines(dense, "time_split", "before the cut")
    print(f"  no stack named         {line(sets['no_stack'])}")
    print("    (--stack auto on the GPU's default preset, no recipe flags; fractions of the project's fold)")
    print("  leave-one-project-out by project:")
    for p in projects:
        es = [r["lopo"] for r in dense if r["project"] == p]
        print(f"    {p:<22} n={len(es):3d}  median signed {statistics.median(es):+7.1%}  "
              f"median |err| {statistics.median(abs(e) for e in es):6.1%}")
    moe = [r["lopo"] for r in results if r["inp"].spec.is_moe]
    if moe:
        print(f"  MoE, leave-one-project-out (recipe settings): {line(moe)}")
        print(f"  MoE, no stack named (the recipes' defaults):  "
              f"{line([r['no_stack'] for r in results if r['inp'].spec.is_moe])}")
    jax = [r["lopo"] for r in results if not r["inp"].spec.is_moe and r["row"]["stack"] in NO_STACK]
    if jax:
        print(f"  JAX/XLA runs (no commcost stack: --stack auto): {line(jax)}")
    long = [r["lopo"] for r in dense if r["inp"].seq >= 16384]
    if long:
        print(f"  seq >= 16K: {line(long)}")
    print()


def fallback_lines(dense: list[dict], key: str, where: str) -> None:
    """Say which scored runs of figure ``key`` took a fraction fitted on other GPUs' or stacks' runs for want of their
    own ``where`` (:func:`_sustained.fallbacks`), and the figure over the runs that did not."""
    took: dict[str, list[dict]] = {}
    for r in dense:
        for part in r.get(key + "_fallback", []):
            took.setdefault(part, []).append(r)
    if not took:
        return
    for part, rs in sorted(took.items()):
        print(f"    {len(rs)} run(s) with no run of their own {where}: {part}")
    own = [r[key] for r in dense if key in r and not r.get(key + "_fallback")]
    if own:
        print(f"    the others (their GPU and stack fitted on runs of their own): {line(own)}")


def interval(signed: list[float], coverage_percent: int = COVERAGE_PERCENT) -> tuple[float, float]:
    """``(r_lo, r_hi)``: the ``(100 - c)/2``-th and ``(100 + c)/2``-th percentiles (nearest rank) of the
    ratios measured / predicted = ``1 / (1 + e)`` of the signed errors ``e``. Between them lie about ``c``% of
    the held-out runs; a step ``t`` predicts the measured step in ``(r_lo t, r_hi t)``."""
    ratios = sorted(1.0 / (1.0 + e) for e in signed)
    n = len(ratios)
    lo = -(-n * (100 - coverage_percent) // 200)   # ceil(n (100 - c) / 200), integer arithmetic
    hi = -(-n * (100 + coverage_percent) // 200)
    return ratios[lo - 1], ratios[hi - 1]


def interval_table(results: list[dict]) -> dict:
    """What hardware/step_interval.json holds: the dense and MoE ratios from the leave-one-project-out."""
    dense = [r for r in results if not r["inp"].spec.is_moe and r["row"]["stack"] not in NO_STACK]
    moe = [r for r in results if r["inp"].spec.is_moe]
    out = {}
    for kind, sel in (("dense", dense), ("moe", moe)):
        lo, hi = interval([r["lopo"] for r in sel])
        out[kind] = {"ratio_low": round(lo, 3), "ratio_high": round(hi, 3), "runs": len(sel),
                     "projects": len({r["project"] for r in sel})}
    return {"coverage": COVERAGE_PERCENT / 100, **out}


FIELDS = ("id", "project", "published", "kind", "in_sample", "lopo", "time_split", "no_stack")


def row_errors(results: list[dict]) -> list[dict]:
    """One line per run: its signed error in sample and under each out-of-sample figure (blank: not scored)."""
    out = []
    for r in results:
        def f(key):
            return f"{r[key]:+.4f}" if key in r else ""
        out.append({"id": r["row"]["id"], "project": r["project"], "published": r["published"],
                    "kind": "moe" if r["inp"].spec.is_moe else ("jax" if r["row"]["stack"] in NO_STACK else "dense"),
                    "in_sample": f("in_sample"), "lopo": f("lopo"), "time_split": f("time_split"),
                    "no_stack": f("no_stack")})
    return out


def write_rows(results: list[dict], path: Path = ROWS_CSV) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(row_errors(results))


def dumps_interval(results: list[dict]) -> str:
    return json.dumps(interval_table(results), indent=2)
