"""The one bucket advice (:class:`commcost.step.bucket_advice.BucketRecommendation`) as JSON and text.

``budget``, ``timeline`` and ``plan`` print it with :func:`render_bucket_advice` and carry
:func:`bucket_advice_to_dict` as ``bucket_advice``, so the same step reads the same everywhere.
"""

from __future__ import annotations

from commcost.step.bucket_advice import STREAM_PER_TENSOR, BucketRecommendation
from commcost.core.units import MiB, format_seconds as t

__all__ = ["bucket_advice_to_dict", "render_bucket_advice", "PER_TENSOR_NOTE"]

PER_TENSOR_NOTE = "per-tensor gradient stream (DDP never splits a tensor: the last bucket holds the embedding)"
"""How the text names the per-tensor stream (the uniform one is named by each report's header)."""


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / MiB:,.4g} MiB"


def bucket_advice_to_dict(a: BucketRecommendation | None) -> dict[str, object] | None:
    """The ``bucket_advice`` JSON object (SI units; docs/timeline.md), None when not simulated."""
    if a is None:
        return None
    return {"recommended_bytes": a.recommended_bytes, "first_bucket_bytes": a.first_bucket_bytes,
            "exposed_s": a.exposed_s, "default_exposed_s": a.default_exposed_s, "good_bytes": list(a.good_bytes),
            "min_exposed_s": a.min_exposed_s, "tolerance_s": a.tolerance_s, "caps_tried": a.caps_tried,
            "stream": a.stream, "rule": a.rule}


def render_bucket_advice(a: BucketRecommendation) -> str:
    """One line, no indent: the good caps, the recommended one and the rule (and the stream when per tensor)."""
    good = a.good_bytes
    if not good:  # PyTorch's default beats every cap of the grid
        line = (f"simulated: none of the {a.caps_tried} caps tried exposes less than PyTorch's default "
                f"({t(a.default_exposed_s)}); recommended {_mib(a.recommended_bytes)} with a "
                f"{_mib(a.first_bucket_bytes)} first bucket, the default ({a.rule})")
    else:
        span = (", ".join(_mib(b) for b in good) if len(good) <= 4 else
                f"{len(good)} caps from {_mib(good[0])} to {_mib(good[-1])}")
        line = (f"simulated: caps exposing within max(5%, 50 us) of the least ({t(a.min_exposed_s)}): {span}; "
                f"recommended {_mib(a.recommended_bytes)} ({a.rule})")
    if a.stream == STREAM_PER_TENSOR:
        line += f"; {PER_TENSOR_NOTE}"
    return line
