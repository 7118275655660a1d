"""argparse plumbing shared by every subcommand: one-line errors and validated types.

Every type converter raises ``argparse.ArgumentTypeError`` with the value it
got; :class:`Parser` turns any parse error into one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Callable, NoReturn

from commcost.errors import InputError
from commcost.units import parse_size_bytes

__all__ = [
    "Parser", "fail", "positive_int", "nonneg_int", "positive_float", "nonneg_float",
    "fraction", "open_fraction", "size_list", "mib_list", "int_list", "size",
    "size_range", "collective_list", "collective",
]

PROG = "commcost"


def fail(message: str) -> NoReturn:
    """Print ``commcost: error: message`` as one line on stderr and exit 2."""
    one_line = " ".join(str(message).split())
    print(f"{PROG}: error: {one_line}", file=sys.stderr)
    raise SystemExit(2)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:  # noqa: D102 - argparse hook
        fail(message)


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1]."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text!r}")
    return value


def open_fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def _int(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int(text, 1)


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _int(text, 0)


def _list(text: str, item: Callable[[str], float], what: str) -> tuple:
    tokens = text.split(",")
    if not text.strip() or any(not t.strip() for t in tokens):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {what} with no empty items, got {text!r}")
    out = []
    for token in tokens:
        try:
            out.append(item(token.strip()))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"item {token.strip()!r} of {text!r}: {exc}") from None
    return tuple(out)


def mib_list(text: str) -> tuple[float, ...]:
    """``"1,8,25"`` (MiB, as PyTorch's ``bucket_cap_mb``) -> bytes."""
    return tuple(v * 2**20 for v in _list(text, positive_float, "positive sizes in MiB"))


def int_list(text: str) -> tuple[int, ...]:
    """``"1,8,64"`` -> positive integers."""
    return _list(text, positive_int, "positive integers")


def size(text: str) -> float:
    """``"1GiB"``, ``"25MB"``, ``"4096"`` -> bytes (> 0)."""
    try:
        value = parse_size_bytes(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def size_list(text: str) -> tuple[float, ...]:
    """``"1MiB,8MiB"`` -> bytes."""
    return _list(text, size, "sizes")


def size_range(text: str) -> tuple[float, float]:
    """``"1KiB:64MiB"`` -> (1024, 67108864) bytes; a single size ``"4MiB"`` is a range of one."""
    lo_text, sep, hi_text = text.partition(":")
    lo = size(lo_text.strip())
    hi = size(hi_text.strip()) if sep else lo
    if hi < lo:
        raise argparse.ArgumentTypeError(f"range must go from small to large, got {text!r}")
    return lo, hi


def collective_list(text: str) -> tuple:
    """``"all_reduce,all_gather"`` or ``"all"`` -> Collective members (names as in torch.distributed)."""
    from commcost.collectives import Collective

    if text.strip() == "all":
        return tuple(Collective)
    valid = ", ".join(c.value for c in Collective)

    def one(token: str) -> Collective:
        try:
            return Collective(token)
        except ValueError:
            raise argparse.ArgumentTypeError(f"unknown collective {token!r} (valid: {valid}, or all)") from None
    return _list(text, one, "collectives")  # type: ignore[arg-type]


def collective(text: str):
    """One collective name, e.g. ``"all_reduce"``."""
    ops = collective_list(text)
    if len(ops) != 1:
        raise argparse.ArgumentTypeError(f"expected one collective, got {text!r}")
    return ops[0]
