"""Text and JSON of :class:`commcost.analyses.interval.StepInterval` (``plan`` and every ``search`` result)."""

from __future__ import annotations

from commcost.core.units import format_seconds

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.interval import StepInterval
    from commcost.analyses.plan.plan import Plan

__all__ = ["interval_to_dict", "interval_line", "interval_cell"]


def interval_to_dict(p: Plan, iv: StepInterval) -> dict[str, object]:
    """``step_interval_s`` ``[low, high]``, ``step_interval_coverage``, and the same interval carried to
    ``tokens_per_s_per_gpu_interval``, ``tflops_per_gpu_interval`` and ``mfu_interval`` (low, high: the rates'
    low edge is the step's high edge), ``step_interval_ratios`` (measured / predicted of the held-out runs),
    ``step_interval_frontier_s`` (the step at the best published MFU where the plan is above it, else null)."""
    return {"step_interval_s": [iv.low_s, iv.high_s], "step_interval_coverage": iv.coverage,
            "tokens_per_s_per_gpu_interval": list(iv.per_second(p.tokens_per_s_per_gpu)),
            "tflops_per_gpu_interval": list(iv.per_second(p.tflops_per_gpu)),
            "mfu_interval": list(iv.per_second(p.mfu)), "step_interval_ratios": list(iv.ratios),
            "step_interval_frontier_s": iv.frontier_step_s}


def interval_cell(iv: StepInterval) -> str:
    """``80% interval 1.23 s-1.67 s`` (a search table's cell), ``(MFU frontier)`` after it where the interval
    starts at the step of the best published MFU."""
    return (f"{iv.coverage:.0%} interval {format_seconds(iv.low_s)}-{format_seconds(iv.high_s)}"
            + (" (MFU frontier)" if iv.frontier_step_s is not None else ""))


def interval_line(p: Plan, iv: StepInterval) -> str:
    """The plan's interval line under the step: step, tokens/s/GPU and MFU, and where the edges come from."""
    tok, mfu = iv.per_second(p.tokens_per_s_per_gpu), iv.per_second(p.mfu)
    why = (f"held-out runs ran {iv.ratios[0]:.2f}-{iv.ratios[1]:.2f} x the prediction"
           + ("; the measured band" if iv.band_s is not None else "")
           + ("; above the best published MFU: starts at its step "
              f"{format_seconds(iv.frontier_step_s)}" if iv.frontier_step_s is not None else ""))
    return (f"  {interval_cell(iv)}: {tok[0]:,.0f}-{tok[1]:,.0f} tokens/s/GPU, MFU {mfu[0]:.1%}-{mfu[1]:.1%} "
            f"({why})")
