"""Which unstated inputs decide the answer: the step across the plausible values of each.

Published runs and users' plans often leave out the micro-batch, the virtual pipeline stages, the
recomputation and the stack. For each, :func:`sensitivity` re-plans the configuration at every value
the layout admits (the same :func:`commcost.analyses.plan.plan.plan`, nothing else changed) and reports the steps
and their spread ``(max - min) / step``, so a user knows which input to pin down before trusting
the number. Values the layout refuses (a micro-batch that does not divide the batch, virtual stages
without a pipeline) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commcost.core.errors import InputError
from commcost.analyses.plan.plan import plan
from commcost.workload.stacks import STACKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.comm.model import CommModel
    from commcost.analyses.plan.plan import Plan, PlanInputs

__all__ = ["SensitivityRow", "sensitivity", "MICRO_BATCHES", "VIRTUAL_STAGES"]

MICRO_BATCHES = (1, 2, 4, 8)
"""Micro-batch sizes tried."""
VIRTUAL_STAGES = (1, 2, 4, 8)
"""Virtual stages per pipeline rank tried (with a pipeline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SensitivityRow:
    """One input: the step at each admissible value."""

    input: str
    """The flag (``--micro-batch``, ``--vp``, ``--recompute``, ``--stack``)."""
    values: tuple[str, ...]
    """The values tried that the layout admits."""
    step_s: tuple[float, ...]
    """The step at each, seconds."""
    fits: tuple[bool, ...]
    """Whether each fits in memory (the low estimate, :attr:`commcost.workload.memory.MemoryBreakdown.fits`)."""
    current: str
    """The plan's own value."""

    @property
    def spread(self) -> float:
        """``(max - min) / step at the current value`` (0 with one value)."""
        base = self.step_s[self.values.index(self.current)]
        return (max(self.step_s) - min(self.step_s)) / base

    def to_dict(self) -> dict:
        return {"input": self.input, "current": self.current, "spread": self.spread,
                "values": [{"value": v, "step_s": s, "fits": f} for v, s, f in zip(self.values, self.step_s, self.fits)]}


def _try(inp: PlanInputs, model: CommModel, seen: dict, **changes) -> Plan | None:
    """The plan with ``changes``; ``seen`` holds the plans of inputs already priced (each row's current
    value is the plan's own inputs again: priced once, not once per row)."""
    layout_changes = {k: v for k, v in changes.items() if k in ("micro_batch", "vp", "recompute")}
    try:
        new = replace(inp, layout=replace(inp.layout, **layout_changes),
                      **{k: v for k, v in changes.items() if k not in layout_changes})
        if new not in seen:
            seen[new] = plan(new, model)
        return seen[new]
    except InputError:
        return None


def sensitivity(inp: PlanInputs, model: CommModel, base: Plan | None = None) -> tuple[SensitivityRow, ...]:
    """The step across each often-unstated input's admissible values (module docstring). ``base``, the
    plan of ``inp`` where the caller has it, is not priced again."""

    seen = {} if base is None else {inp: base}
    L = inp.layout
    trials = [("--micro-batch", "micro_batch", [str(b) for b in MICRO_BATCHES], str(L.micro_batch), int),
              ("--recompute", "recompute", ["none", "selective", "full"], L.recompute, str),
              # under auto, auto itself first: its kernels' fraction is not the resolved stack's (stacks.auto_kind)
              ("--stack", "stack", [s for s in STACKS if s != "auto" or inp.stack == "auto"], inp.stack, str)]
    if L.pp > 1:
        trials.insert(1, ("--vp", "vp", [str(v) for v in VIRTUAL_STAGES], str(L.vp), int))
    rows = []
    for flag, field, values, current, conv in trials:
        if current not in values:
            values = sorted({*values, current}, key=lambda x: (len(x), x))
        got = [(v, _try(inp, model, seen, **{field: conv(v)})) for v in values]
        got = [(v, p) for v, p in got if p is not None]
        if len(got) < 2 or current not in [v for v, _ in got]:
            continue
        rows.append(SensitivityRow(input=flag, values=tuple(v for v, _ in got),
                                   step_s=tuple(p.step_s for _, p in got),
                                   fits=tuple(p.memory.fits for _, p in got), current=current))
    return tuple(rows)
