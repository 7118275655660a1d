"""What a training run of ``N`` tokens costs: days, GPU-hours and dollars, from tokens/s/GPU.

Symbols: ``N`` tokens to train on, ``r`` tokens/s per GPU (``B s / (step W)``, a plan's
:attr:`~commcost.analyses.plan.plan.Plan.tokens_per_s_per_gpu`), ``W`` GPUs, ``p`` dollars per GPU-hour.

* GPU-hours ``H = N / r / 3600``: every GPU processes ``r`` tokens a second;
* days ``D = H / W / 24``: ``W`` GPUs run those hours side by side, around the clock;
* cost ``C = H p``;
* dollars per million tokens ``1e6 p / (3600 r)`` (``search --objective cost``'s ranking key,
  ``1e6 p W step / (3600 B s)``: the same quantity, as ``r = B s / (step W)``).

Wall-clock only: no restarts, failures, evaluation or checkpoint stalls (the days are a lower bound
on a real run's). Kernels are plain functions of floats that also work elementwise on numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.core.limits import MAX_GPUS, MAX_PRICE_PER_GPU_HOUR, MAX_TRAIN_TOKENS
from commcost.core.validation import require_at_most, require_count, require_finite_positive

__all__ = ["TrainingCost", "training_cost", "gpu_hours", "usd_per_million_tokens", "parse_token_count",
           "SECONDS_PER_HOUR", "HOURS_PER_DAY"]

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0

_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
"""Decimal multipliers a token count may end with (``15T`` = 15e12 tokens)."""


def gpu_hours(tokens, tokens_per_s_per_gpu):
    """``H = N / r / 3600`` GPU-hours. Array-safe."""
    return tokens / tokens_per_s_per_gpu / SECONDS_PER_HOUR


def usd_per_million_tokens(price_per_gpu_hour, tokens_per_s_per_gpu):
    """``1e6 p / (3600 r)`` dollars per million tokens. Array-safe."""
    return 1e6 * price_per_gpu_hour / (SECONDS_PER_HOUR * tokens_per_s_per_gpu)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingCost:
    """A training run of ``tokens`` at one plan's throughput (module docstring)."""

    tokens: float
    """N: tokens to train on."""
    tokens_per_s_per_gpu: float
    """r: the plan's tokens/s per GPU."""
    gpus: int
    """W: GPUs the plan runs on."""
    gpu_hours: float
    """``H = N / r / 3600``."""
    days: float
    """``D = H / W / 24``: wall-clock days at that throughput."""
    price_per_gpu_hour: float | None
    """p, dollars per GPU-hour; None when not given."""
    cost: float | None
    """``C = H p`` dollars; None without a price."""


def training_cost(*, tokens: float, tokens_per_s_per_gpu: float, gpus: int,
                  price_per_gpu_hour: float | None = None) -> TrainingCost:
    """Days, GPU-hours and (with a price) dollars for ``tokens`` (module docstring)."""
    require_finite_positive("tokens", tokens)
    require_at_most("tokens", tokens, MAX_TRAIN_TOKENS)
    require_finite_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
    require_count("gpus", gpus)
    require_at_most("gpus", gpus, MAX_GPUS)
    if price_per_gpu_hour is not None:
        require_finite_positive("price_per_gpu_hour", price_per_gpu_hour, allow_zero=True)
        require_at_most("price_per_gpu_hour", price_per_gpu_hour, MAX_PRICE_PER_GPU_HOUR, "dollars")
    H = gpu_hours(tokens, tokens_per_s_per_gpu)
    return TrainingCost(tokens=tokens, tokens_per_s_per_gpu=tokens_per_s_per_gpu, gpus=gpus, gpu_hours=H,
                        days=H / gpus / HOURS_PER_DAY, price_per_gpu_hour=price_per_gpu_hour,
                        cost=None if price_per_gpu_hour is None else H * price_per_gpu_hour)


def parse_token_count(text: str) -> float:
    """``"2e12"``, ``"2T"``, ``"300B"``, ``"15t"`` -> tokens (decimal multipliers K, M, B/G, T); > 0."""
    t = text.strip()
    mult = _SUFFIX.get(t[-1:].upper(), 1.0) if t else 1.0
    body = t[:-1] if mult != 1.0 else t
    try:
        value = float(body) * mult
    except ValueError:
        raise InputError(f"expected a token count such as 2e12, 2T or 300B, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise InputError(f"a token count must be a finite number > 0, got {text!r}")
    return value
