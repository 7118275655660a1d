"""The sustained fractions of the operator model (commcost.workload.operators, ``u = u_gpu u_stack``), fitted on
published runs; benchmarks/_validation.py refits them per fold (leave-one-project-out, time split).

Fit: for each dense run, ``u_row``, the total fraction that makes ``plan`` give the published step
(bisection; the step falls as ``u`` rises). ``u_gpu`` = median of ``u_row`` over the GPU's Megatron-Core
runs (stacks megatron and nemo; a GPU without any takes the median over all of them);
``u_stack`` = median of ``u_row / u_gpu`` over the stack's runs (1 for megatron and nemo).
The folds are by project, read from tests/data/run_projects.csv; :func:`source_of` (the id's first part: nara,
kort, nemo, mb, tt24, lf, ...) names only the document a row comes from.
"""

from __future__ import annotations

import statistics

import commcost.hardware.registry as registry
import commcost.workload.operators as operators
import commcost.workload.stacks as stacks
from commcost.analyses.plan.plan import plan
from commcost.workload.stacks import resolve_stack

MEGATRON_CORE = ("megatron", "nemo")
SAME_DIE = {"h200-sxm": "h100-sxm", "b300": "b200", "h100-sxm-96gb": "h100-sxm", "b200-700w": "b200", "gb200": "b200",
            "gb300": "b300", "mi300x": "mi325x", "a100-sxm4-40gb": "a100-sxm4-80gb"}
"""GPUs without Megatron-Core runs of their own take their die's fraction (as kernels.json records)."""
SAME_CHIP = {"a800-sxm4-80gb": "a100-sxm4-80gb", "h800-sxm": "h100-sxm"}
"""Export variants: the same die at the same clocks, memory and HBM bandwidth, only NVLink cut (gpus.json).
Their runs are fitted together with their chip's, and take its fraction (as kernels.json records)."""


def chip(gpu: str) -> str:
    return SAME_CHIP.get(gpu, gpu)


# Stack versions that share one training loop (one base in stacks.json) share one ``u_stack`` (fitted on their rows together;
# Megatron-LM of 2021 and of 2023 (the legacy local transformer: its own kernels, priced as such, in Megatron's
# training loop) take Megatron-Core's reference, ``u_stack`` 1, and their rows fit ``u_gpu`` with it; llm-foundry
# of 2023, Triton FlashAttention in Composer's FSDP loop, fits fsdp's; so does AMD's train_fsdp.py over Transformer
# Engine layers, the fp8 path of the same FSDP loop).


def family(stack: str) -> str:
    """The release of today a row's stack descends from (``stacks.json`` ``base``, :func:`stacks.stack_family`);
    a stack without a row (``other``, ``jax``) is its own."""
    return stacks.stack_family(stack) if stack in stacks.KNOWN_STACKS[1:] else stack


def source_of(row: dict) -> str:
    return row["id"].split("-")[0]


def _set(gpu: str, stack: str, u_gpu: float, u_stack: float, *, kind: str | None = None) -> None:
    """Put the fractions into the loaded tables (this benchmark's process only) and drop the caches; ``kind``: the
    plan runs ``--stack auto``, which prices ``stack`` at ``auto_sustained[kind]``."""
    registry.kernels()["gpus"][gpu]["sustained"] = u_gpu
    if kind is None:
        stacks._table()["stacks"][stack]["sustained"] = u_stack
    else:
        stacks._table()["auto_sustained"][kind] = u_stack
    operators.kernel_rates.cache_clear()
    stacks.stack.cache_clear()


def kind_of(inp, *, auto: bool = False) -> str | None:
    """The :func:`commcost.workload.stacks.auto_kind` of ``inp``'s layout where it runs ``--stack auto`` (or ``auto``
    is asked), else None."""
    L = inp.layout
    if not (auto or inp.stack == "auto") or not stacks.auto_runs_implied(L):
        return None      # auto prices it as the stack that runs it, at that stack's own fraction
    return stacks.auto_kind(L.zero, L.tp, L.pp, L.cp)


def row_fraction(inp, model, measured_s: float) -> float | None:
    """``u_row`` (None when no u in 0.2-1.5 reproduces the step: communication or bubble exceed it)."""

    name = resolve_stack(inp.stack, inp.layout)[0]

    def step(u: float) -> float:
        _set(inp.gpu, name, u, 1.0, kind=kind_of(inp))
        return plan(inp, model).step_s

    lo, hi = 0.2, 1.5
    if step(hi) > measured_s or step(lo) < measured_s:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if step(mid) > measured_s else (lo, mid)
    return (lo + hi) / 2


def fit(fits: list[dict]) -> tuple[dict, dict, float]:
    """``(u_gpu, u_stack, fallback u_gpu)`` from rows ``{gpu, stack, u, declared}``; a stack without rows takes
    the median of the other non-Megatron-Core stacks' (entry ``None``), a GPU without the median over GPUs.

    ``u_stack`` = ``u_row / u_gpu`` separates the two only where both are known: a row whose GPU has no
    fraction of its own (no Megatron-Core run on it: the fallback would be taken for its GPU's share) or whose
    stack the source does not name or commcost has none for (``declared`` ``other`` or ``jax``: priced as the stack it resolves to, not evidence of
    that stack) fits no ``u_stack``, and no ``u_gpu`` either (:func:`core_rows`). What a prediction then takes from
    other GPUs' or stacks' runs, :func:`fallbacks` says."""
    core = core_rows(fits)
    u_gpu = {}
    for g in {chip(f["gpu"]) for f in core}:
        u_gpu[g] = statistics.median(f["u"] for f in core if chip(f["gpu"]) == g)
    fallback = statistics.median(u_gpu.values()) if u_gpu else 1.0
    for gpu, same in SAME_CHIP.items():
        if same in u_gpu:
            u_gpu[gpu] = u_gpu[same]
    for gpu, die in SAME_DIE.items():
        if gpu not in u_gpu and die in u_gpu:
            u_gpu[gpu] = u_gpu[die]
    u_stack = {}
    known = stack_rows(fits, u_gpu)
    for s in {family(f["stack"]) for f in known} - set(MEGATRON_CORE):
        u_stack[s] = statistics.median(f["u"] / u_gpu[f["gpu"]] for f in known if family(f["stack"]) == s)
    u_stack[None] = statistics.median(u_stack.values()) if u_stack else 1.0
    for kind in stacks.AUTO_KINDS:   # --stack auto: every named run of this kind of layout, whatever its stack
        runs = [f["u_auto"] / u_gpu[f["gpu"]] for f in auto_rows(fits, u_gpu, kind)]
        u_stack["auto", kind] = statistics.median(runs) if runs else u_stack[None]
    return u_gpu, u_stack, fallback


UNNAMED = ("other", "jax")
"""Declared ``stack`` values that name no stack commcost has (a paper's own code, JAX/XLA): such a run is priced
as the stack ``--stack auto`` resolves its layout to, which is no evidence of that stack's (or Megatron-Core's)
fraction."""


def core_rows(fits: list[dict]) -> list[dict]:
    """The rows that fit ``u_gpu``: Megatron-Core runs by the stack their source names (its family megatron or
    nemo), not by what ``--stack auto`` resolves an unnamed stack's layout to (a rule about layouts, which would
    otherwise decide which runs count as Megatron-Core evidence)."""
    return [f for f in fits if f.get("declared") not in UNNAMED and family(f["stack"]) in MEGATRON_CORE]


def stack_rows(fits: list[dict], u_gpu: dict) -> list[dict]:
    """The rows that fit a ``u_stack``: a named stack, on a GPU whose ``u_gpu`` is known."""
    return [f for f in fits if f.get("declared") not in UNNAMED and f["gpu"] in u_gpu]


def auto_rows(fits: list[dict], u_gpu: dict, kind: str) -> list[dict]:
    """The rows that fit ``auto_sustained[kind]``: every run of that kind of layout that ``--stack auto`` prices as
    its implied stack, whatever stack ran it, on a GPU whose ``u_gpu`` is known."""
    return [f for f in fits if f["gpu"] in u_gpu and f.get("u_auto") is not None
            and kind_of(f["r"]["inp"], auto=True) == kind]


def fallbacks(inp, fits: list[dict], fitted: tuple[dict, dict, float]) -> list[str]:
    """What a prediction of ``inp`` with ``fitted`` (:func:`fit` on ``fits``) takes from other GPUs' or other stacks'
    runs for want of its own (:func:`predict`): its GPU's ``u_gpu`` (none of its chip's or die's Megatron-Core runs
    among ``fits``: the median over GPUs), its stack's ``u_stack`` (no run of the stack's family: the median over the
    other stacks) or its kind's ``auto_sustained`` (no run of that kind: the same median). Empty: every fraction it
    takes was fitted on runs of its own GPU and stack."""
    u_gpu, u_stack, _ = fitted
    out = [] if inp.gpu in u_gpu else [f"u_gpu of {inp.gpu}: the median over GPUs"]
    name = resolve_stack(inp.stack, inp.layout)[0]
    kind = kind_of(inp)
    if kind is not None:
        if not auto_rows(fits, u_gpu, kind):
            out.append(f"auto_sustained {kind}: the median over stacks")
    elif family(name) not in MEGATRON_CORE and family(name) not in u_stack:
        out.append(f"u_stack of {family(name)}: the median over the other stacks")
    return out


def predict(inp, model, u_gpu: dict, u_stack: dict, fallback: float) -> float:
    """The plan's step with fitted fractions."""

    name = resolve_stack(inp.stack, inp.layout)[0]
    core = 1.0 if family(name) in MEGATRON_CORE else u_stack[None]
    kind = kind_of(inp)
    _set(inp.gpu, name, u_gpu.get(inp.gpu, fallback), u_stack.get(family(name), core) if kind is None
         else u_stack["auto", kind], kind=kind)
    return plan(inp, model).step_s


def restore() -> None:
    """Drop the in-process overrides (reload the packaged tables)."""
    registry.kernels.cache_clear()
    stacks._table.cache_clear()
    operators.kernel_rates.cache_clear()
    stacks.stack.cache_clear()
