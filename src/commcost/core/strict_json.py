"""The one strict JSON writer every ``--json`` output goes through.

``json.dump(..., allow_nan=False)`` refuses a non-finite float only when it gets
there, after half the object is already on stdout. :func:`dump_json` walks the
whole object first and refuses a NaN or infinity (naming its JSON path, e.g.
``allreduce.bandwidth_s``) before a single byte is written, so stdout is
either one complete, strictly valid JSON document or empty.
"""

from __future__ import annotations

import math
from typing import Any, TextIO

from commcost.core.errors import InputError
import json
import sys

__all__ = ["dump_json", "dumps_json", "find_non_finite"]


def find_non_finite(obj: Any, path: str = "") -> tuple[str, float] | None:
    """The JSON path and value of the first non-finite float in ``obj``, or None.

    Dicts and lists/tuples are walked iteratively (no recursion limit on depth)."""
    stack: list[tuple[str, Any]] = [(path, obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return where or "(top level)", value
        elif isinstance(value, dict):
            items = list(value.items())
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(items))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def dumps_json(obj: Any, *, what: str = "result") -> str:
    """``obj`` as indented strict JSON text with a final newline.

    Raises :class:`InputError` naming the JSON path of a non-finite number: such
    a number is not JSON (RFC 8259), and it only arises from inputs outside
    the range the model can price."""
    bad = find_non_finite(obj)
    if bad is not None:
        where, value = bad
        raise InputError(f"the {what} {where} is not a finite number ({value}): an input is outside the range "
                         "the model can price (an extreme bandwidth, latency, size or step time)")

    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def dump_json(obj: Any, stream: TextIO | None = None, *, what: str = "result") -> None:
    """Write ``obj`` to ``stream`` (default stdout) as strict JSON, or nothing at all
    (see :func:`dumps_json`)."""

    text = dumps_json(obj, what=what)
    (sys.stdout if stream is None else stream).write(text)
