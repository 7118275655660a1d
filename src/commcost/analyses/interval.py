"""The prediction interval on the step, and on everything a user pays for.

Symbols: ``t`` the plan's step; ``r_lo``, ``r_hi`` the ratios measured / predicted between which a share
``c`` (the coverage) of held-out published runs fell (``hardware/step_interval.json``: the 10th and 90th
percentiles of the leave-one-project-out of ``benchmarks/plan_accuracy.py``, ``c`` = 80%; dense and MoE
apart); ``(b_lo, b_hi)`` the step's measured band (:func:`commcost.analyses.uncertainty.plan_band`: every
collective at its class's measured ratio; on a system preset alone, else ``(t, t)``); ``u`` the plan's MFU and
``u*`` the best published MFU on that GPU and precision (``compute.json`` ``frontier_mfu``); ``t* = t u / u*``
the step at the frontier (the model FLOPs per step are fixed, so MFU goes as ``1 / step``).

    low  = max(min(r_lo t, b_lo), t*)
    high = max(r_hi t, b_hi, r_hi t*)          with t* = 0 where u <= u* (no frontier term)

* The residual ratios already hold the communication model's error on the validation runs; the band is the
  envelope for jobs whose communication weighs more than theirs. The two are united (the wider edge each
  side), not multiplied, so one error is not counted twice.
* Above the frontier no public run has reached ``u``: the step is taken to be no shorter than ``t*`` (the low
  edge) and as likely as the held-out runs say to run ``r_hi`` longer than that (the high edge). The plan's
  point step then lies below its interval: the interval, not the point, is what to budget on.

Carried to the quantities a user pays for, each a monotone function of the step at fixed work: tokens/s and
MFU go as ``1 / step`` (``(x t / high, x t / low)``); days, GPU-hours and dollars as ``step``
(``(x low / t, x high / t)``, :mod:`commcost.analyses.plan.training_cost`). :func:`step_edges` is array-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commcost.core.xp import SCALAR
from commcost.hardware import load_preset_file
from commcost.workload.compute import mfu_frontier

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan
    from commcost.analyses.plan.training_cost import TrainingCost
    from commcost.analyses.uncertainty import PlanBand

__all__ = ["StepInterval", "step_edges", "plan_interval", "interval_ratios", "training_interval"]


@lru_cache(maxsize=1)
def _table() -> dict:
    return load_preset_file("step_interval.json")


def interval_ratios(moe: bool) -> tuple[float, float, float]:
    """``(r_lo, r_hi, c)`` of dense (or MoE) plans (step_interval.json)."""
    t = _table()
    row = t["moe" if moe else "dense"]
    return float(row["ratio_low"]), float(row["ratio_high"]), float(t["coverage"])


def step_edges(xp, *, step_s, ratio_low, ratio_high, band_low_s, band_high_s, frontier_step_s):
    """``(low, high)`` of the step (module docstring); ``band_*`` = ``step_s`` without a band, ``frontier_step_s``
    = 0 at or under the frontier. Plain arithmetic: floats or numpy columns alike."""
    low = xp.maximum(xp.minimum(ratio_low * step_s, band_low_s), frontier_step_s)
    high = xp.maximum(xp.maximum(ratio_high * step_s, band_high_s), ratio_high * frontier_step_s)
    return low, high


@dataclass(frozen=True, slots=True, kw_only=True)
class StepInterval:
    """A plan's step interval and where its edges come from (module docstring)."""

    step_s: float
    """t: the plan's point step, seconds."""
    low_s: float
    """The interval's low edge, seconds."""
    high_s: float
    """The interval's high edge, seconds."""
    coverage: float
    """c: the share of held-out published runs whose ratio fell inside ``(r_lo, r_hi)``."""
    ratios: tuple[float, float]
    """``(r_lo, r_hi)``: measured / predicted, from the held-out residuals."""
    band_s: tuple[float, float] | None
    """``(b_lo, b_hi)``: the step's measured band; None without one."""
    frontier_step_s: float | None
    """``t*``: the step at the best published MFU, where the plan's MFU is above it; else None."""

    def per_step(self, x: float) -> tuple[float, float]:
        """``(x low / t, x high / t)``: the interval of a quantity proportional to the step (days, dollars)."""
        return x * self.low_s / self.step_s, x * self.high_s / self.step_s

    def per_second(self, x: float) -> tuple[float, float]:
        """``(x t / high, x t / low)``: the interval of a rate (tokens/s, TFLOP/s, MFU)."""
        return x * self.step_s / self.high_s, x * self.step_s / self.low_s


def plan_interval(p: Plan, band: PlanBand | None = None) -> StepInterval:
    """The interval of plan ``p``'s step (with ``band``, its measured band, where a system preset alone gives
    one)."""
    inp = p.inputs
    r_lo, r_hi, c = interval_ratios(inp.spec.is_moe)
    t = p.step_s
    frontier = mfu_frontier(inp.gpu, inp.precision)
    t_star = t * p.mfu / frontier[0] if frontier is not None and p.mfu > frontier[0] else None
    b = None if band is None else (band.step_s[0], band.step_s[1])
    low, high = step_edges(SCALAR, step_s=t, ratio_low=r_lo, ratio_high=r_hi,
                           band_low_s=t if b is None else b[0], band_high_s=t if b is None else b[1],
                           frontier_step_s=0.0 if t_star is None else t_star)
    return StepInterval(step_s=t, low_s=low, high_s=high, coverage=c, ratios=(r_lo, r_hi), band_s=b,
                        frontier_step_s=t_star)


def training_interval(c: TrainingCost, iv: StepInterval) -> dict[str, list[float] | None]:
    """``days_interval``, ``gpu_hours_interval``, ``cost_usd_interval`` (None without a price) of a training run
    at the plan's throughput: each proportional to the step."""
    return {"days_interval": list(iv.per_step(c.days)), "gpu_hours_interval": list(iv.per_step(c.gpu_hours)),
            "cost_usd_interval": None if c.cost is None else list(iv.per_step(c.cost))}
