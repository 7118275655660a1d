"""Fit the compute efficiency of ``plan`` from one measured run, and reuse it.

Given a measured step time ``T*`` (or model TFLOP/s per GPU ``X*``, converted with the plan's own
model-FLOP convention: ``T* = F_model / (X* W)``), find ``eta`` with ``plan(eta).step_s = T*``.
The step falls monotonically as ``eta`` rises (compute shrinks, windows that hide communication
shrink with it, exposed time can only grow by what compute lost), so bisection on
``eta`` in ``[ETA_MIN, 1]`` converges; a ``T*`` below the plan's step at ``eta = 1`` (communication
alone exceeds it) is refused with both numbers.

A calibration file is JSON: the fitted ``efficiency`` and what it was fitted on (model, family,
GPU, precision, layout, measured step); ``--calibration F`` applies it to other configurations and
says when the model family, GPU or precision differ.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from commcost.core.errors import InputError
from commcost.analyses.plan.plan import plan
from commcost.core.validation import require_finite_positive
from commcost.core.files import write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.comm.model import CommModel
    from commcost.analyses.plan.plan import PlanInputs

__all__ = ["ETA_MIN", "fit_efficiency", "efficiency_from", "model_family", "save_calibration", "load_calibration", "calibration_note"]

ETA_MIN = 1e-3
"""Lowest efficiency the fit searches."""
KIND = "commcost-plan-calibration"


def model_family(name: str) -> str:
    """``llama3-70b`` -> ``llama3``; ``megatron-gpt-145.6b`` -> ``megatron-gpt``; ``qwen3-30b-a3b`` -> ``qwen3``."""
    parts = name.split("-")
    while len(parts) > 1 and re.match(r"^(\d|a\d|x\d)", parts[-1]):
        parts.pop()
    return "-".join(parts)


def efficiency_from(inp: PlanInputs, model: CommModel, *, measured_step_s: float | None = None,
                    measured_flops_per_s: float | None = None) -> tuple[float | None, float | None]:
    """``(eta, T*)`` from one measurement, or ``(None, None)`` without one: a measured step ``T*`` as given, or
    the step a measured (or assumed) model FLOP rate per GPU ``X*`` gives with the plan's own model-FLOP
    convention, ``T* = F_model / (X* W)`` (module docstring); ``eta`` is :func:`fit_efficiency` at ``T*``.
    What ``commcost plan`` runs on ``--measured-step-s``, ``--measured-tflops`` and ``--mfu``."""
    if measured_flops_per_s is not None:
        measured_step_s = plan(inp, model).model_flops_per_step / (measured_flops_per_s * inp.layout.world)
    if measured_step_s is None:
        return None, None
    return fit_efficiency(inp, model, measured_step_s), measured_step_s


def fit_efficiency(inp: PlanInputs, model: CommModel, measured_step_s: float) -> float:
    """``eta`` with ``plan(inp with eta).step_s == measured_step_s`` (to 1e-9 relative)."""

    require_finite_positive("measured step", measured_step_s)

    def step(eta: float) -> float:
        return plan(replace(inp, efficiency=eta), model).step_s

    fastest = step(1.0)
    if measured_step_s < fastest:
        raise InputError(f"measured step {measured_step_s:.6g} s is below this plan's step at 100% compute "
                         f"efficiency ({fastest:.6g} s): the communication or bubble modelled exceeds it")
    slowest = step(ETA_MIN)
    if measured_step_s > slowest:
        raise InputError(f"measured step {measured_step_s:.6g} s needs an efficiency below {ETA_MIN:g} "
                         f"(plan at {ETA_MIN:g}: {slowest:.6g} s); check the configuration")
    lo, hi = ETA_MIN, 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if step(mid) > measured_step_s:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def save_calibration(path: str, inp: PlanInputs, efficiency: float, measured_step_s: float) -> None:
    """Write the calibration JSON (module docstring)."""
    doc = {"kind": KIND, "efficiency": efficiency, "model": inp.spec.name, "family": model_family(inp.spec.name),
           "gpu": inp.gpu, "precision": inp.precision, "measured_step_s": measured_step_s,
           "layout": inp.layout.to_dict(), "seq": inp.seq}

    write_atomic(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def load_calibration(path: str) -> dict:
    """Read and check a calibration file."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not a calibration file (invalid JSON: {exc.msg})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise InputError(f"{path}: not a commcost plan calibration (written by --save-calibration)")
    eta = doc.get("efficiency")
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not 0 < eta <= 1:
        raise InputError(f"{path}: efficiency must be in (0, 1], got {eta!r}")
    return doc


def calibration_note(doc: dict, inp: PlanInputs) -> str:
    """One line: where the efficiency comes from, and what differs from the calibrated run."""
    diffs = []
    if doc.get("family") != model_family(inp.spec.name):
        diffs.append(f"model family {doc.get('family')} -> {model_family(inp.spec.name)}")
    for key, now in (("gpu", inp.gpu), ("precision", inp.precision)):
        if doc.get(key) != now:
            diffs.append(f"{key} {doc.get(key)} -> {now}")
    where = f"calibrated on {doc.get('model')} ({doc.get('gpu')}, {doc.get('precision')}, step {doc.get('measured_step_s')} s)"
    return where + (f"; applied outside its scope: {', '.join(diffs)}" if diffs else "")
