"""Text and JSON of :class:`commcost.analyses.plan.training_cost.TrainingCost` (``plan`` and ``search``)."""

from __future__ import annotations

from commcost.analyses.interval import training_interval

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.interval import StepInterval
    from commcost.analyses.plan.training_cost import TrainingCost

__all__ = ["training_to_dict", "render_training"]


def training_to_dict(c: TrainingCost, interval: StepInterval | None = None) -> dict[str, object]:
    """The ``training`` JSON object: ``tokens``, ``days``, ``gpu_hours``, ``cost_usd`` (US dollars; null
    without a price), ``price_usd_per_gpu_hour``, ``tokens_per_s_per_gpu``, ``gpus``; and ``cost`` and
    ``price_per_gpu_hour``, the same two numbers under their first names (kept for readers of those);
    ``days_interval``, ``gpu_hours_interval``, ``cost_usd_interval`` ``[low, high]`` at the step's prediction
    interval (:func:`commcost.analyses.interval.training_interval`; null without ``interval`` or a price)."""
    ivs = (training_interval(c, interval) if interval is not None
           else {"days_interval": None, "gpu_hours_interval": None, "cost_usd_interval": None})
    return {"tokens": c.tokens, "days": c.days, "gpu_hours": c.gpu_hours, "cost": c.cost,
            "price_per_gpu_hour": c.price_per_gpu_hour, "tokens_per_s_per_gpu": c.tokens_per_s_per_gpu,
            "gpus": c.gpus, "cost_usd": c.cost, "price_usd_per_gpu_hour": c.price_per_gpu_hour, **ivs}


def _tokens(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:,.4g}{unit}"
    return f"{n:,.0f}"


def render_training(c: TrainingCost, interval: StepInterval | None = None) -> str:
    """One line: days, GPU-hours and dollars, with the formula; then their prediction interval."""
    money = (f", ${c.cost:,.0f} at ${c.price_per_gpu_hour:,.2f}/GPU-hour" if c.cost is not None
             else " (give --price-per-gpu-hour for dollars)")
    return (f"training {_tokens(c.tokens)} tokens: {c.days:,.1f} days on {c.gpus:,} GPUs, "
            f"{c.gpu_hours:,.0f} GPU-hours{money}  (GPU-hours = tokens / "
            f"{c.tokens_per_s_per_gpu:,.0f} tokens/s/GPU / 3600; days = GPU-hours / GPUs / 24)"
            + ("" if interval is None else _interval_words(c, interval)))


def _interval_words(c: TrainingCost, iv: StepInterval) -> str:
    days, hours = iv.per_step(c.days), iv.per_step(c.gpu_hours)
    money = "" if c.cost is None else ", ${:,.0f}-${:,.0f}".format(*iv.per_step(c.cost))
    return (f"; {iv.coverage:.0%} interval {days[0]:,.1f}-{days[1]:,.1f} days, {hours[0]:,.0f}-{hours[1]:,.0f} "
            f"GPU-hours{money}")
