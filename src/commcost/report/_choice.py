"""Why a CommModel ran its algorithm, in words: the one place a collective's
:class:`~commcost.comm.collectives.AlgorithmChoice` becomes the sentence ``budget``, ``collective`` and
``trace`` print (and put under ``reason`` in their JSON). The model records the choice as data on every
priced collective; only a report that shows it pays for the sentence."""

from __future__ import annotations

from commcost.comm.collectives import AlgorithmChoice, ChoiceKind, CollectiveCost
from commcost.core.units import format_seconds as t

__all__ = ["choice_text", "reason_text"]

_FIXED = {
    ChoiceKind.FLAT: "flat link: the drill's ring formula",
    ChoiceKind.NAMED: "asked for by name",
    ChoiceKind.ONE_RANK: "one rank: nothing to send",
}


def choice_text(choice: AlgorithmChoice | None, cost: CollectiveCost) -> str:
    """``choice`` of ``cost`` in words ("" for None): the runner-up's terms beside the winner's for
    :data:`~commcost.comm.collectives.ChoiceKind.FASTEST`, the fitted regime for a profile's."""
    if choice is None:
        return ""
    fixed = _FIXED.get(choice.kind)
    if fixed is not None:
        return fixed
    if choice.kind is ChoiceKind.ONLY:
        return f"the only algorithm {choice.backend} runs for {cost.op.value} here"
    if choice.kind is ChoiceKind.REGIME:
        return f"calibrated regime {choice.regime} of {choice.regimes} ({choice.regime_fit.describe()})"
    r_lat, r_bw = choice.runner_up_latency_s, choice.runner_up_bandwidth_s
    return (f"fastest of {', '.join(a.value for a in choice.ranked)} ({choice.backend}); runner-up "
            f"{choice.ranked[1].value} {t(r_lat + r_bw)} (latency {t(r_lat)} + bandwidth {t(r_bw)}) "
            f"vs {t(cost.total_s)} (latency {t(cost.latency_s)} + bandwidth {t(cost.bandwidth_s)})")


def reason_text(cost: CollectiveCost) -> str:
    """Why ``cost``'s algorithm priced it, in words (:func:`choice_text` of its own choice)."""
    return choice_text(cost.choice, cost)
