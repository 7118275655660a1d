"""Text and JSON of :class:`commcost.analyses.plan.training_cost.TrainingCost` (``plan`` and ``search``)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.training_cost import TrainingCost

__all__ = ["training_to_dict", "render_training"]


def training_to_dict(c: TrainingCost) -> dict[str, object]:
    """The ``training`` JSON object: ``tokens``, ``days``, ``gpu_hours``, ``cost_usd`` (US dollars; null
    without a price), ``price_usd_per_gpu_hour``, ``tokens_per_s_per_gpu``, ``gpus``; and ``cost`` and
    ``price_per_gpu_hour``, the same two numbers under their first names (kept for readers of those)."""
    return {"tokens": c.tokens, "days": c.days, "gpu_hours": c.gpu_hours, "cost": c.cost,
            "price_per_gpu_hour": c.price_per_gpu_hour, "tokens_per_s_per_gpu": c.tokens_per_s_per_gpu,
            "gpus": c.gpus, "cost_usd": c.cost, "price_usd_per_gpu_hour": c.price_per_gpu_hour}


def _tokens(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:,.4g}{unit}"
    return f"{n:,.0f}"


def render_training(c: TrainingCost) -> str:
    """One line: days, GPU-hours and dollars, with the formula."""
    money = (f", ${c.cost:,.0f} at ${c.price_per_gpu_hour:,.2f}/GPU-hour" if c.cost is not None
             else " (give --price-per-gpu-hour for dollars)")
    return (f"training {_tokens(c.tokens)} tokens: {c.days:,.1f} days on {c.gpus:,} GPUs, "
            f"{c.gpu_hours:,.0f} GPU-hours{money}  (GPU-hours = tokens / "
            f"{c.tokens_per_s_per_gpu:,.0f} tokens/s/GPU / 3600; days = GPU-hours / GPUs / 24)")
