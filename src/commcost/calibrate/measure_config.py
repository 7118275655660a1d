"""What ``commcost measure`` measures and how: :class:`MeasureConfig`, shared by the launcher
(:mod:`commcost.calibrate.measure`) and the ranks (:mod:`commcost.calibrate.measure_worker`), so
neither imports the other's module for it."""

from __future__ import annotations

from dataclasses import dataclass

from commcost.comm.collectives import Collective
from commcost.core.errors import InputError

__all__ = ["DTYPES", "MeasureConfig"]

DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
"""Element types and their sizes in bytes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureConfig:
    """What to measure and how."""

    backend: str
    """``gloo`` (CPU tensors) or ``nccl`` (CUDA tensors)."""
    ops: tuple[Collective, ...]
    """Collectives, measured in this order."""
    sizes_bytes: tuple[int, ...]
    """Message sizes, bytes (nccl-tests' convention per op)."""
    dtype: str = "float32"
    """Element type, a key of :data:`DTYPES`."""
    warmup: int = 5
    """Untimed calls before timing each size."""
    iters: int = 20
    """Timed calls per size."""
    statistic: str = "median"
    """How a rank summarises its timed calls: ``median`` (default), ``min`` or ``mean`` (nccl-tests' choice)."""
    timeout_s: float = 300.0
    """No progress for this long ends the run, seconds."""
    nproc: int = 2
    """Ranks to spawn locally (ignored under torchrun)."""

    def __post_init__(self) -> None:
        if self.backend not in ("gloo", "nccl"):
            raise InputError(f"backend must be gloo or nccl, got {self.backend!r}")
        if not self.ops:
            raise InputError("no collectives to measure")
        if not self.sizes_bytes or any(s <= 0 for s in self.sizes_bytes):
            raise InputError(f"sizes must be > 0 bytes, got {self.sizes_bytes}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.warmup < 0 or self.iters < 1:
            raise InputError(f"need warmup >= 0 and iters >= 1, got warmup={self.warmup} iters={self.iters}")
        if self.statistic not in ("median", "min", "mean"):
            raise InputError(f"statistic must be median, min or mean, got {self.statistic!r}")
        if not self.timeout_s > 0:
            raise InputError(f"timeout must be > 0 s, got {self.timeout_s}")
        if self.nproc < 2:
            raise InputError(f"need at least 2 ranks to measure a collective, got nproc={self.nproc}")
