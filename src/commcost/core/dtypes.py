"""Element sizes and the gradient message: the drill's part (a), ``S = N * bytes_per_grad``.

A module of its own, without dataclasses, so the drill's start-up does not build the per-layer
classes of :mod:`commcost.workload.shape` it never uses.
"""

from __future__ import annotations

from commcost.core.errors import InputError

__all__ = ["BYTES_PER_ELEMENT", "bytes_per_element", "gradient_bytes"]

BYTES_PER_ELEMENT: dict[str, int] = {
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
}
"""Bytes per gradient element for each dtype name accepted by ``--dtype``."""


def bytes_per_element(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``"bf16"`` -> 2); unknown names list the valid ones."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        valid = ", ".join(BYTES_PER_ELEMENT)
        raise InputError(f"unknown dtype {dtype!r} (valid: {valid})") from None


def gradient_bytes(params: float, bytes_per_grad: int) -> float:
    """Gradient all-reduce message ``S = N * bytes_per_grad``, bytes."""
    return params * bytes_per_grad
