"""Compute time of a step's FLOPs: peaks per precision and the achieved efficiency.

``T = F / (P_peak(x) eta)`` with ``F`` the FLOPs the step executes (:mod:`commcost.plan`),
``P_peak(x)`` the GPU's dense tensor-core peak for precision ``x`` and ``eta`` the achieved
fraction of it. Peaks and default efficiencies live in ``hardware/compute.json``, each with its
source; the defaults are fitted on published runs (benchmarks/plan_accuracy.py) and every plan
says which one it used. ``--mfu``/``--efficiency`` override it; ``--measured-step-s`` fits it.
"""

from __future__ import annotations

from functools import lru_cache

from commcost.errors import InputError

__all__ = ["PRECISIONS", "precision_class", "peak_flops_per_s", "default_efficiency"]

PRECISIONS = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4")
"""``--precision`` values: the GEMM input format of the transformer layers."""

_CLASS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}


@lru_cache(maxsize=1)
def _table() -> dict:
    """compute.json, parsed once (read-only: callers never mutate it)."""
    from commcost.hardware import load_preset_file
    return load_preset_file("compute.json")


def precision_class(precision: str) -> str:
    """``bf16`` (bf16, fp16), ``fp8`` (fp8, mxfp8) or ``fp4`` (nvfp4)."""
    try:
        return _CLASS[precision]
    except KeyError:
        raise InputError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})") from None


def peak_flops_per_s(gpu: str, precision: str) -> float:
    """Dense tensor-core peak of GPU preset ``gpu`` at ``precision``, FLOP/s."""
    from commcost.hardware import lookup
    row = lookup(_table()["peak_flops"], gpu, "GPU (compute.json)")
    cls = precision_class(precision)
    if cls not in row:
        have = ", ".join(k for k in row if k != "source")
        raise InputError(f"{gpu} has no {precision} tensor cores (it has: {have})")
    return float(row[cls])


def default_efficiency(gpu: str, precision: str, *, moe: bool = False) -> tuple[float, str]:
    """``(eta, where it comes from)`` for GPU ``gpu`` at ``precision``."""
    eff = _table()["efficiency"]
    cls = precision_class(precision)
    row = eff.get(gpu, {})
    if cls in row:
        value, where = float(row[cls]), f"compute.json efficiency[{gpu}][{cls}], fitted on published runs"
    else:
        value, where = float(eff["default"][cls]), (f"compute.json efficiency[default][{cls}], no {gpu} {cls} "
                                                     f"run to fit it on (how it was chosen: compute.json _fit)")
    if moe:
        value *= float(eff["moe_factor"])
        where += f" x moe_factor {eff['moe_factor']:g}"
    return value, where
